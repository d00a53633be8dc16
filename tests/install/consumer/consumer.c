/* A program outside the tree, built against the installed gcomp. It calls into the codec
 * (zstd through a lossless stage), the communicator (libfabric) and an allreduce, so a
 * static link proves the dependencies reach it, not only gcomp_init. */
#include <stdio.h>
#include <string.h>

#include <gcomp.h>

static int fail(const char *what, int s) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, gcomp_strerror(s), gcomp_last_error());
  return 1;
}

int main(void) {
  gcomp_status s = gcomp_init();
  if (s != GCOMP_OK) return fail("gcomp_init", s);
  if (strcmp(gcomp_version(), "0.0.0") == 0) return 1;
  /* the library installed is the one this header describes */
  if (gcomp_version_number() != GCOMP_VERSION_NUMBER) {
    fprintf(stderr, "consumer: library %d, header %d\n", gcomp_version_number(),
            GCOMP_VERSION_NUMBER);
    return 1;
  }

  gcomp_codec *c = NULL;
  if ((s = gcomp_codec_create("bf16+zstd", &c)) != GCOMP_OK) return fail("codec", s);
  float x[256], y[256];
  for (int i = 0; i < 256; i++) x[i] = (float)i;   /* exact in bf16 */
  unsigned char frame[2048];
  size_t len = 0;
  if ((s = gcomp_encode(c, 0, x, 256, frame, sizeof frame, &len)) != GCOMP_OK) return fail("encode", s);
  if ((s = gcomp_decode(c, frame, len, y, 256)) != GCOMP_OK) return fail("decode", s);
  gcomp_codec_destroy(c);
  if (memcmp(x, y, sizeof x) != 0) return 1;

  gcomp_comm *comm = NULL;   /* no launcher variables: one rank alone, over libfabric */
  if ((s = gcomp_comm_init_env(&comm)) != GCOMP_OK) return fail("gcomp_comm_init_env", s);
  if ((s = gcomp_allreduce(comm, x, y, 256, GCOMP_FLOAT32, GCOMP_SUM, NULL, 0)) != GCOMP_OK)
    return fail("allreduce", s);
  gcomp_comm_destroy(comm);
  if (memcmp(x, y, sizeof x) != 0) return 1;
  printf("consumer: gcomp %s, kernels %s, codec and allreduce OK\n", gcomp_version(),
         gcomp_isa_selected());
  return 0;
}
