// Whole-sequence SimpleRNN kernels for the CPU: h_t = act(zx_t + h_{t-1}·U), zx = x·kernel + bias
// (one product for all steps before the op, as the GRU's), the forward and its BPTT one op each.
//
// Built into the library of lstm_kernels.cc by lstmviz/engine/native/kernels.py; cells.py's while-loops
// compute the same and run wherever it is not loaded or for another activation. The scheme of
// gru_kernels.cc with one gate block: the forward keeps act's output y_t [T, B, H] at every step
// (h_t but at masked steps), the backward gives g = dL/dzx = s·dh·act'(y),
// dh_{t-1} = (1 − s)·dh + g·Uᵀ and dU = Σ h_{t-1}ᵀ·g, s the mask's share.
#include <cmath>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "cell_activations.h"
#include "kernel_common.h"
#include "panel_gemm.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

namespace ei = Eigen::internal;
using namespace lstmviz::names;  // NOLINT(build/namespaces): kernel_common.h

// Calls fn(std::integral_constant<Kind, act>) for the SimpleRNN activations the kernels are
// built for: tanh, relu, sigmoid. native.py names the same.
template <typename Fn>
absl::Status WithKind(Kind act, Fn&& fn) {
  switch (act) {
    case Kind::kTanh:
      fn(std::integral_constant<Kind, Kind::kTanh>{});
      break;
    case Kind::kRelu:
      fn(std::integral_constant<Kind, Kind::kRelu>{});
      break;
    case Kind::kSigmoid:
      fn(std::integral_constant<Kind, Kind::kSigmoid>{});
      break;
    default:
      return InvalidArgument("the SimpleRNN kernels compute tanh, relu or sigmoid");
  }
  return absl::OkStatus();
}

absl::Status ReadKind(OpKernelConstruction* ctx, Kind* act) {
  std::string name;
  TF_RETURN_IF_ERROR(ctx->GetAttr("activation", &name));
  TF_RETURN_IF_ERROR(KindOf(name, act));
  return WithKind(*act, [](auto) {});
}

}  // namespace

REGISTER_OP("LstmvizRnnForward")
    .Input("zx: float")         // [T, B, H]: x·kernel + bias
    .Input("h0: float")         // [B, H]
    .Input("recurrent: float")  // [H, H]
    .Input("probe: float")      // [T, B, H], never read
    .Input("mask: masks * float")
    .Attr("masks: int >= 0")
    .Attr("activation: string")
    .Attr("reverse: bool = false")  // StepOrder (kernel_common.h)
    .Attr("share: int = 1")
    .Output("h: float")      // [T, B, H]
    .Output("gates: float")  // [T, B, H]: act(zx_t + h_{t-1}·U) at every step
    .SetShapeFn([](InferenceContext* ctx) {
      ctx->set_output(0, ctx->input(0));
      ctx->set_output(1, ctx->input(0));
      return AtMostOne(ctx, {"mask"});
    });

REGISTER_OP("LstmvizRnnBackward")
    .Input("recurrent: float")  // [H, H], the forward's inputs and outputs:
    .Input("h0: float")         // [B, H]
    .Input("h: float")          // [T, B, H]
    .Input("gates: float")      // [T, B, H]
    .Input("dh_direct: dh_given * float")  // none (zero), or [T, B, H]
    .Input("mask: masks * float")
    .Attr("dh_given: int >= 0")
    .Attr("masks: int >= 0")
    .Attr("activation: string")
    .Attr("reverse: bool = false")  // the forward's StepOrder
    .Attr("share: int = 1")
    .Output("dzx: float")          // [T, B, H]
    .Output("dh: float")           // [T, B, H]: total dL/dh_t
    .Output("dh0: float")          // [B, H]
    .Output("d_recurrent: float")  // [H, H]
    .Output("norms: float")        // [T, 2]: per step ‖dh_t‖, ‖dh_direct_t‖ (0 if none)
    .SetShapeFn([](InferenceContext* ctx) {
      DimensionHandle steps = ctx->Dim(ctx->input(2), 0), batch = ctx->Dim(ctx->input(2), 1),
                      hidden = ctx->Dim(ctx->input(2), 2);
      ctx->set_output(0, ctx->input(2));
      ctx->set_output(1, ctx->input(2));
      ctx->set_output(2, ctx->MakeShape({batch, hidden}));
      ctx->set_output(3, ctx->MakeShape({hidden, hidden}));
      ctx->set_output(4, ctx->MakeShape({steps, 2}));
      return AtMostOne(ctx, {"dh_direct", "mask"});
    });

