// Per-step norms of a gradient: norms[t] = sqrt(Σ g[t, ...]²), one pass over g.
//
// Built into the native kernels' library (native.py); gradients.graph_step_norm uses it when
// the library is loaded, and graph_last_axis_norm over a gradient's rows (the saliency's
// norms over the input's features). TensorFlow's sqrt(reduce_sum(square(g))) writes the
// squares to a temporary as large as g before summing them: two passes over it and one over
// the temporary, which for three [T, B, H] gradients of a taped run is most of what the run
// spends outside the LSTM kernels on one core.
//
// Each step's squares are summed in float packets over blocks of kBlock values, the blocks'
// sums in double: more accurate than TensorFlow's float32 reduction. A step whose sum float
// squares cannot be trusted with (kernel_common.h, Inexact: a vanishing or overflowing
// gradient) is summed again with each square in double, so the norms are exact.
#include <algorithm>
#include <cmath>

#include "Eigen/Core"
#include "kernel_common.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

namespace ei = lstmviz::ei;
using lstmviz::kLanes;
using lstmviz::Packet;
constexpr int64_t kBlock = 64 * kLanes;

// sqrt(Σ v[k]²) over k < n.
float Norm(const float* v, int64_t n) {
  double total = 0.0;
  int64_t k = 0;
  for (; k + kBlock <= n; k += kBlock) {
    Packet sum[4] = {ei::pzero(Packet{}), ei::pzero(Packet{}), ei::pzero(Packet{}),
                     ei::pzero(Packet{})};
    for (int64_t j = k; j < k + kBlock; j += 4 * kLanes) {
      for (int u = 0; u < 4; ++u) {
        const Packet x = ei::ploadu<Packet>(v + j + u * kLanes);
        sum[u] = ei::padd(sum[u], ei::pmul(x, x));
      }
    }
    total += ei::predux(ei::padd(ei::padd(sum[0], sum[1]), ei::padd(sum[2], sum[3])));
  }
  Packet rest = ei::pzero(Packet{});  // under kBlock values left: whole packets, then floats
  for (; k + kLanes <= n; k += kLanes) {
    const Packet x = ei::ploadu<Packet>(v + k);
    rest = ei::padd(rest, ei::pmul(x, x));
  }
  total += ei::predux(rest);
  for (; k < n; ++k) total += static_cast<double>(v[k] * v[k]);
  if (lstmviz::Inexact(total)) total = lstmviz::ExactSquares(v, n);
  return static_cast<float>(std::sqrt(total));
}

}  // namespace

REGISTER_OP("LstmvizStepNorms")
    .Input("g: float")       // [T, ...]
    .Output("norms: float")  // [T]
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* ctx) {
      tensorflow::shape_inference::ShapeHandle g;
      TF_RETURN_IF_ERROR(ctx->WithRankAtLeast(ctx->input(0), 1, &g));
      ctx->set_output(0, ctx->Vector(ctx->Dim(g, 0)));
      return absl::OkStatus();
    });

class StepNorms : public tensorflow::OpKernel {
 public:
  explicit StepNorms(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(tensorflow::OpKernelContext* ctx) override {
    const tensorflow::Tensor& g = ctx->input(0);
    OP_REQUIRES(ctx, g.dims() >= 1,
                tensorflow::errors::InvalidArgument("g must have a leading step axis"));
    const int64_t T = g.dim_size(0), n = T == 0 ? 0 : g.NumElements() / T;
    tensorflow::Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tensorflow::TensorShape({T}), &out));
    const float* values = g.flat<float>().data();
    float* norms = out->flat<float>().data();
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        T, 2 * n, [&](int64_t first, int64_t last) {
          for (int64_t t = first; t < last; ++t) norms[t] = Norm(values + t * n, n);
        });
  }
};

REGISTER_KERNEL_BUILDER(Name("LstmvizStepNorms").Device(tensorflow::DEVICE_CPU), StepNorms);
