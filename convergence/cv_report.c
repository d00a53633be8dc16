/* Reports of a harness run: the table on stdout, JSON, JUnit XML (one test case per codec
 * and problem) and a hand-written SVG of the loss curves. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "converge.h"
#include "cv_check.h"

static double ratio_of(const gcomp_cv_run *base, const gcomp_cv_run *r) {
  return r->wire_bytes ? (double)base->wire_bytes / (double)r->wire_bytes : 0;
}

static const char *verdict_word(const gcomp_cv_verdict *v, int must_fail) {
  if (v->pass < 0) return "ERROR";
  if (must_fail) return v->pass ? "MISSED" : "flagged";
  return v->pass ? "pass" : "FAIL";
}

/* The first verdict with pairs: every codec of a problem is paired on the same rows. */
static const gcomp_cv_verdict *paired_verdict(const gcomp_cv_problem *pr) {
  for (int i = 0; i < pr->nruns; i++)
    if (pr->verdicts[i].paired.seeds > 0) return &pr->verdicts[i];
  return NULL;
}

/* ", fp16, bf16" of the codecs whose `bit` is unresolved, or "every codec's" */
static void unresolved_list(char *buf, size_t n, const gcomp_cv_problem *pr, unsigned bit,
                            int *count) {
  int have = 0, all = 0;
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < pr->nruns; i++) {
    const gcomp_cv_verdict *v = &pr->verdicts[i];
    double t = bit == GCOMP_CV_M_ACC ? v->tol.acc_pts : v->tol.loss_rel;
    if (v->paired.seeds == 0 || !isfinite(t)) continue;
    all++;
    if (!(v->unresolved & bit)) continue;
    have++;
    if (len < n) {
      int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", pr->runs[i].spec);
      if (w > 0) len += (size_t)w;
    }
  }
  if (have && have == all) snprintf(buf, n, "every codec");
  *count = have;
}

/* What the rows can resolve: one test row in points, the smallest drop the paired test
 * calls real, the loss's sampling error, and the tolerances finer than these. */
static void print_resolution(FILE *f, const gcomp_cv_problem *pr) {
  const gcomp_cv_verdict *v = paired_verdict(pr);
  if (!v && pr->base.logged && pr->base.status >= 0)
    fputs("  resolution: the logs say on how many test rows the accuracy is counted "
          "(test_rows) nowhere, so what a drop of a row is is not known\n", f);
  if (!v) return;
  const gcomp_cv_paired *pa = &v->paired;
  char list[320];
  int n = 0;
  if (pr->base.logged) {   /* net counts only: each drop read as rows lost, none gained */
    fprintf(f, "  resolution: %d test rows (one row %.2f points); a drop of d rows is read as "
            "d lost and none gained, and McNemar's paired test (one-sided, %g%%) calls it real "
            "from %d rows (%.2f points)", pa->rows, v->acc_row_pts, GCOMP_CV_PAIRED_ALPHA * 100,
            gcomp_cv_mcnemar_min_rows(GCOMP_CV_PAIRED_ALPHA), v->acc_min_pts);
    unresolved_list(list, sizeof list, pr, GCOMP_CV_M_ACC, &n);
    if (n) fprintf(f, ", coarser than the accuracy tolerance of %s", list);
    fputs("; the final loss is as logged (its sampling error is the program's)\n", f);
    return;
  }
  fprintf(f, "  resolution: %d test rows%s (one row %.2f points); McNemar's paired test "
          "(one-sided, %g%%) calls a drop real from %d rows (%.2f points)", pa->rows,
          pa->seeds > 1 ? " over the seeds" : "", v->acc_row_pts, GCOMP_CV_PAIRED_ALPHA * 100,
          gcomp_cv_mcnemar_min_rows(GCOMP_CV_PAIRED_ALPHA), v->acc_min_pts);
  unresolved_list(list, sizeof list, pr, GCOMP_CV_M_ACC, &n);
  if (n) fprintf(f, ", coarser than the accuracy tolerance of %s", list);
  if (pa->loss_rows >= pa->train_rows) {
    fprintf(f, "; final loss on all %d training rows (no sampling error)", pa->train_rows);
  } else {
    double worst = 0;
    for (int i = 0; i < pr->nruns; i++)
      if (pr->verdicts[i].paired.seeds > 0 && pr->verdicts[i].loss_se_rel > worst)
        worst = pr->verdicts[i].loss_se_rel;
    fprintf(f, "; final loss on %d of %d training rows (sampling error of a difference up to "
            "%.2g%%)", pa->loss_rows, pa->train_rows, worst * 100);
    unresolved_list(list, sizeof list, pr, GCOMP_CV_M_LOSS, &n);
    if (n) fprintf(f, ", coarser than the loss tolerance of %s", list);
  }
  if (pr->floor.n > 0)
    fputs("; drift is exact, and fp32's own spread is the noise floor below\n", f);
  else
    fputs("; drift is exact, and how far fp32 alone moves loss and drift on this run is not "
          "measured (--noise-floor)\n", f);
}

/* "one call of 2600 B", "4 calls of 40 to 10240 B" */
static const char *calls_text(char *buf, size_t n, const gcomp_cv_deployed *d) {
  if (d->calls == 1)
    snprintf(buf, n, "one call of %zu B", d->largest);
  else
    snprintf(buf, n, "%d calls of %zu to %zu B", d->calls, d->smallest, d->largest);
  return buf;
}

/* The drift guard (--guard): each codec's checks, how many went over budget (the call
 * returned the exact result) and the largest error seen. */
