// The MGU time loop, forward and backward through time, on the CPU.
//
// Shapes are time major (or, with batch_major, (B, T, ...) for xw, hs, d_hs and
// dxw). With H units, for a batch of B sequences of T steps:
//   xw     (T, B, 2H)  projected inputs x_t W + b: forget half first, candidate second
//   h0     (B, H)      initial state
//   u      (H, 2H)     recurrent kernel U = [U_f | U_c]
//   mask   (T, B)      1 for a real step, 0 for a masked one (or null: all real)
//   hs     (T, B, H)   the states h_t (a masked step carries h_{t-1})
//   saved  (T, B, 3H)  [h_{t-1} | f_t | c_t] per step, read by the backward pass
//
// Forward, per step:
//   f_t = ract(xw_f[t] + h_{t-1} U_f)
//   c_t = act(xw_c[t] + (f_t * h_{t-1}) U_c)
//   h_t = h_{t-1} + f_t (c_t - h_{t-1})
// Backward, per step from the last, with g = dL/dh_t (zeroed on a masked step,
// which passes the incoming gradient through unchanged):
//   dz_c = g f act'(c)      dfh = dz_c U_c^T      dz_f = (g (c - h) + dfh h) ract'(f)
//   dL/dh_{t-1} = g (1 - f) + dfh f + dz_f U_f^T
//   dxw[t] = [dz_f | dz_c]  dU_f += h^T dz_f      dU_c += (f h)^T dz_c
//
// The float loops use a vectorisable exp (range reduction and a degree-7
// polynomial) from which tanh and sigmoid follow, accurate to a few units in
// the last place; NaN and infinities propagate as with libm. The double loops
// call libm. No fast-math is assumed.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

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
template <typename T>
inline T activation_grad(int kind, T y) {
  return kind == kTanh ? T(1) - y * y : y * (T(1) - y);
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

// The same over cols (a multiple of the vector width) columns, 8 vectors at a time.
template <typename T>
inline void gemm_rows(int64_t rows, int64_t depth, int64_t cols, const T* x, int64_t sxi,
                      int64_t sxk, const T* w, int64_t ldw, T* out, int64_t ldo) {
  constexpr int64_t L = Vec<T>::lanes;
  for (int64_t c = 0; c < cols; c += 8 * L) {
    const int64_t nv = (cols - c) / L < 8 ? (cols - c) / L : 8;
    const T* wc = w + c;
    T* oc = out + c;
    switch (nv) {
      case 1: rows_kernel<1>(rows, depth, x, sxi, sxk, wc, ldw, oc, ldo); break;
      case 2: rows_kernel<2>(rows, depth, x, sxi, sxk, wc, ldw, oc, ldo); break;
      case 3: rows_kernel<3>(rows, depth, x, sxi, sxk, wc, ldw, oc, ldo); break;
      case 4: rows_kernel<4>(rows, depth, x, sxi, sxk, wc, ldw, oc, ldo); break;
      case 5: rows_kernel<5>(rows, depth, x, sxi, sxk, wc, ldw, oc, ldo); break;
      case 6: rows_kernel<6>(rows, depth, x, sxi, sxk, wc, ldw, oc, ldo); break;
      case 7: rows_kernel<7>(rows, depth, x, sxi, sxk, wc, ldw, oc, ldo); break;
      default: rows_kernel<8>(rows, depth, x, sxi, sxk, wc, ldw, oc, ldo); break;
    }
  }
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

// -------------------------------------------------------------------- loops
inline bool valid(int64_t steps, int64_t batch, int64_t units, int act, int ract) {
  return steps >= 1 && batch >= 0 && units >= 1 && (act == kTanh || act == kSigmoid) &&
         (ract == kTanh || ract == kSigmoid);
}

// U (H, 2H) -> padded (Hp, 2Hp) [U_f | U_c], or with transpose the padded
// (Hp, 2Hp) [U_f^T | U_c^T] the backward products need.
template <typename T>
std::vector<T> padded_recurrent_kernel(const T* u, int64_t units, int64_t hp, bool transpose) {
  std::vector<T> out(hp * 2 * hp, T(0));
  for (int64_t k = 0; k < units; ++k) {
    for (int64_t j = 0; j < units; ++j) {
      for (int64_t half = 0; half < 2; ++half) {
        const T value = u[k * 2 * units + half * units + j];
        if (transpose) {
          out[j * 2 * hp + half * hp + k] = value;
        } else {
          out[k * 2 * hp + half * hp + j] = value;
        }
      }
    }
  }
  return out;
}

// Where row b of step t of a sequence (xw, hs, d_hs, dxw) lies: b * row +
// t * step elements from its start. Time major (T, B, W): row = W, step = B W;
// batch major (B, T, W): row = T W, step = W. `saved` and `mask` are always
// time major.
struct Layout {
  int64_t row, step;
};

inline Layout layout(bool batch_major, int64_t steps, int64_t batch, int64_t width) {
  return batch_major ? Layout{steps * width, width} : Layout{width, batch * width};
}

// One chunk of `batch` sequences of a batch of `ld`; the pointers start at the
// chunk's first row.
template <int HP, bool EXACT, typename T>
void forward_loop(int64_t steps, int64_t batch, int64_t ld, int64_t runtime_units, const T* xw,
                  Layout xl, const T* h0, const T* u, const uint8_t* mask, int act, int ract,
                  T* hs, Layout hl, T* saved) {
  // EXACT: H == Hp, both known at compile time.
  const int64_t units = EXACT ? HP : runtime_units;
  const int64_t hp = HP > 0 ? HP : padded<T>(units), n = batch * hp;
  const int64_t two = 2 * units, three = 3 * units;
  const std::vector<T> up = padded_recurrent_kernel(u, units, hp, false);
  std::vector<T> h(n), f(n), fh(n), c(n);
  copy_rows(h0, units, h.data(), hp, batch, units, hp);
  for (int64_t t = 0; t < steps; ++t) {
    const T* xw_t = xw + t * xl.step;
    T* saved_t = saved + t * ld * three;
    copy_rows(h.data(), hp, saved_t, three, batch, units, 0);  // h_{t-1}
    copy_rows(xw_t, xl.row, f.data(), hp, batch, units, hp);
    gemm_rows(batch, hp, hp, h.data(), hp, 1, up.data(), 2 * hp, f.data(), hp);
    activate(ract, f.data(), n);
    for (int64_t i = 0; i < n; ++i) fh[i] = f[i] * h[i];
    copy_rows(xw_t + units, xl.row, c.data(), hp, batch, units, hp);
    gemm_rows(batch, hp, hp, fh.data(), hp, 1, up.data() + hp, 2 * hp, c.data(), hp);
    activate(act, c.data(), n);
    const uint8_t* m = mask == nullptr ? nullptr : mask + t * ld;
    for (int64_t b = 0; b < batch; ++b) {
      if (m != nullptr && !m[b]) continue;  // a masked step carries the state
      T* hb = h.data() + b * hp;
      const T* fb = f.data() + b * hp;
      const T* cb = c.data() + b * hp;
      for (int64_t j = 0; j < hp; ++j) hb[j] += fb[j] * (cb[j] - hb[j]);
    }
    copy_rows(h.data(), hp, hs + t * hl.step, hl.row, batch, units, 0);
    copy_rows(f.data(), hp, saved_t + units, three, batch, units, 0);
    copy_rows(c.data(), hp, saved_t + two, three, batch, units, 0);
  }
}

// One chunk of sequences, as forward_loop; its dU is added to du_sum, the
// padded (Hp, 2Hp) sum in double.
template <int HP, bool EXACT, typename T>
void backward_loop(int64_t steps, int64_t batch, int64_t ld, int64_t runtime_units,
                   const T* d_hs, Layout hl, const T* d_last, const T* saved, const T* u,
                   const uint8_t* mask, int act, int ract, T* dxw, Layout xl, T* dh0,
                   double* du_sum) {
  // EXACT: H == Hp, both known at compile time.
  const int64_t units = EXACT ? HP : runtime_units;
  const int64_t hp = HP > 0 ? HP : padded<T>(units), n = batch * hp;
  const int64_t two = 2 * units, three = 3 * units;
  // [U_f^T | U_c^T], so that the products with U^T also run along rows.
  const std::vector<T> ut = padded_recurrent_kernel(u, units, hp, true);
  std::vector<T> g(n, T(0)), gm(n), h(n), f(n), c(n), fh(n), dzf(n), dzc(n), dfh(n), g_prev(n);
  std::vector<T> du_step(hp * 2 * hp);
  if (d_last != nullptr) copy_rows(d_last, units, g.data(), hp, batch, units, hp);
  for (int64_t t = steps - 1; t >= 0; --t) {
    copy_rows(d_hs + t * hl.step, hl.row, gm.data(), hp, batch, units, hp);
    for (int64_t i = 0; i < n; ++i) g[i] += gm[i];
    const T* saved_t = saved + t * ld * three;
    copy_rows(saved_t, three, h.data(), hp, batch, units, hp);
    copy_rows(saved_t + units, three, f.data(), hp, batch, units, hp);
    copy_rows(saved_t + two, three, c.data(), hp, batch, units, hp);
    const uint8_t* m = mask == nullptr ? nullptr : mask + t * ld;
    for (int64_t i = 0; i < n; ++i) gm[i] = g[i];
    if (m != nullptr) {
      for (int64_t b = 0; b < batch; ++b) {
        if (!m[b]) std::fill(gm.begin() + b * hp, gm.begin() + (b + 1) * hp, T(0));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      dzc[i] = gm[i] * f[i] * activation_grad(act, c[i]);
      fh[i] = f[i] * h[i];
      dfh[i] = T(0);
    }
    gemm_rows(batch, hp, hp, dzc.data(), hp, 1, ut.data() + hp, 2 * hp, dfh.data(), hp);
    for (int64_t i = 0; i < n; ++i) {
      dzf[i] = (gm[i] * (c[i] - h[i]) + dfh[i] * h[i]) * activation_grad(ract, f[i]);
      g_prev[i] = gm[i] * (T(1) - f[i]) + dfh[i] * f[i];
    }
    gemm_rows(batch, hp, hp, dzf.data(), hp, 1, ut.data(), 2 * hp, g_prev.data(), hp);
    if (m != nullptr) {  // a masked step passes its incoming gradient through
      for (int64_t b = 0; b < batch; ++b) {
        if (!m[b]) std::copy(g.begin() + b * hp, g.begin() + (b + 1) * hp, g_prev.begin() + b * hp);
      }
    }
    // dU of this step: [h^T dz_f | (f h)^T dz_c], (Hp, 2Hp).
    std::fill(du_step.begin(), du_step.end(), T(0));
    gemm_rows(hp, batch, hp, h.data(), 1, hp, dzf.data(), hp, du_step.data(), 2 * hp);
    gemm_rows(hp, batch, hp, fh.data(), 1, hp, dzc.data(), hp, du_step.data() + hp, 2 * hp);
    for (size_t i = 0; i < du_step.size(); ++i) du_sum[i] += du_step[i];
    T* dxw_t = dxw + t * xl.step;
    copy_rows(dzf.data(), hp, dxw_t, xl.row, batch, units, 0);
    copy_rows(dzc.data(), hp, dxw_t + units, xl.row, batch, units, 0);
    g.swap(g_prev);
  }
  copy_rows(g.data(), hp, dh0, units, batch, units, 0);
}

#define KERAS_MGU_EXACT(loop, hp, units, ...) \
  ((units) == (hp) ? loop<hp, true>(__VA_ARGS__) : loop<hp, false>(__VA_ARGS__))

// Runs loop<HP> with the padded width known at compile time up to 8 vectors.
#define KERAS_MGU_DISPATCH(T, loop, units, ...)                          \
  do {                                                                   \
    constexpr int64_t L = Vec<T>::lanes;                                 \
    switch (padded<T>(units) / L) {                                      \
      case 1: KERAS_MGU_EXACT(loop, 1 * L, units, __VA_ARGS__); break;   \
      case 2: KERAS_MGU_EXACT(loop, 2 * L, units, __VA_ARGS__); break;   \
      case 3: KERAS_MGU_EXACT(loop, 3 * L, units, __VA_ARGS__); break;   \
      case 4: KERAS_MGU_EXACT(loop, 4 * L, units, __VA_ARGS__); break;   \
      case 5: KERAS_MGU_EXACT(loop, 5 * L, units, __VA_ARGS__); break;   \
      case 6: KERAS_MGU_EXACT(loop, 6 * L, units, __VA_ARGS__); break;   \
      case 7: KERAS_MGU_EXACT(loop, 7 * L, units, __VA_ARGS__); break;   \
      case 8: KERAS_MGU_EXACT(loop, 8 * L, units, __VA_ARGS__); break;   \
      default: loop<0, false>(__VA_ARGS__); break;                       \
    }                                                                    \
  } while (0)

// ------------------------------------------------------------------ threads
// The sequences of a batch are independent, so a call splits the batch into
// contiguous chunks, each running the whole time loop on its own thread; only
// the dU sums meet, added in chunk order. A call runs on at most max_threads
// threads (0: the CPUs this process may run on), a chunk has at least
// kMinRows sequences, and a call is split only when its work,
// steps * batch * Hp^2, is at least kMinWork (below it, starting a thread
// costs more than it saves).
constexpr int64_t kMinRows = 4;
constexpr int64_t kMinWork = int64_t(1) << 18;

inline int64_t available_cpus() {
#ifdef __linux__
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) return std::max(1, CPU_COUNT(&cpus));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

#ifdef KERAS_MGU_OPENMP
// GNU OpenMP's thread pool does not survive fork(): a child that enters a
// parallel region after its parent had one hangs. So a forked child of a
// process that had loaded the library runs every call on one thread.
inline std::atomic<bool> forked_child(false);
inline void mark_forked_child() { forked_child = true; }
inline const int fork_handler_registered = pthread_atfork(nullptr, nullptr, mark_forked_child);
#endif

inline int64_t chunk_count(int64_t steps, int64_t batch, int64_t hp, int64_t max_threads) {
  if (max_threads == 1 || steps * batch * hp * hp < kMinWork) return 1;
#ifdef KERAS_MGU_OPENMP
  if (forked_child) return 1;
#endif
  const int64_t threads = max_threads > 1 ? max_threads : available_cpus();
  return std::max<int64_t>(1, std::min(threads, batch / kMinRows));
}

// Runs fn(chunk, first_row, rows) over `chunks` contiguous chunks of `batch`
// rows. Built with KERAS_MGU_OPENMP, the chunks run in an OpenMP parallel
// region: in a PyTorch process that is PyTorch's own OpenMP thread pool, whose
// workers are already awake. Otherwise chunk 0 runs on the calling thread and
// every other chunk on a new std::thread (or here, if one cannot start).
// Returns 0, or 2 when a chunk ran out of memory.
template <typename Fn>
int for_chunks(int64_t batch, int64_t chunks, Fn fn) {
  std::atomic<bool> failed(false);
  auto run = [&](int64_t i) {
    try {
      const int64_t first = batch * i / chunks, last = batch * (i + 1) / chunks;
      fn(i, first, last - first);
    } catch (const std::bad_alloc&) {
      failed = true;
    }
  };
  if (chunks == 1) {
    run(0);
    return failed ? 2 : 0;
  }
#ifdef KERAS_MGU_OPENMP
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
  for (int64_t i = 0; i < chunks; ++i) run(i);
#else
  std::vector<std::thread> workers;
  std::vector<int64_t> here = {0};
  for (int64_t i = 1; i < chunks; ++i) {
    try {
      workers.emplace_back(run, i);
    } catch (const std::system_error&) {
      here.push_back(i);
    }
  }
  for (int64_t i : here) run(i);
  for (std::thread& worker : workers) worker.join();
#endif
  return failed ? 2 : 0;
}

template <typename T>
int mgu_forward(int64_t steps, int64_t batch, int64_t units, const T* xw, const T* h0,
                const T* u, const uint8_t* mask, int act, int ract, T* hs, T* saved,
                int64_t max_threads, bool batch_major) {
  if (!valid(steps, batch, units, act, ract) || max_threads < 0) return 1;
  const Layout xl = layout(batch_major, steps, batch, 2 * units);
  const Layout hl = layout(batch_major, steps, batch, units);
  const int64_t chunks = chunk_count(steps, batch, padded<T>(units), max_threads);
  return for_chunks(batch, chunks, [&](int64_t, int64_t b0, int64_t rows) {
    KERAS_MGU_DISPATCH(T, forward_loop, units, steps, rows, batch, units, xw + b0 * xl.row, xl,
                       h0 + b0 * units, u, mask == nullptr ? nullptr : mask + b0, act, ract,
                       hs + b0 * hl.row, hl, saved + b0 * 3 * units);
  });
}

template <typename T>
int mgu_backward(int64_t steps, int64_t batch, int64_t units, const T* d_hs, const T* d_last,
                 const T* saved, const T* u, const uint8_t* mask, int act, int ract, T* dxw,
                 T* dh0, T* du, int64_t max_threads, bool batch_major) {
  if (!valid(steps, batch, units, act, ract) || max_threads < 0) return 1;
  const Layout xl = layout(batch_major, steps, batch, 2 * units);
  const Layout hl = layout(batch_major, steps, batch, units);
  const int64_t hp = padded<T>(units), size = hp * 2 * hp;
  const int64_t chunks = chunk_count(steps, batch, hp, max_threads);
  std::vector<double> sums(chunks * size, 0.0);  // each chunk's dU, in double
  const int code = for_chunks(batch, chunks, [&](int64_t i, int64_t b0, int64_t rows) {
    KERAS_MGU_DISPATCH(T, backward_loop, units, steps, rows, batch, units, d_hs + b0 * hl.row, hl,
                       d_last == nullptr ? nullptr : d_last + b0 * units,
                       saved + b0 * 3 * units, u, mask == nullptr ? nullptr : mask + b0, act,
                       ract, dxw + b0 * xl.row, xl, dh0 + b0 * units, sums.data() + i * size);
  });
  for (int64_t k = 0; k < units; ++k) {
    for (int64_t half = 0; half < 2; ++half) {
      for (int64_t j = 0; j < units; ++j) {
        double total = 0.0;
        for (int64_t i = 0; i < chunks; ++i) total += sums[i * size + k * 2 * hp + half * hp + j];
        du[k * 2 * units + half * units + j] = static_cast<T>(total);
      }
    }
  }
  return code;
}

}  // namespace keras_mgu
