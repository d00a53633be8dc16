/* Test support: what tests (and gcomp-lab's kernel suites) do to the library that no
 * program should. Not part of libgcomp: tests/support is linked into the unit tests and
 * gcomp-lab only. */
#ifndef GCOMP_TEST_HOOKS_H
#define GCOMP_TEST_HOOKS_H

/* Re-reads the environment (after a test set GCOMP_* variables) and returns what gcomp_init
 * returns from then on. Not thread-safe: no other thread may be inside gcomp. */
int gcomp_reinit_for_testing(void);

/* gcomp_loopback_create with the environment's settings (as gcomp_init last read them), as
 * a communicator made without a config would get it: for tests that build communicators
 * over transports of their own. */
struct gcomp_transport;
int gcomp_loopback_for_testing(int size, const int *node_of, struct gcomp_transport **out);
/* gcomp_init, then gcomp_transport_create_env with the environment's settings: the ranks a
 * launcher started (gcomp-run), for test programs and gcomp-lab that time the transport */
int gcomp_transport_env_for_testing(struct gcomp_transport **out);

#endif /* GCOMP_TEST_HOOKS_H */