static void print_guard(FILE *f, const gcomp_cv_problem *pr) {
  int any = 0;
  for (int i = 0; i < pr->nruns; i++) any |= pr->runs[i].guard_checks > 0;
  if (!any) return;
  fputs("  guard:", f);
  for (int i = 0, k = 0; i < pr->nruns; i++) {
    const gcomp_cv_run *x = &pr->runs[i];
    if (!x->guard_checks) continue;
    fprintf(f, "%s %s %llu of %llu checks over budget (largest error %.3g", k++ ? ";" : "",
            x->spec, (unsigned long long)x->guard_fallbacks,
            (unsigned long long)x->guard_checks, x->guard_max_error);
    if (x->guard_backoff_calls)
      fprintf(f, ", %llu calls uncompressed", (unsigned long long)x->guard_backoff_calls);
    fputc(')', f);
  }
  fputc('\n', f);
}

/* Small tensors: what a job under the deployment's GCOMP_CODEC_MIN_BYTES gets. */
static void print_deployed(FILE *f, const gcomp_cv_problem *pr, long long checked) {
  if (!pr->deployed || pr->nruns == 0) return;
  const gcomp_cv_deployed *d = &pr->deployed[0];   /* the same calls for every codec */
  char calls[96];
  fprintf(f, "  deployed: a job with GCOMP_CODEC_MIN_BYTES=%lld ", d->min_bytes);
  if (d->compressed == d->calls)
    fprintf(f, "compresses every call too (%s): the verdicts are that job's\n",
            calls_text(calls, sizeof calls, d));
  else if (d->compressed == 0 && checked > 0)
    fprintf(f, "sends this gradient (%s) uncompressed whatever the codec, and trains as the "
            "baseline (deployed: fp32); the verdicts are the codecs' own, with the calls of "
            "%lld B and more compressed (--min-bytes)\n", calls_text(calls, sizeof calls, d),
            checked);
  else if (d->compressed == 0)
    fprintf(f, "sends this gradient (%s) uncompressed whatever the codec, and trains as the "
            "baseline (deployed: fp32); the verdicts are the codecs' own, with every call "
            "compressed (--min-bytes 0)\n", calls_text(calls, sizeof calls, d));
  else
    fprintf(f, "compresses %d of the %d calls per step (%s; the smaller go uncompressed): the "
            "deployed column is that job's verdict, trained and judged like the codecs\n",
            d->compressed, d->calls, calls_text(calls, sizeof calls, d));
}

static void print_header(FILE *f, const gcomp_cv_report *r) {
  const gcomp_cv_train_cfg *c = r->cfg;
  if (!c) {   /* logged curves: the program's own training, whatever it is */
    fprintf(f, "gcomp-converge: %s (the curves its metrics logs hold)\n",
            r->command ? r->command : "logged runs");
    return;
  }
  char seeds[96];
  if (c->nseeds > 1)
    snprintf(seeds, sizeof seeds, "seeds %llu-%llu (each figure a mean over them, paired by seed)",
             (unsigned long long)c->seed, (unsigned long long)(c->seed + (uint64_t)c->nseeds - 1));
  else
    snprintf(seeds, sizeof seeds, "seed %llu", (unsigned long long)c->seed);
  fprintf(f, "gcomp-converge: %d workers%s, %d steps, batch %d/worker, lr %g%s%s, momentum %g%s, "
          "%s, algo %s%s\n", c->workers, c->real ? " (processes)" : "", c->steps, c->batch,
          c->lr, c->lr_schedule ? " " : "",
          c->lr_schedule ? gcomp_cv_lr_schedule_name(c->lr_schedule) : "",
          c->momentum,
          c->momentum_correction == GCOMP_CV_MC_OFF      ? " (momentum correction off)"
          : c->momentum_correction == GCOMP_CV_MC_MASKED ? " (momentum correction with masking)"
                                                         : "",
          seeds, r->algo ? r->algo : "auto",
          c->per_layer ? ", one allreduce per tensor" : "");
}

const char *gcomp_cv_problem_model(const gcomp_cv_problem *pr) {
  return pr->model ? gcomp_cv_model_name(pr->model) : "logged";
}

/* One codec's (or a twin's) row; logged curves have no drift, gradients or bytes: "-" */
static void print_row(FILE *f, const gcomp_cv_run *b, const gcomp_cv_run *x, int W,
                      const char *word, const char *dep) {
  if (x->logged) {
    fprintf(f, "  %-26s %10.5f %+7.2f%% %8.2f %+7.2f %8.2f%% %9s %8s %9s %7s  %-8s%s%s\n",
            x->spec, x->final_loss, (x->final_loss / b->final_loss - 1) * 100, x->final_acc * 100,
            (x->final_acc - b->final_acc) * 100, x->curve_gap * 100, "-", "-", "-", "-", word,
            *dep ? " " : "", dep);
    return;
  }
  fprintf(f, "  %-26s %10.5f %+7.2f%% %8.2f %+7.2f %8.2f%% %9.2e %8.1e %9.0f %7.2f  %-8s%s%s\n",
          x->spec, x->final_loss, (x->final_loss / b->final_loss - 1) * 100, x->final_acc * 100,
          (x->final_acc - b->final_acc) * 100, x->curve_gap * 100, x->final_drift,
          x->relerr_mean, (double)x->wire_bytes / W / x->steps, ratio_of(b, x), word,
          *dep ? " " : "", dep);
}

