/* Fuzz target: the error-feedback residual file reader (gcomp_codec_load_residuals).
 * Input: one selector byte picking the codec, then the file's bytes, written to a private
 * temporary file. Loading either succeeds or fails with a status; a loaded store must
 * save again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gcomp.h"

/* the last one writes version-2 files (residuals and momentum velocities) */
static const char *const specs[] = {"none+ef", "topk:ratio=0.01+ef", "bf16+ef", "fp16+ef+zstd",
                                    "topk:ratio=0.01+ef:momentum=0.9"};
enum { NSPECS = sizeof specs / sizeof *specs };
static char in_path[64], out_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  snprintf(in_path, sizeof in_path, "/tmp/gcomp-fuzz-res-%ld.in", (long)getpid());
  snprintf(out_path, sizeof out_path, "/tmp/gcomp-fuzz-res-%ld.out", (long)getpid());
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (!in_path[0]) LLVMFuzzerInitialize(NULL, NULL);
  gcomp_codec *c = NULL;
  if (gcomp_codec_create(specs[data[0] % NSPECS], &c) != GCOMP_OK) return 0;
  FILE *f = fopen(in_path, "wb");
  if (f) {
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    int s = gcomp_codec_load_residuals(c, in_path);
    if (s > 0) __builtin_trap();
    if (s == GCOMP_OK) {
      int t = gcomp_codec_save_residuals(c, out_path);
      if (t != GCOMP_OK && t != GCOMP_ERR_UNSUPPORTED) __builtin_trap();
      unlink(out_path);
    }
    unlink(in_path);
  }
  gcomp_codec_destroy(c);
  return 0;
}
