/* Fuzz target: bootstrap's first round, the rank cards (fabric/ofi.c gcomp_ofi_cards_read),
 * and the topology their node names make (gcomp_topology_fill). The cards come from the
 * out-of-band allgather: any process that reached the rendezvous (another build, a program
 * that is no gcomp rank) may have written them.
 *
 * Input: one byte for the rank count (selector % MAX_RANKS + 1), then the cards' bytes, as
 * many as there are (the rest zero: a card that never came).
 *  - The verdict must be what magic and versions say (every card gcomp's magic, every
 *    version rank 0's), whichever rank reads: each rank holds every card and must refuse
 *    alike.
 *  - Every string is ended within its field afterwards, refused or not (the error and the
 *    liveness checks print and compare them).
 *  - Accepted, every rank's topology is the same table: ranks with one node name share a
 *    node, nodes are numbered by their lowest rank, and each rank's local ranks are its
 *    node's, ascending. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp.h"
#include "ofi_impl.h"

enum { MAX_RANKS = 12 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ended(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

/* rank me's view of the cards' node names against the one every rank must share */
static void check_topology(const char *const *keys, int n, int me, const int *node_of0) {
  gcomp_transport t = {.rank = me, .size = n};
  int *mem = NULL;
  if (gcomp_topology_fill(&t, keys, &mem) != GCOMP_OK) return;   /* out of memory */
  int next = 0, local = 0;
  for (int r = 0; r < n; r++) {
    if (node_of0 && t.node_of[r] != node_of0[r]) __builtin_trap();
    if (t.node_of[r] == next) next++;   /* a node's first rank: numbered in order */
    else if (t.node_of[r] < 0 || t.node_of[r] > next) __builtin_trap();
    for (int q = 0; q < r; q++)
      if ((strcmp(keys[q], keys[r]) == 0) != (t.node_of[q] == t.node_of[r])) __builtin_trap();
    if (t.node_of[r] == t.node) {
      if (local >= t.local_size || t.local_ranks[local] != r) __builtin_trap();
      if (r == me && t.local_rank != local) __builtin_trap();
      local++;
    }
  }
  if (t.nnodes != next || local != t.local_size || t.node != t.node_of[me]) __builtin_trap();
  free(mem);
}

/* The cards read twice, as rank 0 and as rank n-1 would: the verdict and the strings */
static int read_both(rank_card *cards, rank_card *copy, int n, const char **keys,
                     const char **keys2) {
  int want = GCOMP_OK;   /* what the cards say, worked out here on the raw bytes */
  for (int r = 0; r < n; r++)
    if (cards[r].magic != OFI_CARD_MAGIC || cards[r].version != cards[0].version) {
      want = GCOMP_ERR_INVALID;
      break;
    }
  int st = gcomp_ofi_cards_read(cards, n, cards[0].version, keys);
  int st2 = gcomp_ofi_cards_read(copy, n, copy[n - 1].version ^ 1u, keys2);
  if (st != want || st2 != st) __builtin_trap();
  if (st != GCOMP_OK && !gcomp_last_error()[0]) __builtin_trap();
  for (int r = 0; r < n; r++)
    if (!ended(cards[r].host, sizeof cards[r].host) ||
        !ended(cards[r].pidns, sizeof cards[r].pidns) ||
        !ended(cards[r].node, sizeof cards[r].node) || keys[r] != cards[r].node ||
        strcmp(keys[r], keys2[r]) != 0)
      __builtin_trap();
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int n = data[0] % MAX_RANKS + 1;
  size_t have = size - 1, all = (size_t)n * sizeof(rank_card);
  rank_card *cards = calloc((size_t)n, sizeof *cards), *copy = calloc((size_t)n, sizeof *copy);
  const char **keys = calloc((size_t)n, sizeof *keys), **keys2 = calloc((size_t)n, sizeof *keys2);
  if (cards && copy && keys && keys2) {
    memcpy(cards, data + 1, have < all ? have : all);
    memcpy(copy, cards, all);
    gcomp_transport t0 = {.rank = 0, .size = n};
    int *mem0 = NULL;
    if (read_both(cards, copy, n, keys, keys2) == GCOMP_OK &&
        gcomp_topology_fill(&t0, keys, &mem0) == GCOMP_OK) {
      for (int me = 0; me < n; me++) check_topology(keys, n, me, t0.node_of);
      free(mem0);
    }
  }
  free(cards), free(copy), free(keys), free(keys2);
  return 0;
}