void gcomp_cv_print_table(FILE *f, const gcomp_cv_report *r) {
  const gcomp_cv_train_cfg *c = r->cfg;
  print_header(f, r);
  /* every problem runs the same codecs: say once what each ran as, when not as given */
  const gcomp_cv_problem *p0 = r->nproblems ? &r->problems[0] : NULL;
  for (int i = 0; p0 && i < p0->nruns; i++) {
    const gcomp_cv_run *x = &p0->runs[i];
    if (x->status < 0 && !x->canon[0]) continue;
    if (x->corrected)
      fprintf(f, "momentum correction: %s ran as %s (momentum %g in the error feedback, "
              "optimizer without momentum)\n", x->spec, x->canon, x->ef_momentum);
    else if (x->ef_momentum > 0)
      fprintf(f, "%s: momentum %g in the error feedback, optimizer without momentum\n", x->spec,
              x->ef_momentum);
  }
  for (int p = 0; p < r->nproblems; p++) {
    const gcomp_cv_problem *pr = &r->problems[p];
    const gcomp_cv_run *b = &pr->base;
    if (pr->model)
      fprintf(f, "\n%s / %s (%zu parameters)\n", pr->task, gcomp_cv_model_name(pr->model),
              b->nparams);
    else
      fprintf(f, "\n%s (logged curves: %d evaluations to step %d)\n", pr->task, b->neval,
              b->neval ? b->eval_step[b->neval - 1] : 0);
    if (b->status < 0) {
      fprintf(f, "  baseline ERROR: %s\n", b->error);
      continue;
    }
    fprintf(f, "  %-26s %10s %8s %8s %7s %9s %9s %8s %9s %7s  %-8s%s\n", "codec", "loss", "dloss",
            "acc%", "dacc", "curvegap", "drift", "g.relerr", "B/step", "ratio", "verdict",
            pr->deployed ? " deployed" : "");
    int W = c && c->workers > 0 ? c->workers : 1;
    if (b->logged)
      fprintf(f, "  %-26s %10.5f %8s %8.2f\n", "baseline (no codec)", b->final_loss, "",
              b->final_acc * 100);
    else
      fprintf(f, "  %-26s %10.5f %8s %8.2f %7s %9s %9s %8.1e %9.0f %7s  %s\n", "baseline (fp32)",
              b->final_loss, "", b->final_acc * 100, "", "", "", b->relerr_mean,
              (double)b->wire_bytes / W / b->steps, "1.00", "");
    for (int t = 0; t < pr->ntwins; t++) {   /* the noise floor's yardsticks, not judged */
      const gcomp_cv_run *x = &pr->twins[t];
      if (x->status < 0)
        fprintf(f, "  %-26s ERROR: %s\n", x->spec, x->error);
      else
        print_row(f, b, x, W, "(floor)", "");
    }
    for (int i = 0; i < pr->nruns; i++) {
      const gcomp_cv_run *x = &pr->runs[i];
      const gcomp_cv_verdict *v = &pr->verdicts[i];
      const char *dep = pr->deployed ? gcomp_cv_deployed_word(&pr->deployed[i]) : "";
      if (x->status < 0)
        fprintf(f, "  %-26s %s\n", x->spec, verdict_word(v, pr->must_fail[i]));
      else
        print_row(f, b, x, W, verdict_word(v, pr->must_fail[i]), dep);
    }
    if (pr->floor.n > 0) {
      const gcomp_cv_floor *fl = &pr->floor;
      fprintf(f, "  noise floor (99%% bound from %d %s", fl->n,
              fl->by_seed == 1   ? "baselines with other seeds, seeds"
              : fl->by_seed == 2 ? "other baselines (--twin), numbered"
                                 : "fp32 twins, placements");
      for (int t = 0; t < fl->n; t++) fprintf(f, "%s %d", t ? "," : "", fl->placements[t]);
      fprintf(f, "), added to every tolerance: accuracy %.2f points, final loss %.2f%%, curve "
              "gap %.2f%%, drift %.3g\n", fl->acc_pts, fl->loss_rel * 100, fl->gap_rel * 100,
              fl->drift);
    }
    print_resolution(f, pr);
    print_deployed(f, pr, r->min_bytes);
    print_guard(f, pr);
    /* codecs whose tolerance is finer than this run can resolve */
    int ncoarse = 0;
    for (int i = 0; i < pr->nruns; i++) ncoarse += pr->verdicts[i].coarse != 0;
    if (ncoarse) {
      fprintf(f, "  resolution: fp32 itself varies beyond the tolerance here, so these verdicts "
              "bound the effect by tolerance + floor:");
      for (int i = 0, k = 0; i < pr->nruns; i++) {
        char names[64];
        if (pr->verdicts[i].coarse)
          fprintf(f, "%s %s (%s)", k++ ? ";" : "", pr->runs[i].spec,
                  gcomp_cv_metric_names(pr->verdicts[i].coarse, names, sizeof names));
      }
      fputc('\n', f);
    }
    /* sparsifying codecs: how often each parameter moved at all */
    for (int i = 0; i < pr->nruns; i++) {
      const gcomp_cv_run *x = &pr->runs[i];
      if (x->status < 0 || x->logged || x->moved_frac >= 0.5) continue;
      fprintf(f, "  coverage %s: %.2f%% of the parameters move per step, each %.1f times in %d "
              "steps on average; %.1f%% never moved\n", x->spec, x->moved_frac * 100,
              x->moved_frac * x->steps, x->steps, x->never_moved_frac * 100);
    }
    for (int i = 0; i < pr->nruns; i++) {
      const gcomp_cv_verdict *v = &pr->verdicts[i];
      if (v->pass != 1 || pr->must_fail[i]) {
        fprintf(f, "  %s %s: %s\n", pr->must_fail[i] && v->pass == 0 ? "flagged as expected" :
                pr->must_fail[i] && v->pass == 1 ? "NOT FLAGGED (expected to fail)" :
                v->pass < 0 ? "ERROR" : "FAIL", pr->runs[i].spec,
                v->pass == 1 ? "within every tolerance" : v->why);
        if (v->note[0]) fprintf(f, "    note: %s\n", v->note);
      } else if (v->note[0]) {
        fprintf(f, "  pass %s, by the paired test: %s\n", pr->runs[i].spec, v->note);
      }
      if (v->hint[0] && !pr->must_fail[i])
        fprintf(f, "    note: %s\n", v->hint);
      const gcomp_cv_deployed *dep = pr->deployed ? &pr->deployed[i] : NULL;
      if (dep && dep->trained && dep->verdict.pass != 1)
        fprintf(f, "  deployed %s %s: %s\n", dep->verdict.pass < 0 ? "ERROR" : "FAIL",
                pr->runs[i].spec, dep->verdict.why);
    }
  }
}

