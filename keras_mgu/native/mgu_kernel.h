// The MGU time loop, forward and backward through time, on the CPU.
//
// Shapes are time major (or, with batch_major, (B, T, ...) for xw, hs, d_hs and
// dxw). With H units, for a batch of B sequences of T steps:
//   xw     (T, B, 2H)  projected inputs x_t W + b: forget half first, candidate second
//   h0     (B, H)      initial state
//   u      (H, 2H)     recurrent kernel U = [U_f | U_c], or (G, H, 2H): G groups,
//                      rows [g B/G, (g+1) B/G) of the batch use u[g]
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
// With G groups, du is (G, H, 2H), group g's summed over its own rows only.
//
// The arithmetic is in mgu_math.h, the batch split across threads in
// mgu_threads.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "mgu_math.h"
#include "mgu_threads.h"

namespace keras_mgu {

// -------------------------------------------------------------------- loops
inline bool valid(int64_t steps, int64_t batch, int64_t units, int64_t groups, int act,
                  int ract) {
  return steps >= 1 && batch >= 0 && units >= 1 && groups >= 1 && batch % groups == 0 &&
         (act == kTanh || act == kSigmoid) && (ract == kTanh || ract == kSigmoid);
}

// The tasks of a call (mgu_threads.h).
template <typename T>
Plan call_plan(int64_t steps, int64_t batch, int64_t units, int64_t groups,
               int64_t max_threads) {
  return plan_tasks(batch, groups, chunk_count(steps, batch, padded<T>(units), max_threads, groups));
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

// Steps ahead that the loops ask for the rows of a batch-major sequence.
constexpr int64_t kPrefetchSteps = 8;

// Asks the cache for the first `width` values of each of `rows` rows of step t
// of a sequence (for writing with `write`). In a batch-major layout the rows of
// a step are a whole sequence apart, one memory stream per row, more streams
// than the hardware prefetchers follow; a time-major step is contiguous.
template <typename T>
inline void prefetch_rows(const T* base, Layout l, int64_t t, int64_t rows, int64_t width,
                          bool write) {
  if (l.row == width) return;  // time major
  const T* p = base + t * l.step;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; j += 64 / int64_t(sizeof(T))) {
      if (write) {
        __builtin_prefetch(p + r * l.row + j, 1);
      } else {
        __builtin_prefetch(p + r * l.row + j, 0);
      }
    }
  }
}

// One chunk of `batch` sequences of a batch of `ld`; the pointers start at the
// chunk's first row.
template <int HP, int UNITS, typename T>
void forward_loop(int64_t steps, int64_t batch, int64_t ld, int64_t runtime_units, const T* xw,
                  Layout xl, const T* h0, const T* u, const uint8_t* mask, int act, int ract,
                  T* hs, Layout hl, T* saved) {
  // HP, UNITS: Hp and H when known at compile time (else 0).
  const int64_t units = UNITS > 0 ? UNITS : runtime_units;
  const int64_t hp = HP > 0 ? HP : padded<T>(units), n = batch * hp;
  const int64_t two = 2 * units, three = 3 * units;
  const std::vector<T> up = padded_recurrent_kernel(u, units, hp, false);
  std::vector<T> h(n), f(n), fh(n), c(n);
  copy_rows(h0, units, h.data(), hp, batch, units, hp);
  for (int64_t t = 0; t < steps; ++t) {
    if (t + kPrefetchSteps < steps) {
      prefetch_rows(xw, xl, t + kPrefetchSteps, batch, two, false);
      prefetch_rows(hs, hl, t + kPrefetchSteps, batch, units, true);
    }
    const T* xw_t = xw + t * xl.step;
    T* saved_t = saved + t * ld * three;
    copy_rows(h.data(), hp, saved_t, three, batch, units, 0);  // h_{t-1}
    copy_rows(xw_t, xl.row, f.data(), hp, batch, units, hp);
    gemm_rows(batch, hp, hp, h.data(), hp, 1, up.data(), 2 * hp, f.data(), hp);
    activate(ract, f.data(), n);
    multiply(n, f.data(), h.data(), fh.data());
    copy_rows(xw_t + units, xl.row, c.data(), hp, batch, units, hp);
    gemm_rows(batch, hp, hp, fh.data(), hp, 1, up.data() + hp, 2 * hp, c.data(), hp);
    activate(act, c.data(), n);
    const uint8_t* m = mask == nullptr ? nullptr : mask + t * ld;
    if (m == nullptr) {
      update_state(n, f.data(), c.data(), h.data());
    } else {
      for (int64_t b = 0; b < batch; ++b) {  // a masked step carries the state
        if (m[b]) update_state(hp, f.data() + b * hp, c.data() + b * hp, h.data() + b * hp);
      }
    }
    copy_rows(h.data(), hp, hs + t * hl.step, hl.row, batch, units, 0);
    copy_rows(f.data(), hp, saved_t + units, three, batch, units, 0);
    copy_rows(c.data(), hp, saved_t + two, three, batch, units, 0);
  }
}

