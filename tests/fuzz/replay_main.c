/* Replays a fuzz target's corpus without libFuzzer: every file under the directories (or
 * the files) on the command line goes through LLVMFuzzerTestOneInput once. Built in every
 * tree, so seeds and crash reproducers (regressions/) run under ctest with the tree's
 * compiler and sanitizers. Fails when it finds no input at all. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 4096;
      uint8_t *p = realloc(buf, cap);
      if (!p) break;
      buf = p;
    }
    size_t r = fread(buf + len, 1, cap - len, f);
    if (!r) break;
    len += r;
  }
  fclose(f);
  /* an exact-size copy, as libFuzzer hands inputs over */
  uint8_t *exact = malloc(len ? len : 1);
  if (exact && (len == 0 || buf)) {
    if (len) memcpy(exact, buf, len);
    LLVMFuzzerTestOneInput(exact, len);
  }
  free(exact);
  free(buf);
  return 1;
}

static int run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return run_file(path);
  DIR *d = opendir(path);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.' || !strcmp(e->d_name, "README.md")) continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    n += run_path(sub);
  }
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int n = 0;
  for (int i = 1; i < argc; i++) n += run_path(argv[i]);
  printf("replayed %d inputs\n", n);
  return n > 0 ? 0 : 1;
}
