/* Internal: the machinery every collective algorithm shares, one concern a header:
 *   coll_call.h    the call (gcomp_coll), groups, tags, reduction kernels, helpers;
 *   coll_blocks.h  building blocks over a group: dense, compressed, hier's pipeline;
 *   shm.h          a node's shared-memory segment and its collectives;
 *   coll_plan.h    the algorithm table, the planner and the cost model's pieces.
 * Algorithms include this one; a file that needs one concern only may include its header. */
#ifndef GCOMP_COLL_H
#define GCOMP_COLL_H

#include "coll_blocks.h"
#include "coll_call.h"
#include "coll_plan.h"
#include "shm.h"

#endif /* GCOMP_COLL_H */