void gcomp_cv_print_unexpected(FILE *f, const gcomp_cv_report *r) {
  for (int p = 0; p < r->nproblems; p++) {
    const gcomp_cv_problem *pr = &r->problems[p];
    for (int i = 0; i < pr->nruns; i++) {
      const gcomp_cv_verdict *v = &pr->verdicts[i];
      if (v->pass == 0 && !pr->must_fail[i])
        fprintf(f, "gcomp-converge: FAIL %s/%s %s: %s\n", pr->task, gcomp_cv_problem_model(pr),
                pr->runs[i].spec, v->why);
      else if (v->pass == 1 && pr->must_fail[i]) {
        char names[64];
        fprintf(f, "gcomp-converge: FAIL %s/%s %s: expected to exceed its tolerance, but "
                "stayed within it%s%s%s\n", pr->task, gcomp_cv_problem_model(pr),
                pr->runs[i].spec,
                v->coarse ? " (the noise floor exceeds its tolerance on " : "",
                v->coarse ? gcomp_cv_metric_names(v->coarse, names, sizeof names) : "",
                v->coarse ? ": this run cannot resolve that; use a decaying learning rate or "
                            "more seeds)" : "");
        if (v->note[0])   /* it escaped through the paired test: say on how few rows */
          fprintf(f, "gcomp-converge:   %s (more seeds pool more test rows)\n", v->note);
      }
    }
  }
}

/* Bytes of the well-formed UTF-8 sequence at s (1 for ASCII), 0 when it is not one: names
 * come from file names, which need not be UTF-8, and JSON and XML must be. */
static int utf8_len(const unsigned char *s) {
  if (s[0] < 0x80) return 1;
  int n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
        : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
  if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
  return n;
}

/* ---- JSON ----------------------------------------------------------------------------- */
static void json_str(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', f);
  while (*s) {
    int n = utf8_len(s);
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if (*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else if (n == 0)
      fputs("\\ufffd", f);   /* not UTF-8: the replacement character */
    else
      fwrite(s, 1, (size_t)n, f);
    s += n ? n : 1;
  }
  fputc('"', f);
}

static void json_num(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, "%.9g", v);
  else
    fputs("null", f);
}

/* ,"key":number (null when not finite) */
static void json_field(FILE *f, const char *key, double v) {
  fprintf(f, ",\"%s\":", key);
  json_num(f, v);
}

static void json_array(FILE *f, const double *v, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++) {
    if (i) fputc(',', f);
    json_num(f, v[i]);
  }
  fputc(']', f);
}

/* {"placements":[...],"acc_points":...}: the noise floor a verdict allowed for */
static void json_floor(FILE *f, const gcomp_cv_floor *fl) {
  fputs("{\"placements\":[", f);
  for (int t = 0; t < fl->n; t++) fprintf(f, "%s%d", t ? "," : "", fl->placements[t]);
  fprintf(f, "],\"by_seed\":%s,\"acc_points\":", fl->by_seed == 1 ? "true" : "false");
  json_num(f, fl->acc_pts);
  json_field(f, "loss_rel", fl->loss_rel);
  json_field(f, "gap_rel", fl->gap_rel);
  json_field(f, "drift", fl->drift);
  fputc('}', f);
}

