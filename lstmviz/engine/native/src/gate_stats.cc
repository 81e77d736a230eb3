// The gates panel's statistics of a recurrent direction, one pass over its gate activations.
//
// Built into the native kernels' library (native.py); model_forward.gate_activity uses it when
// the library is loaded, every gate's activation is tanh or sigmoid and the kernel that ran
// the direction did not sum them itself (the LSTM forward does: native.gate_sums).
// TensorFlow's ops (split, compare, cast, concatenate, one einsum per statistic) write two more
// arrays as large as the gates and read them again (docs/performance.md, "Model mode").
//
// gates [T, B, G·H], the attributes and the outputs as gate_sums.h defines them; a (t, b)
// counts where the mask [T, B] of 0/1 holds 1 (every one without a mask). The steps are cut
// into blocks as a kernel cuts a batch's rows (ForRowBlocks: one per intra-op thread).
#include <vector>

#include "gate_sums.h"
#include "kernel_common.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using tensorflow::errors::InvalidArgument;

REGISTER_OP("LstmvizGateStats")
    .Input("gates: float")         // [T, B, G·H]
    .Input("mask: masks * float")  // none, or [T, B] of 0/1
    .Attr("masks: int >= 0")
    .Attr("centres: list(float)")           // [G]
    .Attr("bounds: list(float)")            // [G], the gates panel's
    .Attr("diagnosis_bounds: list(float)")  // [G], the diagnosis's
    .Output("sums: float")                  // [T, 3, G]
    .Output("unit_sums: float")             // [G·H]
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* ctx) {
      std::vector<float> centres;
      TF_RETURN_IF_ERROR(ctx->GetAttr("centres", &centres));
      tensorflow::shape_inference::ShapeHandle gates;
      TF_RETURN_IF_ERROR(ctx->WithRank(ctx->input(0), 3, &gates));
      const int64_t count = static_cast<int64_t>(centres.size());
      ctx->set_output(0, ctx->MakeShape({ctx->Dim(gates, 0), 3, count}));
      ctx->set_output(1, ctx->Vector(ctx->Dim(gates, 2)));
      return absl::OkStatus();
    });

class GateStats : public tensorflow::OpKernel {
 public:
  explicit GateStats(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("centres", &centres_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("bounds", &bounds_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("diagnosis_bounds", &diagnosis_));
    OP_REQUIRES(ctx, bounds_.size() == centres_.size() && diagnosis_.size() == centres_.size(),
                InvalidArgument("one centre and two bounds per gate"));
  }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    const tensorflow::Tensor& gates = ctx->input(0);
    OP_REQUIRES(ctx, gates.dims() == 3, InvalidArgument("gates must be [T, B, G·H]"));
    const int64_t T = gates.dim_size(0), B = gates.dim_size(1), width = gates.dim_size(2),
                  G = static_cast<int64_t>(centres_.size());
    OP_REQUIRES(ctx, G > 0 && width % G == 0,
                InvalidArgument("gates' last axis ", width, " is not ", G, " blocks"));
    const int64_t H = width / G;
    const float* mask;
    OP_REQUIRES_OK(ctx, lstmviz::OptionalMask(ctx, T, B, &mask));
    tensorflow::Tensor *sums_out, *units_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tensorflow::TensorShape({T, 3, G}), &sums_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, tensorflow::TensorShape({width}), &units_out));
    const float* values = gates.flat<float>().data();
    lstmviz::GateSums sums(lstmviz::RowBlocks(ctx, T), T, H, centres_, bounds_, diagnosis_);
    lstmviz::ForRowBlocks(ctx, T, [&](int64_t block, int64_t t0, int64_t t1, const auto& stop) {
      lstmviz::GateSums::Step step = sums.At(block);
      for (int64_t t = t0; t < t1 && !stop(); ++t) {
        for (int64_t b = 0; b < B; ++b) {
          if (mask != nullptr && mask[t * B + b] == 0.0f) continue;
          const float* row = values + (t * B + b) * width;
          for (int64_t k = 0; k < G; ++k) {
            lstmviz::ForUnits(H, [&](int64_t j, auto lanes) {
              step.Add(k, j, lstmviz::Load<decltype(lanes)>(row + k * H + j));
            });
          }
        }
        sums.End(block, t);
      }
    }, "gate statistics");
    if (!ctx->status().ok()) return;
    sums.Write(sums_out->flat<float>().data(), units_out->flat<float>().data());
  }

 private:
  std::vector<float> centres_, bounds_, diagnosis_;
};

REGISTER_KERNEL_BUILDER(Name("LstmvizGateStats").Device(tensorflow::DEVICE_CPU), GateStats);