// One chunk of sequences, as forward_loop; its dU is added to du_sum, the
// padded (Hp, 2Hp) sum in double.
template <int HP, int UNITS, typename T>
void backward_loop(int64_t steps, int64_t batch, int64_t ld, int64_t runtime_units,
                   const T* d_hs, Layout hl, const T* d_last, const T* saved, const T* u,
                   const uint8_t* mask, int act, int ract, T* dxw, Layout xl, T* dh0,
                   double* du_sum) {
  // HP, UNITS: Hp and H when known at compile time (else 0).
  const int64_t units = UNITS > 0 ? UNITS : runtime_units;
  const int64_t hp = HP > 0 ? HP : padded<T>(units), n = batch * hp;
  const int64_t two = 2 * units, three = 3 * units;
  // [U_f^T | U_c^T], so that the products with U^T also run along rows.
  const std::vector<T> ut = padded_recurrent_kernel(u, units, hp, true);
  std::vector<T> g(n, T(0)), gm(n), h(n), f(n), c(n), fh(n), dzf(n), dzc(n), dfh(n), g_prev(n);
  if (d_last != nullptr) copy_rows(d_last, units, g.data(), hp, batch, units, hp);
  for (int64_t t = steps - 1; t >= 0; --t) {
    if (t >= kPrefetchSteps) {
      prefetch_rows(d_hs, hl, t - kPrefetchSteps, batch, units, false);
      prefetch_rows(dxw, xl, t - kPrefetchSteps, batch, two, true);
    }
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
    const T *pg = gm.data(), *pf = f.data(), *pc = c.data(), *ph = h.data();
    if (act == kTanh) {
      candidate_gradient<kTanh>(n, pg, pf, pc, ph, dzc.data(), fh.data(), dfh.data());
    } else {
      candidate_gradient<kSigmoid>(n, pg, pf, pc, ph, dzc.data(), fh.data(), dfh.data());
    }
    gemm_rows(batch, hp, hp, dzc.data(), hp, 1, ut.data() + hp, 2 * hp, dfh.data(), hp);
    if (ract == kTanh) {
      forget_gradient<kTanh>(n, pg, pf, pc, ph, dfh.data(), dzf.data(), g_prev.data());
    } else {
      forget_gradient<kSigmoid>(n, pg, pf, pc, ph, dfh.data(), dzf.data(), g_prev.data());
    }
    gemm_rows(batch, hp, hp, dzf.data(), hp, 1, ut.data(), 2 * hp, g_prev.data(), hp);
    if (m != nullptr) {  // a masked step passes its incoming gradient through
      for (int64_t b = 0; b < batch; ++b) {
        if (!m[b]) std::copy(g.begin() + b * hp, g.begin() + (b + 1) * hp, g_prev.begin() + b * hp);
      }
    }
    // dU of this step, [h^T dz_f | (f h)^T dz_c] (Hp, 2Hp), into the double total.
    add_product(hp, batch, hp, h.data(), 1, hp, dzf.data(), hp, du_sum, 2 * hp);
    add_product(hp, batch, hp, fh.data(), 1, hp, dzc.data(), hp, du_sum + hp, 2 * hp);
    T* dxw_t = dxw + t * xl.step;
    copy_rows(dzf.data(), hp, dxw_t, xl.row, batch, units, 0);
    copy_rows(dzc.data(), hp, dxw_t + units, xl.row, batch, units, 0);
    g.swap(g_prev);
  }
  copy_rows(g.data(), hp, dh0, units, batch, units, 0);
}

#define KERAS_MGU_EXACT(loop, hp, units, ...) \
  ((units) == (hp) ? loop<hp, hp>(__VA_ARGS__) : loop<hp, 0>(__VA_ARGS__))

#define KERAS_MGU_NARROW(loop, u, ...) \
  case u:                              \
    if constexpr (u <= L) loop<L, u>(__VA_ARGS__); \
    break;

