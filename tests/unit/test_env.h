/* Tests that set GCOMP_* variables put the environment back as they found it: test_env_save
 * once (a group setup), test_env_restore after each test (its teardown), so a variable the
 * user ran the tests with (GCOMP_TIMEOUT_MS on a slow machine) survives a test that sets or
 * unsets it. Include after cmocka.h. */
#ifndef GCOMP_TEST_ENV_H
#define GCOMP_TEST_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

enum { TEST_ENV_MAX = 256 };
static char *test_env_saved[TEST_ENV_MAX];   /* "NAME=value" copies */
static int test_env_n;

static inline int test_env_save(void **state) {
  (void)state;
  test_env_n = 0;
  for (char **e = environ; *e && test_env_n < TEST_ENV_MAX; e++)
    if (strncmp(*e, "GCOMP_", 6) == 0) test_env_saved[test_env_n++] = strdup(*e);
  return 0;
}

/* Unsets every GCOMP_* variable: a test that wants the defaults starts here */
static inline void test_env_clear(void) {
  for (int again = 1; again;) {
    again = 0;
    for (char **e = environ; *e; e++) {
      if (strncmp(*e, "GCOMP_", 6) != 0) continue;
      char name[256];
      size_t n = strcspn(*e, "=");
      snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), *e);
      unsetenv(name);   /* environ changed: look again from the start */
      again = 1;
      break;
    }
  }
}

/* Unsets every GCOMP_* variable, then sets the saved ones again */
static inline int test_env_restore(void **state) {
  (void)state;
  test_env_clear();
  for (int i = 0; i < test_env_n; i++) {
    if (!test_env_saved[i]) continue;
    char *eq = strchr(test_env_saved[i], '=');
    *eq = '\0';
    setenv(test_env_saved[i], eq + 1, 1);
    *eq = '=';
  }
  return 0;
}

static inline int test_env_free(void **state) {
  test_env_restore(state);
  for (int i = 0; i < test_env_n; i++) free(test_env_saved[i]);
  test_env_n = 0;
  return 0;
}

#endif
