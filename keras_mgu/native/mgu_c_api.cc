// C entry points of the MGU loops, for ctypes (TensorFlow and PyTorch front-ends).
// Every function returns 0 on success and a positive code for invalid arguments.
#include "mgu_kernel.h"

#define KERAS_MGU_EXPORT extern "C" __attribute__((visibility("default")))

KERAS_MGU_EXPORT int keras_mgu_abi_version() { return 1; }

#define KERAS_MGU_DEFINE(suffix, T)                                                          \
  KERAS_MGU_EXPORT int keras_mgu_forward_##suffix(                                           \
      int64_t steps, int64_t batch, int64_t units, const T* xw, const T* h0, const T* u,     \
      const uint8_t* mask, int act, int ract, T* hs, T* saved) {                             \
    return keras_mgu::mgu_forward<T>(steps, batch, units, xw, h0, u, mask, act, ract, hs,    \
                                     saved);                                                 \
  }                                                                                          \
  KERAS_MGU_EXPORT int keras_mgu_backward_##suffix(                                          \
      int64_t steps, int64_t batch, int64_t units, const T* d_hs, const T* d_last,           \
      const T* saved, const T* u, const uint8_t* mask, int act, int ract, T* dxw, T* dh0,    \
      T* du) {                                                                               \
    return keras_mgu::mgu_backward<T>(steps, batch, units, d_hs, d_last, saved, u, mask,     \
                                      act, ract, dxw, dh0, du);                              \
  }

KERAS_MGU_DEFINE(f32, float)
KERAS_MGU_DEFINE(f64, double)
