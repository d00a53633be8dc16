/* gcomp-info: what this build and machine offer, and every parameter (like fi_info). */
#include <stdio.h>
#include <string.h>

#include "gcomp.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: gcomp-info [-e] [--json] [-h]\n"
          "  -e, --env   list every GCOMP_* parameter with its value, default and help\n"
          "  --json      machine-readable output\n");
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

int main(int argc, char **argv) {
  int env = 0, json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-e") || !strcmp(argv[i], "--env")) env = 1;
    else if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
    else { fprintf(stderr, "gcomp-info: unknown option '%s'\n", argv[i]); usage(stderr); return 2; }
  }
  int s = gcomp_init();
  if (s != GCOMP_OK) {
    fprintf(stderr, "gcomp-info: %s: %s\n", gcomp_strerror(s), gcomp_last_error());
    return 1;
  }
  char providers[1024];
  gcomp_fabric_providers(providers, sizeof providers);
#ifdef GCOMP_BUILD_INFO
  const char *build = GCOMP_BUILD_INFO;
#else
  const char *build = "";
#endif
  if (json) {
    printf("{\"version\": "); json_str(gcomp_version());
    printf(", \"build\": "); json_str(build);
    printf(", \"cpu_features\": "); json_str(gcomp_cpu_features());
    printf(", \"isa_best\": "); json_str(gcomp_isa_best());
    printf(", \"isa_selected\": "); json_str(gcomp_isa_selected());
    printf(", \"libfabric\": "); json_str(gcomp_fabric_version());
    printf(", \"providers\": "); json_str(providers);
    printf(", \"algorithms\": [");
    for (int i = 0; i < gcomp_algo_count(); i++) {
      const char *name, *desc;
      gcomp_algo_describe(i, &name, &desc);
      printf("%s{\"name\": ", i ? ", " : "");
      json_str(name);
      printf(", \"description\": ");
      json_str(desc);
      printf("}");
    }
    printf("]");
    if (env) {
      printf(", \"params\": [");
      for (int i = 0; i < gcomp_param_count(); i++) {
        gcomp_param_info p;
        gcomp_param_describe(i, &p);
        printf("%s\n  {\"name\": ", i ? "," : "");
        json_str(p.name);
        printf(", \"type\": "); json_str(p.type);
        printf(", \"value\": "); json_str(p.value);
        printf(", \"default\": "); json_str(p.dflt);
        printf(", \"set\": %s, \"help\": ", p.is_set ? "true" : "false");
        json_str(p.help);
        putchar('}');
      }
      printf("]");
    }
    printf("}\n");
    return 0;
  }
  printf("gcomp %s\n", gcomp_version());
  printf("  build:        %s\n", build);
  printf("  cpu features: %s\n", gcomp_cpu_features());
  printf("  kernels:      %s (best for this CPU: %s; GCOMP_ISA overrides)\n", gcomp_isa_selected(),
         gcomp_isa_best());
  printf("  libfabric:    %s\n", gcomp_fabric_version());
  printf("  providers:    %s (tagged RDM)\n", providers[0] ? providers : "(none)");
  printf("\nallreduce algorithms (GCOMP_ALGO=auto lets the cost model pick per call):\n");
  for (int i = 0; i < gcomp_algo_count(); i++) {
    const char *name, *desc;
    gcomp_algo_describe(i, &name, &desc);
    printf("  %-12s %s\n", name, desc);
  }
  if (env) {
    printf("\nparameters (environment variables):\n");
    for (int i = 0; i < gcomp_param_count(); i++) {
      gcomp_param_info p;
      gcomp_param_describe(i, &p);
      printf("  %-22s %-7s = %-14s%s default %-12s %s\n", p.name, p.type,
             p.value[0] ? p.value : "\"\"", p.is_set ? " (set)" : "      ",
             p.dflt[0] ? p.dflt : "\"\"", p.help);
    }
  }
  return 0;
}
