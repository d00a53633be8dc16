/* Fuzz target: the codec spec parser. A spec is refused with GCOMP_ERR_INVALID and a
 * non-empty detail, or accepted; an accepted spec's canonical form parses to the same
 * canonical form (parse(print(s)) == s), and creates a codec. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gcomp.h"
#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1024) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  gcomp_spec a, b;
  int s = gcomp_spec_parse(text, &a);
  if (s != GCOMP_OK) {
    if (s != GCOMP_ERR_INVALID || !gcomp_last_error()[0]) __builtin_trap();
    free(text);
    return 0;
  }
  char pa[1024], pb[1024];
  size_t na = gcomp_spec_print(&a, pa, sizeof pa);
  if (na >= sizeof pa || na != strlen(pa)) __builtin_trap();
  if (gcomp_spec_parse(pa, &b) != GCOMP_OK) __builtin_trap();
  gcomp_spec_print(&b, pb, sizeof pb);
  if (strcmp(pa, pb) != 0) __builtin_trap();
  gcomp_codec *c = NULL;
  s = gcomp_codec_create(text, &c);
  /* a parsed spec creates a codec, unless it asks for something not built yet */
  if (s != GCOMP_OK && s != GCOMP_ERR_UNSUPPORTED) __builtin_trap();
  gcomp_codec_destroy(c);
  free(text);
  return 0;
}
