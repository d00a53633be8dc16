/* Debug fault injection (GCOMP_FAULT, off by default), so tests can reach failure paths
 * that real hardware reaches only rarely. GCOMP_FAULT=KIND:rank=R[,call=N] arms the fault
 * KIND on rank R (at its N-th call where the kind counts calls). Kinds:
 *   cqerr    the libfabric transport's completion queue reports an error entry that
 *            fi_cq_readerr cannot read (from the first progress after setup on)
 *   corrupt  rank R flips one byte of the first encoded frame it sends in its N-th
 *            allreduce call (N omitted: 1), after the frame was sealed: its receiver finds
 *            a checksum mismatch (GCOMP_ERR_CORRUPT). Needs a codec: dense calls send raw
 *            values with no checksum (a warning says nothing was corrupted). Handled in
 *            reduce/abort.c; the fault only injects: the corruption is found and reported
 *            as it would be in production (the abort notice is always on).
 *   wire-version  rank R advertises the next wire version (transport.h), as a rank of
 *            another build would: its rank card and communicator creation are refused
 */
#ifndef GCOMP_FAULT_H
#define GCOMP_FAULT_H

/* 1 when GCOMP_FAULT arms kind on this rank (*call, when not NULL, gets N or -1), 0 when it
 * does not; a malformed setting is a warning and arms nothing. */
int gcomp_fault_armed(const char *kind, int rank, long *call);

#endif /* GCOMP_FAULT_H */
