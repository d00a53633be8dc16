/* Test support: what tests (and gcomp-lab's kernel suites) do to the library that no
 * program should. Not part of libgcomp: tests/support is linked into the unit tests and
 * gcomp-lab only. */
#ifndef GCOMP_TEST_HOOKS_H
#define GCOMP_TEST_HOOKS_H

/* Re-reads the environment (after a test set GCOMP_* variables) and returns what gcomp_init
 * returns from then on. Not thread-safe: no other thread may be inside gcomp. */
int gcomp_reinit_for_testing(void);

#endif /* GCOMP_TEST_HOOKS_H */
