// The gates panel's statistics of a recurrent direction, one pass over its gate activations.
//
// Built into the native kernels' library (native.py); model_forward.gate_activity uses it when
// the library is loaded and every gate's activation is tanh or sigmoid. TensorFlow's ops
// (split, compare, cast, concatenate, one einsum per statistic) write two more arrays as large
// as the gates and read them again (docs/performance.md, "Model mode").
//
// gates [T, B, G·H]: G blocks of H units (LSTM i, f, g, o). Gate k is saturated where
// |y - centres[k]| > bounds[k] (float32, as TensorFlow's ops compute it: tanh has centre 0 and
// bound 1 - margin, sigmoid centre 0.5 and bound 0.5 - margin); `diagnosis_bounds` the same by
// the diagnosis's margin. Every (t, b) counts with its weight: the mask [T, B] of 0/1, or 1.
//
// Outputs: sums [T, 3, G], per step and gate, Σ over (b, j) of weight·y, of weight·saturated
// and of weight·saturated by the diagnosis's bound; unit_sums [G·H], Σ over (t, b) of weight·y.
// Each step's sums over the batch in float per unit, then over the units (and, for unit_sums,
// over the steps) in double, always in the same order: the result does not depend on the
// number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

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
    float *sums = sums_out->flat<float>().data(), *unit_sums = units_out->flat<float>().data();
    std::vector<float> per_step(T * width);  // Σ_b weight·y per step and unit
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    workers->ParallelFor(T, 4 * B * width, [&](int64_t first, int64_t last) {
      // Per unit of one step, Σ_b weight·saturated by each bound: elementwise updates over
      // the units (vectorized), reduced over the units once per step.
      std::vector<float> saturated(width), diagnosed(width);
      for (int64_t t = first; t < last; ++t) {
        float* units = per_step.data() + t * width;
        std::fill_n(units, width, 0.0f);
        std::fill(saturated.begin(), saturated.end(), 0.0f);
        std::fill(diagnosed.begin(), diagnosed.end(), 0.0f);
        for (int64_t b = 0; b < B; ++b) {
          const float weight = mask == nullptr ? 1.0f : mask[t * B + b];
          if (weight == 0.0f) continue;
          const float* row = values + (t * B + b) * width;
          for (int64_t k = 0; k < G; ++k) {
            const float centre = centres_[k], bound = bounds_[k], diagnosis = diagnosis_[k];
            const float* y = row + k * H;
            float *u = units + k * H, *s = saturated.data() + k * H, *d = diagnosed.data() + k * H;
            for (int64_t j = 0; j < H; ++j) {
              const float off = std::fabs(y[j] - centre);
              u[j] += weight * y[j];
              s[j] += off > bound ? weight : 0.0f;
              d[j] += off > diagnosis ? weight : 0.0f;
            }
          }
        }
        for (int64_t k = 0; k < G; ++k) {
          double total[3] = {0.0, 0.0, 0.0};
          for (int64_t j = k * H; j < (k + 1) * H; ++j) {
            total[0] += units[j];
            total[1] += saturated[j];
            total[2] += diagnosed[j];
          }
          for (int s = 0; s < 3; ++s) sums[(t * 3 + s) * G + k] = static_cast<float>(total[s]);
        }
      }
    });
    workers->ParallelFor(width, 2 * T, [&](int64_t first, int64_t last) {
      for (int64_t j = first; j < last; ++j) {
        double total = 0.0;
        for (int64_t t = 0; t < T; ++t) total += static_cast<double>(per_step[t * width + j]);
        unit_sums[j] = static_cast<float>(total);
      }
    });
  }

 private:
  std::vector<float> centres_, bounds_, diagnosis_;
};

REGISTER_KERNEL_BUILDER(Name("LstmvizGateStats").Device(tensorflow::DEVICE_CPU), GateStats);
