// XLA FFI handlers of the MGU loops, for the JAX front-end (jax.ffi.ffi_call).
// Buffers and their shapes are those of mgu_kernel.h; `u` (and `du`) is
// (H, 2H) or, for G groups, (G, H, 2H) with B a multiple of G; `masked` says
// whether the mask buffer holds a (T, B) mask or is a placeholder; `threads` is
// the most threads a call may use (0: the CPUs available).
#include <cstdint>
#include <string>

#include "mgu_kernel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

ffi::Error Refused(int code, const char* what) {
  if (code == 0) return ffi::Error::Success();
  if (code == 2) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                      std::string("keras_mgu native ") + what + " ran out of memory");
  }
  return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                    std::string("keras_mgu native ") + what + " refused its arguments");
}

// G of the recurrent kernel `u` of H units: (H, 2H) holds one group,
// (G, H, 2H) G; 0 for any other shape (which the loops refuse).
template <typename Buffer>
int64_t Groups(const Buffer& u, int64_t units) {
  auto dims = u.dimensions();
  const size_t rank = dims.size();
  if ((rank != 2 && rank != 3) || dims[rank - 2] != units || dims[rank - 1] != 2 * units) {
    return 0;
  }
  return rank == 3 ? dims[0] : 1;
}

template <ffi::DataType DT>
ffi::Error Forward(ffi::Buffer<DT> xw, ffi::Buffer<DT> h0, ffi::Buffer<DT> u,
                   ffi::Buffer<ffi::PRED> mask, int32_t activation,
                   int32_t recurrent_activation, int32_t masked, int32_t threads,
                   ffi::ResultBuffer<DT> hs, ffi::ResultBuffer<DT> saved) {
  auto dims = xw.dimensions();
  if (dims.size() != 3) return Refused(1, "forward");
  const auto* m = masked ? reinterpret_cast<const uint8_t*>(mask.typed_data()) : nullptr;
  int code = keras_mgu::mgu_forward(dims[0], dims[1], dims[2] / 2, Groups(u, dims[2] / 2),
                                    xw.typed_data(), h0.typed_data(), u.typed_data(), m,
                                    activation, recurrent_activation, hs->typed_data(),
                                    saved->typed_data(), threads, /*batch_major=*/false);
  return Refused(code, "forward");
}

template <ffi::DataType DT>
ffi::Error Backward(ffi::Buffer<DT> d_hs, ffi::Buffer<DT> d_last, ffi::Buffer<DT> saved,
                    ffi::Buffer<DT> u, ffi::Buffer<ffi::PRED> mask, int32_t activation,
                    int32_t recurrent_activation, int32_t masked, int32_t threads,
                    ffi::ResultBuffer<DT> dxw, ffi::ResultBuffer<DT> dh0,
                    ffi::ResultBuffer<DT> du) {
  auto dims = d_hs.dimensions();
  if (dims.size() != 3 || du->element_count() != u.element_count()) {
    return Refused(1, "backward");
  }
  const auto* m = masked ? reinterpret_cast<const uint8_t*>(mask.typed_data()) : nullptr;
  int code = keras_mgu::mgu_backward(
      dims[0], dims[1], dims[2], Groups(u, dims[2]), d_hs.typed_data(), d_last.typed_data(),
      saved.typed_data(), u.typed_data(), m, activation, recurrent_activation,
      dxw->typed_data(), dh0->typed_data(), du->typed_data(), threads,
      /*batch_major=*/false);
  return Refused(code, "backward");
}

template <ffi::DataType DT>
constexpr auto ForwardBinding() {
  return ffi::Ffi::Bind()
      .template Arg<ffi::Buffer<DT>>()
      .template Arg<ffi::Buffer<DT>>()
      .template Arg<ffi::Buffer<DT>>()
      .template Arg<ffi::Buffer<ffi::PRED>>()
      .template Attr<int32_t>("activation")
      .template Attr<int32_t>("recurrent_activation")
      .template Attr<int32_t>("masked")
      .template Attr<int32_t>("threads")
      .template Ret<ffi::Buffer<DT>>()
      .template Ret<ffi::Buffer<DT>>();
}

template <ffi::DataType DT>
constexpr auto BackwardBinding() {
  return ffi::Ffi::Bind()
      .template Arg<ffi::Buffer<DT>>()
      .template Arg<ffi::Buffer<DT>>()
      .template Arg<ffi::Buffer<DT>>()
      .template Arg<ffi::Buffer<DT>>()
      .template Arg<ffi::Buffer<ffi::PRED>>()
      .template Attr<int32_t>("activation")
      .template Attr<int32_t>("recurrent_activation")
      .template Attr<int32_t>("masked")
      .template Attr<int32_t>("threads")
      .template Ret<ffi::Buffer<DT>>()
      .template Ret<ffi::Buffer<DT>>()
      .template Ret<ffi::Buffer<DT>>();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(KerasMguForwardF32, Forward<ffi::F32>, ForwardBinding<ffi::F32>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(KerasMguForwardF64, Forward<ffi::F64>, ForwardBinding<ffi::F64>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(KerasMguBackwardF32, Backward<ffi::F32>,
                              BackwardBinding<ffi::F32>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(KerasMguBackwardF64, Backward<ffi::F64>,
                              BackwardBinding<ffi::F64>());