class RnnForward : public OpKernel {
 public:
  explicit RnnForward(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadKind(ctx, &act_));
    OP_REQUIRES_OK(ctx, order_.Read(ctx));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor &zx_in = ctx->input(0), &h0_in = ctx->input(1), &recurrent = ctx->input(2);
    OP_REQUIRES(ctx, zx_in.dims() == 3, InvalidArgument("zx must be [T, B, H]"));
    const int64_t T = zx_in.dim_size(0), B = zx_in.dim_size(1), H = zx_in.dim_size(2);
    OP_REQUIRES(ctx,
                h0_in.shape() == TensorShape({B, H}) && recurrent.shape() == TensorShape({H, H}),
                InvalidArgument("SimpleRNN shapes disagree: zx ", zx_in.shape().DebugString(),
                                ", recurrent ", recurrent.shape().DebugString(), ", h0 ",
                                h0_in.shape().DebugString()));
    const float* mask;
    OP_REQUIRES_OK(ctx, OptionalMask(ctx, T, B, &mask));
    Tensor *h_out, *gates_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, zx_in.shape(), &h_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, zx_in.shape(), &gates_out));
    const float *zxs = zx_in.flat<float>().data(), *h0 = h0_in.flat<float>().data();
    float *hs = h_out->flat<float>().data(), *ys = gates_out->flat<float>().data();
    Panels weights(H, H);
    weights.Append(recurrent.flat<float>().data(), H, H, 1);
    const int64_t back = order_.Back(B);
    OP_REQUIRES_OK(ctx, WithKind(act_, [&](auto act) {
      constexpr Kind A = decltype(act)::value;
      ForRowBlocks(ctx, B, [&](int64_t, int64_t r0, int64_t r1, const auto& stop) {
        const int64_t n = r1 - r0, width = weights.padded_columns();
        Eigen::ArrayXf m(n * width);
        for (int64_t step = 0; step < T && !stop(); ++step) {
          const int64_t row = order_.At(step, T) * B + r0;
          const float* h_prev = step == 0 ? h0 + r0 * H : hs + (row - back) * H;
          lstmviz::Prefetch next;
          next.Add(zxs + row * H, n * H);
          next.Add(ys + row * H, n * H, true);
          next.Add(hs + row * H, n * H, true);
          weights.Multiply(n, {{h_prev, H, 1, H}}, m.data(), width, &next);
          for (int64_t r = 0; r < n; ++r) {
            const int64_t at = (row + r) * H;
            const float *zx = zxs + at, *mr = m.data() + r * width, *hp = h_prev + r * H;
            const Share s(mask, row + r);
            ForUnits(H, [&](int64_t j, auto lanes) {
              using P = decltype(lanes);
              const P y = Apply<A>(Load<P>(zx + j) + Load<P>(mr + j));
              Store(ys + at + j, y);
              Store(hs + at + j,
                    ei::pset1<P>(s.share) * y + ei::pset1<P>(s.keep) * Load<P>(hp + j));
            });
          }
        }
      }, "SimpleRNN", order_.share);
    }));
  }

 private:
  Kind act_;
  StepOrder order_;
};

