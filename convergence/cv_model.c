/* The harness's models, forward and backward in plain C: softmax regression and a
 * two-layer ReLU MLP. Parameters live in one flat fp32 vector (W1, b1[, W2, b2]), the
 * shape a data-parallel job hands to one allreduce. */
#include <math.h>
#include <string.h>

#include "converge.h"
#include "cv_rng.h"
#include "cv_check.h"

int gcomp_cv_model_parse(const char *name, int hidden, gcomp_cv_model *m) {
  memset(m, 0, sizeof *m);
  if (strcmp(name, "softmax") == 0) {
    m->kind = GCOMP_CV_SOFTMAX;
  } else if (strcmp(name, "mlp") == 0) {
    m->kind = GCOMP_CV_MLP;
    GCOMP_FAIL_IF(hidden < 1 || hidden > 4096, GCOMP_ERR_INVALID,
                  "--hidden %d is out of range [1, 4096]", hidden);
    m->nhid = hidden;
  } else {
    GCOMP_FAIL(GCOMP_ERR_INVALID, "model '%s' is unknown (valid: softmax, mlp)", name);
  }
  return GCOMP_OK;
}

void gcomp_cv_model_shape(gcomp_cv_model *m, int nin, int nout) {
  m->nin = nin;
  m->nout = nout;
  if (m->kind == GCOMP_CV_SOFTMAX)
    m->nparams = (size_t)nout * (size_t)nin + (size_t)nout;
  else
    m->nparams = (size_t)m->nhid * (size_t)nin + (size_t)m->nhid + (size_t)nout * (size_t)m->nhid +
                 (size_t)nout;
}

const char *gcomp_cv_model_name(const gcomp_cv_model *m) {
  return m->kind == GCOMP_CV_SOFTMAX ? "softmax" : "mlp";
}

void gcomp_cv_model_init(const gcomp_cv_model *m, float *theta, uint64_t seed) {
  gcomp_cv_rng rng = gcomp_cv_rng_make(seed, 0x1417);
  memset(theta, 0, m->nparams * sizeof *theta);
  if (m->kind == GCOMP_CV_SOFTMAX) {
    for (size_t i = 0; i < (size_t)m->nout * (size_t)m->nin; i++)
      theta[i] = (float)(0.01 * gcomp_cv_normal(&rng));
    return;
  }
  size_t n1 = (size_t)m->nhid * (size_t)m->nin, n2 = (size_t)m->nout * (size_t)m->nhid;
  double s1 = sqrt(2.0 / m->nin), s2 = sqrt(1.0 / m->nhid);   /* He, then Xavier-like */
  for (size_t i = 0; i < n1; i++) theta[i] = (float)(s1 * gcomp_cv_normal(&rng));
  float *w2 = theta + n1 + (size_t)m->nhid;
  for (size_t i = 0; i < n2; i++) w2[i] = (float)(s2 * gcomp_cv_normal(&rng));
}

int gcomp_cv_model_tensors(const gcomp_cv_model *m, size_t off[4], size_t len[4]) {
  size_t shapes[4][2] = {{(size_t)m->nout, (size_t)m->nin}, {(size_t)m->nout, 1}};
  int n = 2;
  if (m->kind == GCOMP_CV_MLP) {
    shapes[0][0] = shapes[1][0] = (size_t)m->nhid;
    shapes[2][0] = (size_t)m->nout, shapes[2][1] = (size_t)m->nhid;
    shapes[3][0] = (size_t)m->nout, shapes[3][1] = 1;
    n = 4;
  }
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    off[i] = at;
    len[i] = shapes[i][0] * shapes[i][1];
    at += len[i];
  }
  return n;
}

size_t gcomp_cv_model_scratch(const gcomp_cv_model *m, int rows) {
  size_t per = (size_t)m->nout + (m->kind == GCOMP_CV_MLP ? 2 * (size_t)m->nhid : 0);
  return per * (size_t)(rows > 0 ? rows : 1);
}

/* out[r][o] = b[o] + sum_i w[o][i] in[r][i] */
static void dense(const float *restrict w, const float *restrict b, const float *restrict in,
                  int rows, int nin, int nout, float *restrict out) {
  for (int r = 0; r < rows; r++) {
    const float *x = in + (size_t)r * (size_t)nin;
    for (int o = 0; o < nout; o++) {
      const float *wo = w + (size_t)o * (size_t)nin;
      float a = 0;
      for (int i = 0; i < nin; i++) a += wo[i] * x[i];
      out[(size_t)r * (size_t)nout + (size_t)o] = a + b[o];
    }
  }
}

