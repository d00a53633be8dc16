/* Element-wise reduction kernels for the working types. Plain loops the compiler
 * vectorises for the baseline ISA; they are bound by memory, not by arithmetic. */
#include <math.h>
#include <string.h>

#include "coll.h"

#define DEFINE_OPS(T, suffix)                                                                \
  static void sum_##suffix(void *restrict d, const void *restrict s, size_t n) {           \
    T *restrict a = d;                                                                       \
    const T *restrict b = s;                                                                 \
    for (size_t i = 0; i < n; i++) a[i] += b[i];                                             \
  }                                                                                          \
  static void prod_##suffix(void *restrict d, const void *restrict s, size_t n) {          \
    T *restrict a = d;                                                                       \
    const T *restrict b = s;                                                                 \
    for (size_t i = 0; i < n; i++) a[i] *= b[i];                                             \
  }

DEFINE_OPS(float, f32)
DEFINE_OPS(double, f64)

/* Integer sums and products wrap (two's complement), as in MPI implementations, without
 * signed-overflow UB. */
#define DEFINE_INT_OPS(T, U, suffix)                                                         \
  static void sum_##suffix(void *restrict d, const void *restrict s, size_t n) {           \
    T *restrict a = d;                                                                       \
    const T *restrict b = s;                                                                 \
    for (size_t i = 0; i < n; i++) a[i] = (T)((U)a[i] + (U)b[i]);                            \
  }                                                                                          \
  static void prod_##suffix(void *restrict d, const void *restrict s, size_t n) {          \
    T *restrict a = d;                                                                       \
    const T *restrict b = s;                                                                 \
    for (size_t i = 0; i < n; i++) a[i] = (T)((U)a[i] * (U)b[i]);                            \
  }                                                                                          \
  static void min_##suffix(void *restrict d, const void *restrict s, size_t n) {           \
    T *restrict a = d;                                                                       \
    const T *restrict b = s;                                                                 \
    for (size_t i = 0; i < n; i++) a[i] = b[i] < a[i] ? b[i] : a[i];                         \
  }                                                                                          \
  static void max_##suffix(void *restrict d, const void *restrict s, size_t n) {           \
    T *restrict a = d;                                                                       \
    const T *restrict b = s;                                                                 \
    for (size_t i = 0; i < n; i++) a[i] = b[i] > a[i] ? b[i] : a[i];                         \
  }

DEFINE_INT_OPS(int32_t, uint32_t, i32)
DEFINE_INT_OPS(int64_t, uint64_t, i64)

/* Float MIN/MAX propagate NaN: a NaN operand makes the result a+b, which is NaN. They are
 * commutative in value but not in bits (min of +0 and -0, which NaN's payload): where two
 * ranks reduce the same pair, both must pass the operands in one order (gcomp_coll's
 * recv_first). */
#define DEFINE_FMINMAX(T, suffix)                                                            \
  static void min_##suffix(void *restrict d, const void *restrict s, size_t n) {           \
    T *restrict a = d;                                                                       \
    const T *restrict b = s;                                                                 \
    for (size_t i = 0; i < n; i++)                                                           \
      a[i] = (a[i] != a[i] || b[i] != b[i]) ? a[i] + b[i] : (b[i] < a[i] ? b[i] : a[i]);     \
  }                                                                                          \
  static void max_##suffix(void *restrict d, const void *restrict s, size_t n) {           \
    T *restrict a = d;                                                                       \
    const T *restrict b = s;                                                                 \
    for (size_t i = 0; i < n; i++)                                                           \
      a[i] = (a[i] != a[i] || b[i] != b[i]) ? a[i] + b[i] : (b[i] > a[i] ? b[i] : a[i]);     \
  }

DEFINE_FMINMAX(float, f32)
DEFINE_FMINMAX(double, f64)

/* dst = a op b, for out-of-place first steps: the caller's send buffer is read once and
 * never copied. */
#define DEFINE_OPS3(T, U, suffix)                                                            \
  static void sum3_##suffix(void *restrict d, const void *restrict a, const void *restrict b, \
                            size_t n) {                                                      \
    T *restrict x = d;                                                                       \
    const T *restrict y = a, *restrict z = b;                                                \
    for (size_t i = 0; i < n; i++) x[i] = (T)((U)y[i] + (U)z[i]);                            \
  }
DEFINE_OPS3(float, float, f32)
DEFINE_OPS3(double, double, f64)
DEFINE_OPS3(int32_t, uint32_t, i32)
DEFINE_OPS3(int64_t, uint64_t, i64)

gcomp_reduce3_fn gcomp_reduce3_kernel(gcomp_dtype dtype, gcomp_op op) {
  static const gcomp_reduce3_fn sums[4] = {sum3_f32, sum3_f64, sum3_i32, sum3_i64};
  if ((unsigned)dtype > GCOMP_INT64 || (op != GCOMP_SUM && op != GCOMP_AVG)) return NULL;
  return sums[dtype];
}

gcomp_reduce_fn gcomp_reduce_kernel(gcomp_dtype dtype, gcomp_op op) {
  /* AVG reduces as SUM; the division happens once, at the end */
  static const gcomp_reduce_fn table[4][5] = {
      {sum_f32, sum_f32, min_f32, max_f32, prod_f32},
      {sum_f64, sum_f64, min_f64, max_f64, prod_f64},
      {sum_i32, sum_i32, min_i32, max_i32, prod_i32},
      {sum_i64, sum_i64, min_i64, max_i64, prod_i64},
  };
  if ((unsigned)dtype > GCOMP_INT64 || (unsigned)op > GCOMP_PROD) return NULL;
  return table[dtype][op];
}

uint64_t gcomp_count_nonfinite_f32(const float *x, size_t n) {
  uint64_t bad = 0;
  const uint32_t *b = (const uint32_t *)(const void *)x;
  for (size_t i = 0; i < n; i++) bad += (b[i] & 0x7f800000u) == 0x7f800000u;
  return bad;
}

uint64_t gcomp_nonfinite_within(const float *x, size_t at, size_t len, size_t lo, size_t hi,
                                uint64_t tally) {
  size_t a = at > lo ? at : lo, b = at + len < hi ? at + len : hi;
  if (a >= b || tally == 0) return 0;
  if (tally != UINT64_MAX && a == at && b == at + len) return tally;
  return gcomp_count_nonfinite_f32(x + a, b - a);
}

void gcomp_scale_f32(float *x, size_t n, float divisor) {
  for (size_t i = 0; i < n; i++) x[i] /= divisor;
}
