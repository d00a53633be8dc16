/* libfabric loaded on first use (fabric/fi_lazy.h): not mapped before, mapped after, and a
 * library that cannot be loaded gives failures that say so rather than a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fi_lazy.h"

static int fabric_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[1024];
  int found = 0;
  if (!f) return -1;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, "libfabric.so") != NULL;
  fclose(f);
  return found;
}

/* first in the file: nothing before it has touched libfabric */
static void test_loaded_on_first_use(void **state) {
  (void)state;
  assert_int_equal(fabric_mapped(), 0);   /* start-up did not load it (0.2 s of PSM clocks) */
  uint32_t v = fi_version();
  assert_int_equal(fabric_mapped(), 1);
  assert_int_equal(FI_MAJOR(v), FI_MAJOR_VERSION);
  struct fi_info *info = fi_allocinfo();   /* the headers' inline one, redirected */
  assert_non_null(info);
  fi_freeinfo(info);
  assert_null(strstr(fi_strerror(FI_ENOSYS), "could not be loaded"));   /* libfabric's text */
}

static void test_missing_library(void **state) {
  (void)state;
  gcomp_fi_table t;
  assert_int_equal(gcomp_fi_open("libgcomp-test-no-such-fabric.so.1", &t), -1);
  struct fi_info *info = (struct fi_info *)&t;   /* any non-NULL: must come back NULL */
  assert_int_equal(t.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info), -FI_ENOSYS);
  assert_null(info);
  assert_null(t.dupinfo(NULL));
  struct fid_fabric *fab = (struct fid_fabric *)&t;
  assert_int_equal(t.fabric(NULL, &fab, NULL), -FI_ENOSYS);
  assert_null(fab);
  assert_int_equal(t.version(), 0);
  t.freeinfo(NULL);
  const char *why = t.strerror(FI_ENOSYS);
  assert_non_null(strstr(why, "libgcomp-test-no-such-fabric.so.1 could not be loaded: "));
  assert_non_null(strstr(why, "apt-get install libfabric1"));
  /* the process's own table is untouched by a failed open */
  assert_int_equal(FI_MAJOR(fi_version()), FI_MAJOR_VERSION);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loaded_on_first_use),
      cmocka_unit_test(test_missing_library),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
