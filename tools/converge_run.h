/* gcomp-converge's run and compare subcommands (converge_run.c) */
#ifndef GCOMP_CONVERGE_RUN_H
#define GCOMP_CONVERGE_RUN_H

/* argv[0] is "run" or "compare"; returns the exit status */
int gcomp_converge_subcommand(int argc, char **argv);

#endif /* GCOMP_CONVERGE_RUN_H */
