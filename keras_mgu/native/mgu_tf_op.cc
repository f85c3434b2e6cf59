// TensorFlow operators of the MGU loops, for the TensorFlow front-end
// (tf.load_op_library). Shapes are those of mgu_kernel.h; `u` is (H, 2H) or,
// for G groups, (G, H, 2H) with B a multiple of G; `mask` is a (T, B) boolean
// tensor or, with masked = false, a placeholder that is not read; `threads` is
// the most threads a call may use (0: the CPUs available).
#include <cstdint>
#include <string>

#include "mgu_kernel.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("KerasMguForward")
    .Input("xw: T")
    .Input("h0: T")
    .Input("u: T")
    .Input("mask: bool")
    .Output("hs: T")
    .Output("saved: T")
    .Attr("T: {float, double}")
    .Attr("activation: int")
    .Attr("recurrent_activation: int")
    .Attr("masked: bool")
    .Attr("threads: int")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle xw, u;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &xw));
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(2), 2, &u));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(u, 3, &u));
      DimensionHandle units, three;
      TF_RETURN_IF_ERROR(c->Divide(c->Dim(xw, 2), 2, true, &units));
      TF_RETURN_IF_ERROR(c->Multiply(units, 3, &three));
      c->set_output(0, c->MakeShape({c->Dim(xw, 0), c->Dim(xw, 1), units}));
      c->set_output(1, c->MakeShape({c->Dim(xw, 0), c->Dim(xw, 1), three}));
      return absl::OkStatus();
    });

REGISTER_OP("KerasMguBackward")
    .Input("d_hs: T")
    .Input("saved: T")
    .Input("u: T")
    .Input("mask: bool")
    .Output("dxw: T")
    .Output("dh0: T")
    .Output("du: T")
    .Attr("T: {float, double}")
    .Attr("activation: int")
    .Attr("recurrent_activation: int")
    .Attr("masked: bool")
    .Attr("threads: int")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle d_hs, u;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &d_hs));
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(2), 2, &u));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(u, 3, &u));
      DimensionHandle units = c->Dim(d_hs, 2), two;
      TF_RETURN_IF_ERROR(c->Multiply(units, 2, &two));
      c->set_output(0, c->MakeShape({c->Dim(d_hs, 0), c->Dim(d_hs, 1), two}));
      c->set_output(1, c->MakeShape({c->Dim(d_hs, 1), units}));
      ShapeHandle du = u;  // u's shape: (H, 2H) or (G, H, 2H)
      if (c->RankKnown(u)) {
        ShapeHandle kernel = c->MakeShape({units, two});
        if (c->Rank(u) == 3) {
          TF_RETURN_IF_ERROR(c->Concatenate(c->MakeShape({c->Dim(u, 0)}), kernel, &kernel));
        }
        TF_RETURN_IF_ERROR(c->Merge(u, kernel, &du));
      }
      c->set_output(2, du);
      return absl::OkStatus();
    });

// The attributes both operators share.
struct Settings {
  explicit Settings(OpKernelConstruction* ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("activation", &activation));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("recurrent_activation", &recurrent_activation));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("masked", &masked));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("threads", &threads));
  }
  int activation = 0, recurrent_activation = 0, threads = 0;
  bool masked = false;
};

// Checks that `tensor` has `shape`; false (with the error set) otherwise.
bool HasShape(OpKernelContext* ctx, const Tensor& tensor, const TensorShape& shape,
              const char* name) {
  if (tensor.shape() == shape) return true;
  ctx->CtxFailure(absl::InvalidArgumentError(
      std::string("keras_mgu: `") + name + "` must have shape " + shape.DebugString() +
      "; received " + tensor.shape().DebugString()));
  return false;
}

// G from `u`, (H, 2H) or (G, H, 2H), after checking its shape and that the
// batch is a multiple of G; false (with the error set) otherwise.
bool Groups(OpKernelContext* ctx, const Tensor& u, int64_t batch, int64_t units,
            int64_t* groups) {
  if (u.dims() != 2 && u.dims() != 3) {
    ctx->CtxFailure(absl::InvalidArgumentError(
        "keras_mgu: `u` must have shape (H, 2H) or (G, H, 2H); received " +
        u.shape().DebugString()));
    return false;
  }
  *groups = u.dims() == 3 ? u.dim_size(0) : 1;
  const TensorShape want = u.dims() == 3 ? TensorShape({*groups, units, 2 * units})
                                         : TensorShape({units, 2 * units});
  if (!HasShape(ctx, u, want, "u")) return false;
  if (*groups >= 1 && batch % *groups == 0) return true;
  ctx->CtxFailure(absl::InvalidArgumentError(
      "keras_mgu: `u` of shape " + u.shape().DebugString() + " gives G = " +
      std::to_string(*groups) + " groups; expected G >= 1 and a batch that is a multiple of G, " +
      "received a batch of " + std::to_string(batch)));
  return false;
}