class RnnBackward : public OpKernel {
 public:
  explicit RnnBackward(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadKind(ctx, &act_));
    OP_REQUIRES_OK(ctx, order_.Read(ctx));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor &recurrent = ctx->input(0), &h0_in = ctx->input(1), &h_in = ctx->input(2),
                 &gates_in = ctx->input(3);
    OP_REQUIRES(ctx, h_in.dims() == 3, InvalidArgument("h must be [T, B, H]"));
    const int64_t T = h_in.dim_size(0), B = h_in.dim_size(1), H = h_in.dim_size(2);
    OP_REQUIRES(ctx,
                recurrent.shape() == TensorShape({H, H}) &&
                    h0_in.shape() == TensorShape({B, H}) && gates_in.shape() == h_in.shape(),
                InvalidArgument("SimpleRNN gradient shapes disagree: h ",
                                h_in.shape().DebugString(), ", recurrent ",
                                recurrent.shape().DebugString()));
    const float *direct, *mask;
    OP_REQUIRES_OK(ctx, Optional(ctx, "dh_direct", h_in.shape(), &direct));
    OP_REQUIRES_OK(ctx, OptionalMask(ctx, T, B, &mask));
    Tensor *dzx_out, *dh_out, *dh0_out, *du_out, *norms_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, h_in.shape(), &dzx_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, h_in.shape(), &dh_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, h0_in.shape(), &dh0_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, recurrent.shape(), &du_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, TensorShape({T, 2}), &norms_out));
    const float *hs = h_in.flat<float>().data(), *ys = gates_in.flat<float>().data(),
                *h0 = h0_in.flat<float>().data();
    float *dzxs = dzx_out->flat<float>().data(), *dhs = dh_out->flat<float>().data(),
          *dh0 = dh0_out->flat<float>().data();
    Panels recurrent_t(H, H);
    recurrent_t.Append(recurrent.flat<float>().data(), H, 1, H);
    constexpr int64_t kChunkDepth = 128;  // as the GRU's
    const int64_t blocks = lstmviz::RowBlocks(ctx, B, order_.share),
                  gradient_width = Panels::PaddedColumns(H), back = order_.Back(B);
    std::vector<Eigen::ArrayXf> partials(blocks);
    lstmviz::StepSquares squares(blocks, T, 2);  // ‖dh_t‖, ‖direct_t‖
    OP_REQUIRES_OK(ctx, WithKind(act_, [&](auto act) {
      constexpr Kind A = decltype(act)::value;
      ForRowBlocks(ctx, B, [&](int64_t block, int64_t r0, int64_t r1, const auto& stop) {
        const int64_t n = r1 - r0, width = recurrent_t.padded_columns();
        const int64_t chunk_steps = (kChunkDepth + n - 1) / std::max<int64_t>(n, 1);
        Eigen::ArrayXf dh_next = Eigen::ArrayXf::Zero(n * width), chunk(chunk_steps * n * H);
        Eigen::ArrayXf& partial = partials[block];
        partial.setZero(H * gradient_width);
        Panels g_chunk(H, chunk_steps * n);
        int64_t chunked = 0;
        for (int64_t step = T - 1; step >= 0 && !stop(); --step) {
          const int64_t t = order_.At(step, T), row = t * B + r0;
          const float* h_prev = step == 0 ? h0 + r0 * H : hs + (row - back) * H;
          Packet square[2] = {Packet{}, Packet{}};
          float tail[2] = {0.0f, 0.0f};
          for (int64_t r = 0; r < n; ++r) {
            const int64_t at = (row + r) * H;
            float* dh_in = dh_next.data() + r * width;
            const Share s(mask, row + r);
            ForUnits(H, [&](int64_t j, auto lanes) {
              using P = decltype(lanes);
              const P dh = TotalGradient<P>(direct, dhs, at, dh_in, j, square, tail);
              Store(dzxs + at + j, ei::pset1<P>(s.share) * dh * Slope<A>(Load<P>(ys + at + j)));
              Store(dh_in + j, ei::pset1<P>(s.keep) * dh);
            });
          }
          squares.Add(block, t, square, tail);
          std::copy_n(h_prev, n * H, chunk.data() + chunked * n * H);
          lstmviz::Prefetch next;
          if (step > 0) {
            const int64_t before = row - back;
            next.Add(ys + before * H, n * H);
            if (direct != nullptr) next.Add(direct + before * H, n * H);
            next.Add(dzxs + before * H, n * H, true);
            next.Add(dhs + before * H, n * H, true);
          }
          g_chunk.Append(dzxs + row * H, n, H, 1);
          if (++chunked == chunk_steps || step == 0) {
            g_chunk.Multiply<true>(H, {{chunk.data(), 1, H, chunked * n}}, partial.data(),
                                   gradient_width, &next);
            g_chunk.Clear();
            chunked = 0;
          }
          recurrent_t.Multiply<true>(n, {{dzxs + row * H, H, 1, H}}, dh_next.data(), width,
                                     &next);
        }
        for (int64_t r = 0; r < n; ++r) {
          std::copy_n(dh_next.data() + r * width, H, dh0 + (r0 + r) * H);
        }
      }, "SimpleRNN", order_.share);
    }));
    if (!ctx->status().ok()) return;
    squares.Write(ctx, norms_out->flat<float>().data(), {dhs, direct}, B * H);
    float* du = du_out->flat<float>().data();
    for (int64_t m = 0; m < H; ++m) {
      ArrayMap sum(du + m * H, H);
      sum.setZero();
      for (const Eigen::ArrayXf& partial : partials) {
        sum += ConstArrayMap(partial.data() + m * gradient_width, H);
      }
    }
  }

 private:
  Kind act_;
  StepOrder order_;
};

REGISTER_KERNEL_BUILDER(Name("LstmvizRnnForward").Device(tensorflow::DEVICE_CPU), RnnForward);
REGISTER_KERNEL_BUILDER(Name("LstmvizRnnBackward").Device(tensorflow::DEVICE_CPU), RnnBackward);