// Runs loop<HP, UNITS> with the padded width known at compile time up to 8
// vectors, and the width itself when it is a whole number of vectors or less
// than one vector (so that the copies of narrow rows are whole operations too).
#define KERAS_MGU_DISPATCH(T, loop, units, ...)                          \
  do {                                                                   \
    constexpr int64_t L = Vec<T>::lanes;                                 \
    switch (padded<T>(units) / L) {                                      \
      case 1:                                                            \
        switch (units) {                                                 \
          KERAS_MGU_NARROW(loop, 1, __VA_ARGS__)                         \
          KERAS_MGU_NARROW(loop, 2, __VA_ARGS__)                         \
          KERAS_MGU_NARROW(loop, 3, __VA_ARGS__)                         \
          KERAS_MGU_NARROW(loop, 4, __VA_ARGS__)                         \
          KERAS_MGU_NARROW(loop, 5, __VA_ARGS__)                         \
          KERAS_MGU_NARROW(loop, 6, __VA_ARGS__)                         \
          KERAS_MGU_NARROW(loop, 7, __VA_ARGS__)                         \
          KERAS_MGU_NARROW(loop, 8, __VA_ARGS__)                         \
        }                                                                \
        break;                                                           \
      case 2: KERAS_MGU_EXACT(loop, 2 * L, units, __VA_ARGS__); break;   \
      case 3: KERAS_MGU_EXACT(loop, 3 * L, units, __VA_ARGS__); break;   \
      case 4: KERAS_MGU_EXACT(loop, 4 * L, units, __VA_ARGS__); break;   \
      case 5: KERAS_MGU_EXACT(loop, 5 * L, units, __VA_ARGS__); break;   \
      case 6: KERAS_MGU_EXACT(loop, 6 * L, units, __VA_ARGS__); break;   \
      case 7: KERAS_MGU_EXACT(loop, 7 * L, units, __VA_ARGS__); break;   \
      case 8: KERAS_MGU_EXACT(loop, 8 * L, units, __VA_ARGS__); break;   \
      default: loop<0, 0>(__VA_ARGS__); break;                           \
    }                                                                    \
  } while (0)

template <typename T>
int mgu_forward(int64_t steps, int64_t batch, int64_t units, int64_t groups, const T* xw,
                const T* h0, const T* u, const uint8_t* mask, int act, int ract, T* hs,
                T* saved, int64_t max_threads, bool batch_major) {
  if (!valid(steps, batch, units, groups, act, ract) || max_threads < 0) return 1;
  const Layout xl = layout(batch_major, steps, batch, 2 * units);
  const Layout hl = layout(batch_major, steps, batch, units);
  const Plan plan = call_plan<T>(steps, batch, units, groups, max_threads);
  return for_tasks(plan, [&](int64_t, const Task& task) {
    const int64_t b0 = task.first;
    KERAS_MGU_DISPATCH(T, forward_loop, units, steps, task.rows, batch, units, xw + b0 * xl.row,
                       xl, h0 + b0 * units, u + task.group * units * 2 * units,
                       mask == nullptr ? nullptr : mask + b0, act, ract, hs + b0 * hl.row, hl,
                       saved + b0 * 3 * units);
  });
}

// du (G, H, 2H) from the tasks' padded (Hp, 2Hp) sums, `size` apart: group
// g's is the total of its tasks' sums, added in task order.
template <typename T>
void gather_du(const Plan& plan, const double* sums, int64_t size, int64_t units,
               int64_t groups, T* du) {
  const int64_t hp = padded<T>(units), tasks = int64_t(plan.tasks.size());
  std::fill(du, du + groups * units * 2 * units, T(0));
  for (int64_t first = 0, last = 0; first < tasks; first = last) {
    const int64_t g = plan.tasks[first].group;
    while (last < tasks && plan.tasks[last].group == g) ++last;
    T* du_g = du + g * units * 2 * units;
    for (int64_t k = 0; k < units; ++k) {
      for (int64_t half = 0; half < 2; ++half) {
        for (int64_t j = 0; j < units; ++j) {
          const int64_t at = k * 2 * hp + half * hp + j;
          double total = 0.0;
          for (int64_t i = first; i < last; ++i) total += sums[i * size + at];
          du_g[k * 2 * units + half * units + j] = static_cast<T>(total);
        }
      }
    }
  }
}

template <typename T>
int mgu_backward(int64_t steps, int64_t batch, int64_t units, int64_t groups, const T* d_hs,
                 const T* d_last, const T* saved, const T* u, const uint8_t* mask, int act,
                 int ract, T* dxw, T* dh0, T* du, int64_t max_threads, bool batch_major) {
  if (!valid(steps, batch, units, groups, act, ract) || max_threads < 0) return 1;
  const Layout xl = layout(batch_major, steps, batch, 2 * units);
  const Layout hl = layout(batch_major, steps, batch, units);
  const int64_t hp = padded<T>(units), size = hp * 2 * hp;
  const Plan plan = call_plan<T>(steps, batch, units, groups, max_threads);
  std::vector<double> sums;  // each task's dU, in double
  try {
    sums.assign(plan.tasks.size() * size, 0.0);
  } catch (const std::bad_alloc&) {
    return 2;
  }
  const int code = for_tasks(plan, [&](int64_t i, const Task& task) {
    const int64_t b0 = task.first;
    KERAS_MGU_DISPATCH(T, backward_loop, units, steps, task.rows, batch, units,
                       d_hs + b0 * hl.row, hl, d_last == nullptr ? nullptr : d_last + b0 * units,
                       saved + b0 * 3 * units, u + task.group * units * 2 * units,
                       mask == nullptr ? nullptr : mask + b0, act, ract, dxw + b0 * xl.row, xl,
                       dh0 + b0 * units, sums.data() + i * size);
  });
  gather_du(plan, sums.data(), size, units, groups, du);
  return code;
}

}  // namespace keras_mgu