static void json_run(FILE *f, const gcomp_cv_run *b, const gcomp_cv_run *r) {
  fputs("{\"spec\":", f);
  json_str(f, r->spec);
  fputs(",\"canonical\":", f);
  json_str(f, r->canon);
  fprintf(f, ",\"optimizer_momentum\":%g,\"ef_momentum\":%g,\"momentum_correction\":%s",
          r->opt_momentum, r->ef_momentum, r->corrected ? "true" : "false");
  if (r->status < 0) {
    fputs(",\"error\":", f);
    json_str(f, r->error);
    fputc('}', f);
    return;
  }
  json_field(f, "final_loss", r->final_loss);
  json_field(f, "final_test_acc", r->final_acc);
  if (r->logged) {   /* what a metrics log holds: the curves */
    json_field(f, "curve_gap", r->curve_gap);
    fprintf(f, ",\"logged\":true,\"test_rows\":%d,\"seconds\":%.3f,\"curve\":{\"step\":[",
            r->test_rows, r->seconds);
    for (int e = 0; e < r->neval; e++) fprintf(f, "%s%d", e ? "," : "", r->eval_step[e]);
    fputs("],\"train_loss\":", f);
    json_array(f, r->train_loss, r->neval);
    fputs(",\"test_acc\":", f);
    json_array(f, r->test_acc, r->neval);
    fputs("}}", f);
    return;
  }
  json_field(f, "final_train_acc", r->final_train_acc);
  json_field(f, "curve_gap", r->curve_gap);
  json_field(f, "final_drift", r->final_drift);
  json_field(f, "max_drift", r->max_drift);
  json_field(f, "grad_relerr_mean", r->relerr_mean);
  json_field(f, "grad_relerr_max", r->relerr_max);
  json_field(f, "grad_cos_mean", r->cos_mean);
  json_field(f, "grad_cos_min", r->cos_min);
  json_field(f, "moved_frac", r->moved_frac);
  json_field(f, "never_moved_frac", r->never_moved_frac);
  fprintf(f, ",\"replicas_equal\":%s", r->replicas_equal ? "true" : "false");
  fprintf(f, ",\"wire_bytes\":%llu,\"user_bytes\":%llu,\"codec_bytes_in\":%llu,"
          "\"codec_bytes_out\":%llu", (unsigned long long)r->wire_bytes,
          (unsigned long long)r->user_bytes, (unsigned long long)r->codec_in,
          (unsigned long long)r->codec_out);
  json_field(f, "wire_ratio_vs_baseline", ratio_of(b, r));
  fprintf(f, ",\"seconds\":%.3f", r->seconds);
  if (r->nseeds > 1 && r->seed_acc) {   /* the spread behind the means */
    fputs(",\"seed_final_loss\":", f);
    json_array(f, r->seed_loss, r->nseeds);
    fputs(",\"seed_final_test_acc\":", f);
    json_array(f, r->seed_acc, r->nseeds);
  }
  fputs(",\"curve\":{\"step\":[", f);
  for (int e = 0; e < r->neval; e++) fprintf(f, "%s%d", e ? "," : "", r->eval_step[e]);
  fputs("],\"train_loss\":", f);
  json_array(f, r->train_loss, r->neval);
  fputs(",\"test_acc\":", f);
  json_array(f, r->test_acc, r->neval);
  fputs(",\"drift\":", f);
  json_array(f, r->drift, r->neval);
  fputs("},\"steps\":{\"minibatch_loss\":", f);
  json_array(f, r->step_loss, r->steps);
  fputs(",\"grad_relerr\":", f);
  json_array(f, r->grad_relerr, r->steps);
  fputs(",\"grad_cos\":", f);
  json_array(f, r->grad_cos, r->steps);
  fputs("}}", f);
}

/* ,"paired":{...},"resolution":{...},"unresolved":"...","note":"..." (null without pairs) */
static void json_resolution(FILE *f, const gcomp_cv_verdict *v) {
  const gcomp_cv_paired *pa = &v->paired;
  if (pa->seeds == 0) {
    fputs(",\"paired\":null,\"resolution\":null", f);
  } else {
    fprintf(f, ",\"paired\":{\"seeds\":%d,\"test_rows\":%d,\"lost\":%d,\"gained\":%d",
            pa->seeds, pa->rows, pa->lost, pa->gained);
    json_field(f, "mcnemar_p", v->acc_p);
    fprintf(f, ",\"alpha\":%g},\"resolution\":{\"acc_row_points\":", GCOMP_CV_PAIRED_ALPHA);
    json_num(f, v->acc_row_pts);
    json_field(f, "acc_min_drop_points", v->acc_min_pts);
    fprintf(f, ",\"loss_rows\":%d,\"train_rows\":%d", pa->loss_rows, pa->train_rows);
    json_field(f, "loss_se_rel", v->loss_se_rel);
    fputc('}', f);
  }
  char names[64];
  fputs(",\"unresolved\":", f);
  json_str(f, gcomp_cv_metric_names(v->unresolved, names, sizeof names));
  fputs(",\"note\":", f);
  json_str(f, v->note);
}

/* ,"deployed":{...}: what a job under the deployment's GCOMP_CODEC_MIN_BYTES gets */
static void json_deployed(FILE *f, const gcomp_cv_run *base, const gcomp_cv_deployed *d) {
  fprintf(f, ",\"deployed\":{\"min_bytes\":%lld,\"calls\":%d,\"compressed_calls\":%d,"
          "\"smallest_bytes\":%zu,\"largest_bytes\":%zu,\"verdict\":", d->min_bytes, d->calls,
          d->compressed, d->smallest, d->largest);
  const gcomp_cv_verdict *v = &d->verdict;
  json_str(f, !d->trained ? gcomp_cv_deployed_word(d)
              : v->pass < 0 ? "error" : v->pass ? "pass" : "fail");
  if (d->trained) {
    fputs(",\"why\":", f);
    json_str(f, v->why);
    json_resolution(f, v);
    fputs(",\"run\":", f);
    json_run(f, base, &d->run);
  }
  fputc('}', f);
}

