// C entry points of the MGU loops, for ctypes (TensorFlow and PyTorch front-ends).
// The loops return 0 on success, 1 for invalid arguments and 2 when out of memory;
// keras_mgu_threads_* says how many threads a call of that size runs on (0 for
// invalid arguments); max_threads 0 means the CPUs this process may run on;
// batch_major != 0 takes xw, hs, d_hs and dxw as (B, T, ...). `groups` is G of a
// (G, H, 2H) recurrent kernel (1 for (H, 2H)); the batch must be a multiple of it.
#include "mgu_kernel.h"

#define KERAS_MGU_EXPORT extern "C" __attribute__((visibility("default")))

KERAS_MGU_EXPORT int keras_mgu_abi_version() { return 4; }

#define KERAS_MGU_DEFINE(suffix, T)                                                          \
  KERAS_MGU_EXPORT int keras_mgu_forward_##suffix(                                           \
      int64_t steps, int64_t batch, int64_t units, int64_t groups, const T* xw, const T* h0, \
      const T* u, const uint8_t* mask, int act, int ract, T* hs, T* saved,                   \
      int64_t max_threads, int batch_major) {                                                \
    return keras_mgu::mgu_forward<T>(steps, batch, units, groups, xw, h0, u, mask, act,      \
                                     ract, hs, saved, max_threads, batch_major != 0);        \
  }                                                                                          \
  KERAS_MGU_EXPORT int keras_mgu_backward_##suffix(                                          \
      int64_t steps, int64_t batch, int64_t units, int64_t groups, const T* d_hs,            \
      const T* d_last, const T* saved, const T* u, const uint8_t* mask, int act, int ract,   \
      T* dxw, T* dh0, T* du, int64_t max_threads, int batch_major) {                         \
    return keras_mgu::mgu_backward<T>(steps, batch, units, groups, d_hs, d_last, saved, u,   \
                                      mask, act, ract, dxw, dh0, du, max_threads,            \
                                      batch_major != 0);                                     \
  }                                                                                          \
  KERAS_MGU_EXPORT int64_t keras_mgu_threads_##suffix(int64_t steps, int64_t batch,          \
                                                      int64_t units, int64_t groups,         \
                                                      int64_t max_threads) {                 \
    if (!keras_mgu::valid(steps, batch, units, groups, 0, 0) || max_threads < 0) return 0;  \
    return keras_mgu::call_plan<T>(steps, batch, units, groups, max_threads).threads();      \
  }

KERAS_MGU_DEFINE(f32, float)
KERAS_MGU_DEFINE(f64, double)