/* grad_w[o][i] += sum_r d[r][o] in[r][i]; grad_b[o] += sum_r d[r][o] */
static void dense_back_w(const float *restrict d, const float *restrict in, int rows, int nin,
                         int nout, float *restrict gw, float *restrict gb) {
  for (int r = 0; r < rows; r++) {
    const float *x = in + (size_t)r * (size_t)nin;
    for (int o = 0; o < nout; o++) {
      float dv = d[(size_t)r * (size_t)nout + (size_t)o];
      if (dv == 0) continue;
      float *g = gw + (size_t)o * (size_t)nin;
      for (int i = 0; i < nin; i++) g[i] += dv * x[i];
      gb[o] += dv;
    }
  }
}

/* Turns logits into probabilities in place; returns the summed cross-entropy and counts
 * correct argmax predictions. With grad, z becomes (p - onehot) / n. */
static double softmax_xent(float *z, const int *y, int rows, int k, int n, int want_grad,
                           int *correct) {
  double loss = 0;
  for (int r = 0; r < rows; r++) {
    float *zr = z + (size_t)r * (size_t)k;
    int arg = 0;
    for (int c = 1; c < k; c++)
      if (zr[c] > zr[arg]) arg = c;
    if (correct) *correct += arg == y[r];
    double mx = zr[arg], sum = 0;
    for (int c = 0; c < k; c++) sum += exp((double)zr[c] - mx);
    double lse = mx + log(sum);
    loss += lse - zr[y[r]];
    if (want_grad) {
      for (int c = 0; c < k; c++)
        zr[c] = (float)((exp((double)zr[c] - lse) - (c == y[r])) / n);
    }
  }
  return loss;
}

double gcomp_cv_model_loss(const gcomp_cv_model *m, const float *theta, const float *x,
                           const int *y, int n, float *grad, float *scratch, int *correct) {
  if (correct) *correct = 0;
  if (grad) memset(grad, 0, m->nparams * sizeof *grad);
  if (n <= 0) return 0;
  int k = m->nout, d = m->nin;
  if (m->kind == GCOMP_CV_SOFTMAX) {
    const float *w = theta, *b = theta + (size_t)k * (size_t)d;
    float *z = scratch;
    dense(w, b, x, n, d, k, z);
    double loss = softmax_xent(z, y, n, k, n, grad != NULL, correct);
    if (grad) dense_back_w(z, x, n, d, k, grad, grad + (size_t)k * (size_t)d);
    return loss / n;
  }
  int h = m->nhid;
  size_t n1 = (size_t)h * (size_t)d, n2 = (size_t)k * (size_t)h;
  const float *w1 = theta, *b1 = w1 + n1, *w2 = b1 + h, *b2 = w2 + n2;
  float *hid = scratch, *z = hid + (size_t)n * (size_t)h, *dh = z + (size_t)n * (size_t)k;
  dense(w1, b1, x, n, d, h, hid);
  for (size_t i = 0; i < (size_t)n * (size_t)h; i++) hid[i] = hid[i] > 0 ? hid[i] : 0;
  dense(w2, b2, hid, n, h, k, z);
  double loss = softmax_xent(z, y, n, k, n, grad != NULL, correct);
  if (!grad) return loss / n;
  float *g1 = grad, *gb1 = g1 + n1, *g2 = gb1 + h, *gb2 = g2 + n2;
  dense_back_w(z, hid, n, h, k, g2, gb2);
  /* dh = dz W2, masked by the ReLU */
  for (int r = 0; r < n; r++) {
    const float *dz = z + (size_t)r * (size_t)k;
    float *dhr = dh + (size_t)r * (size_t)h;
    const float *hr = hid + (size_t)r * (size_t)h;
    for (int i = 0; i < h; i++) {
      float a = 0;
      if (hr[i] > 0)
        for (int c = 0; c < k; c++) a += dz[c] * w2[(size_t)c * (size_t)h + (size_t)i];
      dhr[i] = a;
    }
  }
  dense_back_w(dh, x, n, d, h, g1, gb1);
  return loss / n;
}