static int write_json(const char *path, const gcomp_cv_report *r) {
  FILE *f = fopen(path, "w");
  GCOMP_FAIL_IF(!f, GCOMP_ERR_INVALID, "%s: cannot write: %s", path, strerror(errno));
  const gcomp_cv_train_cfg *c = r->cfg;
  if (!c) {
    fprintf(f, "{\"tool\":\"gcomp-converge\",\"version\":\"%s\",\"config\":{\"command\":",
            gcomp_version());
    json_str(f, r->command ? r->command : "");
  } else {
  fprintf(f, "{\"tool\":\"gcomp-converge\",\"version\":\"%s\",\"config\":{\"workers\":%d,"
          "\"steps\":%d,\"batch\":%d,\"lr\":%g,\"lr_schedule\":\"%s\",\"momentum\":%g,"
          "\"weight_decay\":%g,\"seed\":%llu,\"seeds\":%d,"
          "\"eval_every\":%d,\"op\":\"%s\",\"per_layer\":%s,\"real\":%s,"
          "\"momentum_correction\":\"%s\",\"algo\":", gcomp_version(),
          c->workers, c->steps, c->batch, c->lr, gcomp_cv_lr_schedule_name(c->lr_schedule),
          c->momentum, c->weight_decay, (unsigned long long)c->seed, c->nseeds > 1 ? c->nseeds : 1,
          c->eval_every, c->op == GCOMP_SUM ? "sum" : "avg",
          c->per_layer ? "true" : "false", c->real ? "true" : "false",
          c->momentum_correction == GCOMP_CV_MC_OFF      ? "off"
          : c->momentum_correction == GCOMP_CV_MC_MASKED ? "masked"
                                                         : "on");
  json_str(f, r->algo ? r->algo : "auto");
  }
  fputs("},\"problems\":[", f);
  for (int p = 0; p < r->nproblems; p++) {
    const gcomp_cv_problem *pr = &r->problems[p];
    fprintf(f, "%s{\"task\":", p ? "," : "");
    json_str(f, pr->task);
    fprintf(f, ",\"model\":\"%s\",\"parameters\":%zu,\"baseline\":", gcomp_cv_problem_model(pr),
            pr->base.nparams);
    json_run(f, &pr->base, &pr->base);
    if (pr->floor_wanted) {   /* the noise floor and the twins it was measured from */
      fputs(",\"noise_floor\":", f);
      if (pr->floor.n > 0)   /* a floor that could not be measured is none, not zero */
        json_floor(f, &pr->floor);
      else
        fputs("null", f);
      fputs(",\"twins\":[", f);
      for (int t = 0; t < pr->ntwins; t++) {
        if (t) fputc(',', f);
        json_run(f, &pr->base, &pr->twins[t]);
      }
      fputc(']', f);
    }
    fputs(",\"codecs\":[", f);
    for (int i = 0; i < pr->nruns; i++) {
      const gcomp_cv_verdict *v = &pr->verdicts[i];
      fprintf(f, "%s{\"run\":", i ? "," : "");
      json_run(f, &pr->base, &pr->runs[i]);
      fprintf(f, ",\"expected\":\"%s\",\"verdict\":\"%s\",\"tolerance\":{\"acc_points\":",
              pr->must_fail[i] ? "fail" : "pass",
              v->pass < 0 ? "error" : v->pass ? "pass" : "fail");
      json_num(f, v->tol.acc_pts);
      fputs(",\"loss_rel\":", f);
      json_num(f, v->tol.loss_rel);
      fputs(",\"gap_rel\":", f);
      json_num(f, v->tol.gap_rel);
      fputs(",\"drift\":", f);
      json_num(f, v->tol.drift);
      fputs("},\"noise_floor\":", f);
      if (v->floor.n > 0)
        json_floor(f, &v->floor);
      else
        fputs("null", f);
      fputs(",\"why\":", f);
      json_str(f, v->why);
      fputs(",\"hint\":", f);
      json_str(f, v->hint);
      char names[64];   /* metrics the run cannot resolve to the tolerance (floor above it) */
      fputs(",\"coarse\":", f);
      json_str(f, gcomp_cv_metric_names(v->coarse, names, sizeof names));
      json_resolution(f, v);
      if (pr->deployed) json_deployed(f, &pr->base, &pr->deployed[i]);
      fputc('}', f);
    }
    fputs("]}", f);
  }
  fputs("]}\n", f);
  int bad = ferror(f);
  bad |= fclose(f);
  GCOMP_FAIL_IF(bad, GCOMP_ERR_INVALID, "%s: write failed", path);
  return GCOMP_OK;
}

/* ---- JUnit ---------------------------------------------------------------------------- */
static void xml_str(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    int n = utf8_len(s);
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default:
      /* XML 1.0 has no control characters but tab, newline and carriage return */
      if (n == 0 || (*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r'))
        fputs("&#xFFFD;", f);
      else
        fwrite(s, 1, (size_t)n, f);
    }
    s += n ? n : 1;
  }
}

/* the paired test's note, the tolerances the rows do not resolve, the deployed job */
static void junit_resolution(FILE *f, const gcomp_cv_verdict *v, const gcomp_cv_deployed *d) {
  char line[512], names[64];
  if (v->note[0]) {
    xml_str(f, "; passed by the paired test: ");
    xml_str(f, v->note);
  }
  if (v->unresolved) {
    snprintf(line, sizeof line, "; the rows cannot resolve the tolerance on %s",
             gcomp_cv_metric_names(v->unresolved, names, sizeof names));
    xml_str(f, line);
  }
  if (d) {
    snprintf(line, sizeof line, "; deployed (GCOMP_CODEC_MIN_BYTES=%lld, %d of %d calls "
             "compressed): %s", d->min_bytes, d->compressed, d->calls, gcomp_cv_deployed_word(d));
    xml_str(f, line);
  }
}