// The mask's data when masked and of shape (T, B), else null (or an error).
bool MaskData(OpKernelContext* ctx, bool masked, int64_t steps, int64_t batch,
              const uint8_t** data) {
  *data = nullptr;
  if (!masked) return true;
  const Tensor& mask = ctx->input(3);
  if (!HasShape(ctx, mask, TensorShape({steps, batch}), "mask")) return false;
  *data = reinterpret_cast<const uint8_t*>(mask.flat<bool>().data());
  return true;
}

void Finish(OpKernelContext* ctx, int code, const char* what) {
  if (code == 2) {
    ctx->CtxFailure(absl::ResourceExhaustedError(std::string("keras_mgu native ") + what +
                                                 " ran out of memory"));
  } else if (code != 0) {
    ctx->CtxFailure(absl::InvalidArgumentError(std::string("keras_mgu native ") + what +
                                               " refused its arguments"));
  }
}

template <typename T>
class ForwardOp : public OpKernel {
 public:
  explicit ForwardOp(OpKernelConstruction* ctx) : OpKernel(ctx), settings_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& xw = ctx->input(0);
    OP_REQUIRES(ctx, xw.dims() == 3 && xw.dim_size(2) % 2 == 0,
                absl::InvalidArgumentError("keras_mgu: `xw` must have shape (T, B, 2H)"));
    const int64_t steps = xw.dim_size(0), batch = xw.dim_size(1), units = xw.dim_size(2) / 2;
    const Tensor& h0 = ctx->input(1);
    const Tensor& u = ctx->input(2);
    const uint8_t* mask = nullptr;
    int64_t groups = 1;
    if (!HasShape(ctx, h0, TensorShape({batch, units}), "h0") ||
        !Groups(ctx, u, batch, units, &groups) ||
        !MaskData(ctx, settings_.masked, steps, batch, &mask)) {
      return;
    }
    Tensor* hs = nullptr;
    Tensor* saved = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({steps, batch, units}), &hs));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({steps, batch, 3 * units}), &saved));
    Finish(ctx,
           keras_mgu::mgu_forward<T>(steps, batch, units, groups, xw.flat<T>().data(),
                                     h0.flat<T>().data(), u.flat<T>().data(), mask,
                                     settings_.activation, settings_.recurrent_activation,
                                     hs->flat<T>().data(), saved->flat<T>().data(),
                                     settings_.threads, /*batch_major=*/false),
           "forward");
  }

 private:
  Settings settings_;
};

template <typename T>
class BackwardOp : public OpKernel {
 public:
  explicit BackwardOp(OpKernelConstruction* ctx) : OpKernel(ctx), settings_(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& d_hs = ctx->input(0);
    OP_REQUIRES(ctx, d_hs.dims() == 3,
                absl::InvalidArgumentError("keras_mgu: `d_hs` must have shape (T, B, H)"));
    const int64_t steps = d_hs.dim_size(0), batch = d_hs.dim_size(1), units = d_hs.dim_size(2);
    const Tensor& saved = ctx->input(1);
    const Tensor& u = ctx->input(2);
    const uint8_t* mask = nullptr;
    int64_t groups = 1;
    if (!HasShape(ctx, saved, TensorShape({steps, batch, 3 * units}), "saved") ||
        !Groups(ctx, u, batch, units, &groups) ||
        !MaskData(ctx, settings_.masked, steps, batch, &mask)) {
      return;
    }
    Tensor* dxw = nullptr;
    Tensor* dh0 = nullptr;
    Tensor* du = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({steps, batch, 2 * units}), &dxw));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({batch, units}), &dh0));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, u.shape(), &du));
    Finish(ctx,
           keras_mgu::mgu_backward<T>(steps, batch, units, groups, d_hs.flat<T>().data(),
                                      nullptr, saved.flat<T>().data(), u.flat<T>().data(), mask,
                                      settings_.activation, settings_.recurrent_activation,
                                      dxw->flat<T>().data(), dh0->flat<T>().data(),
                                      du->flat<T>().data(), settings_.threads,
                                      /*batch_major=*/false),
           "backward");
  }

 private:
  Settings settings_;
};

#define KERAS_MGU_REGISTER(T)                                                         \
  REGISTER_KERNEL_BUILDER(                                                            \
      Name("KerasMguForward").Device(::tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
      ForwardOp<T>);                                                                  \
  REGISTER_KERNEL_BUILDER(                                                            \
      Name("KerasMguBackward").Device(::tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), \
      BackwardOp<T>);

KERAS_MGU_REGISTER(float)
KERAS_MGU_REGISTER(double)

}  // namespace
