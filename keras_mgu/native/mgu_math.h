// Vector arithmetic for the MGU loops (mgu_kernel.h): activations, elementwise
// updates, small row-major products and row copies, written so that the
// compiler vectorises them (-O3 -march=native -fno-trapping-math, no
// fast-math; without -fno-trapping-math the activations' selects stay branches
// and their loops scalar).
//
// The float activations use a vectorisable exp (range reduction and a degree-7
// polynomial) from which tanh and sigmoid follow, accurate to a few units in
// the last place; NaN and infinities propagate as with libm. The double
// activations call libm.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace keras_mgu {

enum Activation : int { kTanh = 0, kSigmoid = 1 };

inline float bits_to_float(int32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline int32_t float_to_bits(float value) {
  int32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// exp(x) for float, written so that loops over it vectorise. NaN stays NaN.
inline float exp_approx(float x) {
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.0f ? -87.0f : x;
  // n = round(x / ln 2), read from the low mantissa bits of v.
  const float magic = 12582912.0f;  // 1.5 * 2^23
  float v = x * 1.44269504088896341f + magic;
  float n = v - magic;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;  // ln 2 = 0.693359375 - 2.12194440e-4
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t exponent = float_to_bits(v) - float_to_bits(magic);
  return p * bits_to_float((exponent + 127) << 23);
}

inline float tanh_approx(float x) {
  float a = x < 0.0f ? -x : x;
  // |x| < 0.55: the odd Taylor series to x^15 (first omitted term < 5e-8 relative).
  float x2 = x * x;
  float p = -929569.0f / 638512875.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  float small = x + x * x2 * p;
  // Otherwise 1 - 2 / (exp(2|x|) + 1) with the sign of x; |x| >= 10 gives +-1.
  float clipped = a > 10.0f ? 10.0f : a;
  float big = 1.0f - 2.0f / (exp_approx(2.0f * clipped) + 1.0f);
  big = x < 0.0f ? -big : big;
  return a < 0.55f ? small : big;
}

inline float sigmoid_approx(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

// In place over n contiguous values.
inline void activate(int kind, float* x, int64_t n) {
  if (kind == kTanh) {
    for (int64_t i = 0; i < n; ++i) x[i] = tanh_approx(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = sigmoid_approx(x[i]);
  }
}

inline void activate(int kind, double* x, int64_t n) {
  if (kind == kTanh) {
    for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = 1.0 / (1.0 + std::exp(-x[i]));
  }
}

// Derivative through the activation's output y.
template <int KIND, typename T>
inline T activation_grad(T y) {
  return KIND == kTanh ? T(1) - y * y : y * (T(1) - y);
}

// ---------------------------------------------------------------- elementwise
// Elementwise work over n values, on restrict pointers (and, backward, with the
// activation fixed at compile time), so that the loops vectorise.
// out = a b.
template <typename T>
inline void multiply(int64_t n, const T* __restrict a, const T* __restrict b, T* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

// h += f (c - h).
template <typename T>
inline void update_state(int64_t n, const T* __restrict f, const T* __restrict c,
                         T* __restrict h) {
  for (int64_t i = 0; i < n; ++i) h[i] += f[i] * (c[i] - h[i]);
}

// dz_c = g f act'(c), fh = f h, dfh = 0.
template <int ACT, typename T>
inline void candidate_gradient(int64_t n, const T* __restrict g, const T* __restrict f,
                               const T* __restrict c, const T* __restrict h, T* __restrict dzc,
                               T* __restrict fh, T* __restrict dfh) {
  for (int64_t i = 0; i < n; ++i) {
    dzc[i] = g[i] * f[i] * activation_grad<ACT>(c[i]);
    fh[i] = f[i] * h[i];
    dfh[i] = T(0);
  }
}

// dz_f = (g (c - h) + dfh h) ract'(f), g_prev = g (1 - f) + dfh f.
template <int RACT, typename T>
inline void forget_gradient(int64_t n, const T* __restrict g, const T* __restrict f,
                            const T* __restrict c, const T* __restrict h,
                            const T* __restrict dfh, T* __restrict dzf, T* __restrict g_prev) {
  for (int64_t i = 0; i < n; ++i) {
    dzf[i] = (g[i] * (c[i] - h[i]) + dfh[i] * h[i]) * activation_grad<RACT>(f[i]);
    g_prev[i] = g[i] * (T(1) - f[i]) + dfh[i] * f[i];
  }
}

// ----------------------------------------------------------------- products
// Rows of the loops' internal buffers are padded from H to Hp, a multiple of
// the vector width, with zero weights in the padding, so that every product
// runs on whole vectors; the padding stays zero in every state and gradient.
template <typename T>
struct Vec {
  typedef T type __attribute__((vector_size(32)));
  static constexpr int64_t lanes = 32 / sizeof(T);
};

template <typename T>
inline int64_t padded(int64_t units) {
  return (units + Vec<T>::lanes - 1) / Vec<T>::lanes * Vec<T>::lanes;
}

// out[i, :NV*L] += sum_k x[i * sxi + k * sxk] w[k * ldw, :NV*L] for R rows at a
// time: R * NV accumulators stay in vector registers while the depth is summed
// (several rows at once keep independent chains in flight when NV is small).
template <int NV, int R, typename T>
inline void rows_block(int64_t i, int64_t depth, const T* __restrict x, int64_t sxi,
                       int64_t sxk, const T* __restrict w, int64_t ldw, T* __restrict out,
                       int64_t ldo) {
  using V = typename Vec<T>::type;
  constexpr int64_t L = Vec<T>::lanes;
  V acc[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < NV; ++v) std::memcpy(&acc[r][v], out + (i + r) * ldo + v * L, sizeof(V));
  }
  for (int64_t k = 0; k < depth; ++k) {
    const T* wk = w + k * ldw;
    V wv[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&wv[v], wk + v * L, sizeof(V));
    for (int r = 0; r < R; ++r) {
      const T s = x[(i + r) * sxi + k * sxk];
      for (int v = 0; v < NV; ++v) acc[r][v] += s * wv[v];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < NV; ++v) std::memcpy(out + (i + r) * ldo + v * L, &acc[r][v], sizeof(V));
  }
}

template <int NV, typename T>
inline void rows_kernel(int64_t rows, int64_t depth, const T* x, int64_t sxi, int64_t sxk,
                        const T* w, int64_t ldw, T* out, int64_t ldo) {
  constexpr int R = NV >= 4 ? 1 : (NV == 1 ? 4 : 2);
  int64_t i = 0;
  for (; i + R <= rows; i += R) rows_block<NV, R>(i, depth, x, sxi, sxk, w, ldw, out, ldo);
  for (; i < rows; ++i) rows_block<NV, 1>(i, depth, x, sxi, sxk, w, ldw, out, ldo);
}

// Calls f(std::integral_constant<int, NV>{}, c) for the column blocks [c, c + NV*L)
// that cover cols (a multiple of the vector width), 8 vectors at a time: the
// block width becomes a compile-time constant of the kernels it selects.
template <typename T, typename F>
inline void for_column_blocks(int64_t cols, F&& f) {
  constexpr int64_t L = Vec<T>::lanes;
  for (int64_t c = 0; c < cols; c += 8 * L) {
    switch ((cols - c) / L < 8 ? (cols - c) / L : 8) {
      case 1: f(std::integral_constant<int, 1>{}, c); break;
      case 2: f(std::integral_constant<int, 2>{}, c); break;
      case 3: f(std::integral_constant<int, 3>{}, c); break;
      case 4: f(std::integral_constant<int, 4>{}, c); break;
      case 5: f(std::integral_constant<int, 5>{}, c); break;
      case 6: f(std::integral_constant<int, 6>{}, c); break;
      case 7: f(std::integral_constant<int, 7>{}, c); break;
      default: f(std::integral_constant<int, 8>{}, c); break;
    }
  }
}

// rows_kernel over cols (a multiple of the vector width) columns.
template <typename T>
inline void gemm_rows(int64_t rows, int64_t depth, int64_t cols, const T* x, int64_t sxi,
                      int64_t sxk, const T* w, int64_t ldw, T* out, int64_t ldo) {
  for_column_blocks<T>(cols, [&](auto nv, int64_t c) {
    rows_kernel<decltype(nv)::value>(rows, depth, x, sxi, sxk, w + c, ldw, out + c, ldo);
  });
}

// sum[i, :NV*L] += double(sum_k x[i * sxi + k * sxk] w[k * ldw, :NV*L]) for R
// rows at a time: the float products summed from zero exactly as rows_block
// sums them (same blocks, same order), then added into the double total
// without passing through memory.
template <int NV, int R, typename T>
inline void add_product_block(int64_t i, int64_t depth, const T* __restrict x, int64_t sxi,
                              int64_t sxk, const T* __restrict w, int64_t ldw,
                              double* __restrict sum, int64_t ldo) {
  using V = typename Vec<T>::type;
  constexpr int64_t L = Vec<T>::lanes;
  V acc[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  }
  for (int64_t k = 0; k < depth; ++k) {
    const T* wk = w + k * ldw;
    V wv[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&wv[v], wk + v * L, sizeof(V));
    for (int r = 0; r < R; ++r) {
      const T s = x[(i + r) * sxi + k * sxk];
      for (int v = 0; v < NV; ++v) acc[r][v] += s * wv[v];
    }
  }
  for (int r = 0; r < R; ++r) {
    T lanes[NV * L];
    for (int v = 0; v < NV; ++v) std::memcpy(lanes + v * L, &acc[r][v], sizeof(V));
    double* row = sum + (i + r) * ldo;
    for (int64_t j = 0; j < NV * L; ++j) row[j] += static_cast<double>(lanes[j]);
  }
}

// One row's, for the widths where rows_block takes one row at a time.
template <int NV, typename T>
inline void add_product_row(int64_t i, int64_t depth, const T* __restrict x, int64_t sxi,
                            int64_t sxk, const T* __restrict w, int64_t ldw,
                            double* __restrict sum) {
  using V = typename Vec<T>::type;
  constexpr int64_t L = Vec<T>::lanes;
  V acc[NV] = {};
  for (int64_t k = 0; k < depth; ++k) {
    const T s = x[i * sxi + k * sxk];
    for (int v = 0; v < NV; ++v) {
      V wv;
      std::memcpy(&wv, w + k * ldw + v * L, sizeof(V));
      acc[v] += s * wv;
    }
  }
  for (int v = 0; v < NV; ++v) {
    for (int64_t l = 0; l < L; ++l) sum[v * L + l] += static_cast<double>(acc[v][l]);
  }
}

template <int NV, typename T>
inline void add_product_kernel(int64_t rows, int64_t depth, const T* x, int64_t sxi,
                               int64_t sxk, const T* w, int64_t ldw, double* sum,
                               int64_t ldo) {
  constexpr int R = NV >= 4 ? 1 : (NV == 1 ? 4 : 2);
  if constexpr (R == 1) {  // one row at a time (this form keeps acc in registers)
    for (int64_t i = 0; i < rows; ++i) {
      add_product_row<NV>(i, depth, x, sxi, sxk, w, ldw, sum + i * ldo);
    }
    return;
  }
  int64_t i = 0;
  for (; i + R <= rows; i += R) add_product_block<NV, R>(i, depth, x, sxi, sxk, w, ldw, sum, ldo);
  for (; i < rows; ++i) add_product_block<NV, 1>(i, depth, x, sxi, sxk, w, ldw, sum, ldo);
}

// sum (rows, ldo) += double(x^T w) over cols (a multiple of the vector width):
// a step's dU added into the backward loop's double total, with the float
// products of gemm_rows on a zeroed output and without its stores and loads.
template <typename T>
inline void add_product(int64_t rows, int64_t depth, int64_t cols, const T* x, int64_t sxi,
                        int64_t sxk, const T* w, int64_t ldw, double* sum, int64_t ldo) {
  for_column_blocks<T>(cols, [&](auto nv, int64_t c) {
    add_product_kernel<decltype(nv)::value>(rows, depth, x, sxi, sxk, w + c, ldw, sum + c, ldo);
  });
}

// ------------------------------------------------------------------- copies
// dst (rows, dst_width)[:, :cols] = src (rows, src_width)[:, :cols]; with
// zero_to > cols, dst[:, cols:zero_to] = 0.
template <typename T>
inline void copy_rows(const T* __restrict src, int64_t src_width, T* __restrict dst,
                      int64_t dst_width, int64_t rows, int64_t cols, int64_t zero_to) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* s = src + r * src_width;
    T* d = dst + r * dst_width;
    for (int64_t j = 0; j < cols; ++j) d[j] = s[j];
    for (int64_t j = cols; j < zero_to; ++j) d[j] = T(0);
  }
}

}  // namespace keras_mgu