static int write_junit(const char *path, const gcomp_cv_report *r) {
  FILE *f = fopen(path, "w");
  GCOMP_FAIL_IF(!f, GCOMP_ERR_INVALID, "%s: cannot write: %s", path, strerror(errno));
  int tests = 0, failures = 0, errors = 0;
  double secs = 0;
  for (int p = 0; p < r->nproblems; p++)
    for (int i = 0; i < r->problems[p].nruns; i++) {
      const gcomp_cv_verdict *v = &r->problems[p].verdicts[i];
      tests++;
      secs += r->problems[p].runs[i].seconds;
      if (v->pass < 0)
        errors++;
      else if ((v->pass == 1) == (r->problems[p].must_fail[i] != 0))
        failures++;
    }
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
          "<testsuite name=\"gcomp-converge\" tests=\"%d\" failures=\"%d\" errors=\"%d\" "
          "time=\"%.3f\">\n", tests, failures, errors, secs);
  for (int p = 0; p < r->nproblems; p++) {
    const gcomp_cv_problem *pr = &r->problems[p];
    for (int i = 0; i < pr->nruns; i++) {
      const gcomp_cv_verdict *v = &pr->verdicts[i];
      const gcomp_cv_run *x = &pr->runs[i];
      fprintf(f, "  <testcase classname=\"converge.");
      xml_str(f, pr->task);
      fprintf(f, ".%s\" name=\"", gcomp_cv_problem_model(pr));
      xml_str(f, x->spec);
      fprintf(f, "%s\" time=\"%.3f\"", pr->must_fail[i] ? " (must be flagged)" : "", x->seconds);
      if (v->pass < 0) {
        fputs(">\n    <error message=\"", f);
        xml_str(f, v->why);
        fputs("\"/>\n  </testcase>\n", f);
      } else if ((v->pass == 1) == (pr->must_fail[i] != 0)) {
        fputs(">\n    <failure message=\"", f);
        xml_str(f, pr->must_fail[i] ? "expected to exceed its tolerance, but passed" : v->why);
        if (pr->must_fail[i] && v->note[0]) {   /* it escaped through the paired test */
          xml_str(f, " (");
          xml_str(f, v->note);
          xml_str(f, ")");
        }
        if (v->coarse) {   /* the run could not resolve the tolerance: say so where it failed */
          char names[64], line[160];
          snprintf(line, sizeof line, " (the noise floor exceeds its tolerance on %s)",
                   gcomp_cv_metric_names(v->coarse, names, sizeof names));
          xml_str(f, line);
        }
        fputs("\"/>\n  </testcase>\n", f);
      } else {
        fputs(">\n    <system-out>", f);
        char line[512];
        if (x->logged)   /* the program's own curves: what its log holds */
          snprintf(line, sizeof line, "logged: loss %.6g acc %.4f curve gap %.4g%s",
                   x->final_loss, x->final_acc, x->curve_gap, v->pass ? "" : "; flagged: ");
        else
          snprintf(line, sizeof line, "ran %s, optimizer momentum %g; loss %.6g acc %.4f drift "
                   "%.4g relerr %.3g%s", x->canon, x->opt_momentum, x->final_loss, x->final_acc,
                   x->final_drift, x->relerr_mean, v->pass ? "" : "; flagged: ");
        xml_str(f, line);
        if (!v->pass) xml_str(f, v->why);
        if (v->coarse) {
          char names[64];
          snprintf(line, sizeof line, "; fp32 itself varies beyond the tolerance on %s: bounded by "
                   "tolerance + noise floor",
                   gcomp_cv_metric_names(v->coarse, names, sizeof names));
          xml_str(f, line);
        }
        junit_resolution(f, v, pr->deployed ? &pr->deployed[i] : NULL);
        fputs("</system-out>\n  </testcase>\n", f);
      }
    }
  }
  fputs("</testsuite>\n</testsuites>\n", f);
  int bad = ferror(f);
  bad |= fclose(f);
  GCOMP_FAIL_IF(bad, GCOMP_ERR_INVALID, "%s: write failed", path);
  return GCOMP_OK;
}

/* ---- SVG ------------------------------------------------------------------------------ */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
enum { PW = 430, PH = 290, ML = 58, MR = 14, MT = 34, MB = 40 };

static void svg_curve(FILE *f, const gcomp_cv_run *x, int px, int py, double lo, double hi,
                      int steps, const char *color, double width, const char *dash) {
  if (x->status < 0) return;
  fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s%s%s points=\"", color,
          width, dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
  double w = PW - ML - MR, h = PH - MT - MB;
  for (int e = 0; e < x->neval; e++) {
    double v = x->train_loss[e];
    if (!(v > 0) || !isfinite(v)) continue;
    double lx = px + ML + w * x->eval_step[e] / (steps > 0 ? steps : 1);
    double ly = py + MT + h * (1 - (log10(v) - lo) / (hi - lo));
    if (ly < py + MT) ly = py + MT;
    if (ly > py + MT + h) ly = py + MT + h;
    fprintf(f, "%.1f,%.1f ", lx, ly);
  }
  fputs("\"/>\n", f);
}

static int write_svg(const char *path, const gcomp_cv_report *r) {
  FILE *f = fopen(path, "w");
  GCOMP_FAIL_IF(!f, GCOMP_ERR_INVALID, "%s: cannot write: %s", path, strerror(errno));
  int cols = r->nproblems > 1 ? 2 : 1, rows = (r->nproblems + cols - 1) / cols;
  int ncodec = r->nproblems ? r->problems[0].nruns : 0;
  int twins = 0;   /* any problem with noise-floor twins: drawn thin and grey, one legend entry */
  for (int p = 0; p < r->nproblems; p++) twins |= r->problems[p].ntwins > 0;
  int legend_h = 22 * ((ncodec + twins + 2) / 3 + 1) + 10;
  int width = cols * PW, height = rows * PH + legend_h + 30;
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", width, height, width, height);
  if (r->cfg)
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\" text-anchor=\"middle\">gcomp-converge: "
            "training loss, %d workers, baseline fp32 vs codecs (log scale)</text>\n", width / 2,
            r->cfg->workers);
  else
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\" text-anchor=\"middle\">gcomp-converge: "
            "training loss as logged, baseline vs codecs (log scale)</text>\n", width / 2);
  for (int p = 0; p < r->nproblems; p++) {
    const gcomp_cv_problem *pr = &r->problems[p];
    int px = (p % cols) * PW, py = 24 + (p / cols) * PH;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = -1 - pr->ntwins; i < pr->nruns; i++) {
      const gcomp_cv_run *x = i >= 0 ? &pr->runs[i] : i == -1 ? &pr->base : &pr->twins[-2 - i];
      if (x->status < 0) continue;
      for (int e = 0; e < x->neval; e++) {
        double v = x->train_loss[e];
        if (!(v > 0) || !isfinite(v)) continue;
        lo = fmin(lo, log10(v));
        hi = fmax(hi, log10(v));
      }
    }
    if (!(hi > lo)) lo = -1, hi = 1;
    lo = floor(lo * 4) / 4, hi = ceil(hi * 4) / 4;
    if (hi - lo < 0.25) hi = lo + 0.25;
    double w = PW - ML - MR, h = PH - MT - MB;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"#888\"/>\n", px + ML, py + MT, w, h);
    fprintf(f, "<text x=\"%.0f\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">", px + ML + w / 2,
            py + MT - 8);
    xml_str(f, pr->task);
    if (pr->model)
      fprintf(f, " / %s (%zu params)</text>\n", gcomp_cv_model_name(pr->model), pr->base.nparams);
    else
      fputs(" (logged)</text>\n", f);
    for (int k = 0; k <= 4; k++) {   /* y ticks */
      double lv = lo + (hi - lo) * k / 4, y = py + MT + h * (1 - (double)k / 4);
      fprintf(f, "<line x1=\"%d\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
              "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", px + ML, px + ML + w, y,
              y, px + ML - 4, y + 4, pow(10, lv));
    }
    int steps = r->cfg ? r->cfg->steps
                : pr->base.neval > 0 ? pr->base.eval_step[pr->base.neval - 1] : 1;
    for (int k = 0; k <= 4; k++) {   /* x ticks */
      double x = px + ML + w * k / 4;
      fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n", x,
              py + MT + h + 14, steps * k / 4);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n", px + ML + w / 2,
            py + MT + h + 28);
    fprintf(f, "<text transform=\"translate(%d,%.0f) rotate(-90)\" text-anchor=\"middle\">train "
            "loss</text>\n", px + 14, py + MT + h / 2);
    for (int t = 0; t < pr->ntwins; t++)   /* under the codecs: the spread fp32 itself has */
      svg_curve(f, &pr->twins[t], px, py, lo, hi, steps, "#aaa", 1.0, NULL);
    for (int i = 0; i < pr->nruns; i++)
      svg_curve(f, &pr->runs[i], px, py, lo, hi, steps, palette[i % 10], 1.4,
                pr->must_fail[i] ? "5,3" : NULL);
    svg_curve(f, &pr->base, px, py, lo, hi, steps, "#000", 2.2, "2,2");
  }
  /* legend: the codecs of the first problem (every problem runs the same list) */
  int ly = 24 + rows * PH + 10;
  fprintf(f, "<line x1=\"20\" x2=\"50\" y1=\"%d\" y2=\"%d\" stroke=\"#000\" stroke-width=\"2.2\" "
          "stroke-dasharray=\"2,2\"/><text x=\"56\" y=\"%d\">baseline (%s)</text>\n", ly, ly, ly + 4,
          r->cfg ? "fp32" : "no codec");
  for (int i = 0; i < ncodec; i++) {
    const gcomp_cv_problem *pr = &r->problems[0];
    int col = (i + 1) % 3, row = (i + 1) / 3;
    int x = 20 + col * (width / 3), y = ly + row * 22;
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.6\"%s/>"
            "<text x=\"%d\" y=\"%d\">", x, x + 30, y, y, palette[i % 10],
            pr->must_fail[i] ? " stroke-dasharray=\"5,3\"" : "", x + 36, y + 4);
    xml_str(f, pr->runs[i].spec);
    if (pr->runs[i].corrected)   /* what ran, in short: the table and JSON give the spec */
      fprintf(f, " (EF momentum, mask=%d)", strstr(pr->runs[i].canon, "mask=1") != NULL);
    fprintf(f, "%s</text>\n", pr->must_fail[i] ? " (must fail)" : "");
  }
  if (twins) {
    int col = (ncodec + 1) % 3, row = (ncodec + 1) / 3;
    int x = 20 + col * (width / 3), y = ly + row * 22;
    fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#aaa\" "
            "stroke-width=\"1.0\"/><text x=\"%d\" y=\"%d\">%s (the noise floor)</text>\n",
            x, x + 30, y, y, x + 36, y + 4, r->cfg ? "fp32 twins" : "baselines, other seeds");
  }
  fputs("</svg>\n", f);
  int bad = ferror(f);
  bad |= fclose(f);
  GCOMP_FAIL_IF(bad, GCOMP_ERR_INVALID, "%s: write failed", path);
  return GCOMP_OK;
}

/* Files for machines: numbers in the "C" locale whatever the caller's setlocale (under
 * de_DE, "lr":0,05 is not JSON). */
#define IN_C_LOCALE(call)                              \
  do {                                                 \
    locale_t old_ = uselocale(gcomp_cv_c_locale());    \
    int st_ = (call);                                  \
    uselocale(old_);                                   \
    return st_;                                        \
  } while (0)
int gcomp_cv_write_json(const char *path, const gcomp_cv_report *r) { IN_C_LOCALE(write_json(path, r)); }
int gcomp_cv_write_junit(const char *path, const gcomp_cv_report *r) { IN_C_LOCALE(write_junit(path, r)); }
int gcomp_cv_write_svg(const char *path, const gcomp_cv_report *r) { IN_C_LOCALE(write_svg(path, r)); }
