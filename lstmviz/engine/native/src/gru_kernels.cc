// Whole-sequence GRU kernels for the CPU: the forward recurrence and its BPTT, each one op.
//
// Built into the library of lstm_kernels.cc by lstmviz/engine/native/kernels.py; cells.py's
// while-loops compute the same and run wherever this library is not loaded, or for
// activations these kernels do not compute. Keras's layout and equations, gates z, r, h̃:
// zx [T, B, 3H] = x·kernel + the input bias (one product for all steps, before the op: the
// caller's TensorFlow differentiates it), recurrent U [H, 3H], σ the gate activation and act
// the candidate's:
//
//   reset_after (bias [2, 3H], row 1 β):  m = h_{t-1}·U + β,
//       z = σ(zx_z + m_z), r = σ(zx_r + m_r), h̃ = act(zx_h + r ⊙ m_h)
//   without (bias [3H], all in zx):       z, r = σ(zx_zr + h_{t-1}·U_zr),
//       h̃ = act(zx_h + (r ⊙ h_{t-1})·U_h)
//   ĥ = h̃ + z ⊙ (h_{t-1} − h̃)   (= z ⊙ h_{t-1} + (1 − z) ⊙ h̃)
//
// A mask [T, B] of 0/1 (optional, as in lstm_kernels.cc) carries h over where it is 0:
// h_t = m·ĥ + (1−m)·h_{t-1}. There is no probe to add: the op takes one only as what the
// total dL/dh_t is the gradient of (native.py), and never reads it.
//
// As the LSTM's kernels: the batch split into one block of rows per intra-op thread, each
// running the whole sequence; per step one product h_{t-1}·U (two without reset_after, the
// second on r ⊙ h_{t-1}) and a pass over the units in registers. The forward keeps the gates
// z, r, h̃ [T, B, 3H] (the gates panel's activations, and all the backward needs with h) and,
// with reset_after, m_h [T, B, H]. The backward gives dL/dzx [T, B, 3H] (from which TensorFlow
// gets dL/dx, the kernel's and the input bias's gradients in one product each), the total
// dL/dh_t, dL/dh0, the recurrent kernel's (and β's) gradients, summed over chunks of steps as
// the LSTM's are, and the per-step norms of dL/dh_t and of the direct gradient it was given.
//
// Activations: the derivative of each is computed from its output y (sigmoid y(1−y), tanh
// 1−y², the hard sigmoids their slope where 0 < y < 1), so the forward stores nothing else.
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

// Calls fn(std::integral_constant<Kind, gate>, std::integral_constant<Kind, act>) for the
// pairs the kernels are built for: the gate sigmoid or either hard sigmoid, the candidate
// tanh (every Keras GRU's default, and Keras 2's before 2.3). native.py names the same.
template <typename Fn>
absl::Status WithKinds(Kind gate, Kind act, Fn&& fn) {
  using C = std::integral_constant<Kind, Kind::kTanh>;
  if (act != Kind::kTanh) return InvalidArgument("the GRU kernels compute a tanh candidate");
  switch (gate) {
    case Kind::kSigmoid:
      fn(std::integral_constant<Kind, Kind::kSigmoid>{}, C{});
      break;
    case Kind::kHardSigmoid:
      fn(std::integral_constant<Kind, Kind::kHardSigmoid>{}, C{});
      break;
    case Kind::kHardSigmoidKeras2:
      fn(std::integral_constant<Kind, Kind::kHardSigmoidKeras2>{}, C{});
      break;
    default:
      return InvalidArgument("the GRU kernels compute a sigmoid or hard sigmoid gate");
  }
  return absl::OkStatus();
}

// The attributes both ops take.
struct Activations {
  Kind gate, act;
  bool reset_after;
  StepOrder order;
  absl::Status Read(OpKernelConstruction* ctx) {
    TF_RETURN_IF_ERROR(order.Read(ctx));
    std::string gate_name, act_name;
    TF_RETURN_IF_ERROR(ctx->GetAttr("gate", &gate_name));
    TF_RETURN_IF_ERROR(ctx->GetAttr("activation", &act_name));
    TF_RETURN_IF_ERROR(ctx->GetAttr("reset_after", &reset_after));
    TF_RETURN_IF_ERROR(KindOf(gate_name, &gate));
    TF_RETURN_IF_ERROR(KindOf(act_name, &act));
    return WithKinds(gate, act, [](auto, auto) {});
  }
};


}  // namespace

REGISTER_OP("LstmvizGruForward")
    .Input("zx: float")         // [T, B, 3H]: x·kernel + the input bias
    .Input("h0: float")         // [B, H]
    .Input("recurrent: float")  // [H, 3H]
    .Input("recurrent_bias: biases * float")  // reset_after: [3H] β; none without
    .Input("probe: float")      // [T, B, H], never read (the module comment)
    .Input("mask: masks * float")  // none, or [T, B] of 0/1: 0 carries h over
    .Attr("biases: int >= 0")
    .Attr("masks: int >= 0")
    .Attr("reset_after: bool")
    .Attr("gate: string")        // the recurrent_activation's Keras name
    .Attr("activation: string")  // the candidate's
    .Attr("reverse: bool = false")  // StepOrder (kernel_common.h)
    .Attr("share: int = 1")
    .Output("h: float")          // [T, B, H]
    .Output("gates: float")      // [T, B, 3H]: z, r, h̃ at every step
    .Output("recurrent_h: float")  // reset_after: [T, B, H] m_h = h_{t-1}·U_h + β_h; else [0]
    .SetShapeFn([](InferenceContext* ctx) {
      bool after;
      TF_RETURN_IF_ERROR(ctx->GetAttr("reset_after", &after));
      DimensionHandle steps = ctx->Dim(ctx->input(0), 0), batch = ctx->Dim(ctx->input(1), 0),
                      hidden = ctx->Dim(ctx->input(1), 1), three;
      TF_RETURN_IF_ERROR(ctx->Multiply(hidden, 3, &three));
      ctx->set_output(0, ctx->MakeShape({steps, batch, hidden}));
      ctx->set_output(1, ctx->MakeShape({steps, batch, three}));
      ctx->set_output(2, after ? ctx->MakeShape({steps, batch, hidden}) : ctx->Vector(0));
      return AtMostOne(ctx, {"recurrent_bias", "mask"});
    });

REGISTER_OP("LstmvizGruBackward")
    .Input("recurrent: float")    // [H, 3H], the forward's inputs and outputs:
    .Input("h0: float")           // [B, H]
    .Input("h: float")            // [T, B, H]
    .Input("gates: float")        // [T, B, 3H]
    .Input("recurrent_h: float")  // reset_after: [T, B, H]
    .Input("dh_direct: dh_given * float")  // none (zero), or [T, B, H]: ∂L/∂h_t
    .Input("mask: masks * float")          // the forward's mask (none, or [T, B])
    .Attr("dh_given: int >= 0")
    .Attr("masks: int >= 0")
    .Attr("reset_after: bool")
    .Attr("gate: string")
    .Attr("activation: string")
    .Attr("reverse: bool = false")  // the forward's StepOrder
    .Attr("share: int = 1")
    .Output("dzx: float")          // [T, B, 3H]: dL/dzx
    .Output("dh: float")           // [T, B, H]: total dL/dh_t through the recurrence
    .Output("dh0: float")          // [B, H]
    .Output("d_recurrent: float")  // [H, 3H]
    .Output("d_recurrent_bias: float")  // [3H]: dL/dβ (zeros without reset_after)
    .Output("norms: float")        // [T, 2]: per step ‖dh_t‖, ‖dh_direct_t‖ (0 if none)
    .SetShapeFn([](InferenceContext* ctx) {
      DimensionHandle steps = ctx->Dim(ctx->input(2), 0), batch = ctx->Dim(ctx->input(2), 1),
                      hidden = ctx->Dim(ctx->input(2), 2), three;
      TF_RETURN_IF_ERROR(ctx->Multiply(hidden, 3, &three));
      ctx->set_output(0, ctx->MakeShape({steps, batch, three}));
      ctx->set_output(1, ctx->input(2));
      ctx->set_output(2, ctx->MakeShape({batch, hidden}));
      ctx->set_output(3, ctx->MakeShape({hidden, three}));
      ctx->set_output(4, ctx->MakeShape({three}));
      ctx->set_output(5, ctx->MakeShape({steps, 2}));
      return AtMostOne(ctx, {"dh_direct", "mask"});
    });

class GruForward : public OpKernel {
 public:
  explicit GruForward(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, kinds_.Read(ctx));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor &zx = ctx->input(0), &h0 = ctx->input(1), &recurrent = ctx->input(2);
    OP_REQUIRES(ctx, zx.dims() == 3 && h0.dims() == 2,
                InvalidArgument("zx must be [T, B, 3H] and h0 [B, H]"));
    const int64_t T = zx.dim_size(0), B = zx.dim_size(1), H = h0.dim_size(1);
    OP_REQUIRES(ctx,
                zx.shape() == TensorShape({T, B, 3 * H}) && h0.dim_size(0) == B &&
                    recurrent.shape() == TensorShape({H, 3 * H}),
                InvalidArgument("GRU shapes disagree: zx ", zx.shape().DebugString(),
                                ", recurrent ", recurrent.shape().DebugString(), ", h0 ",
                                h0.shape().DebugString()));
    const float *beta, *mask;
    OP_REQUIRES_OK(ctx, Optional(ctx, "recurrent_bias", TensorShape({3 * H}), &beta));
    OP_REQUIRES(ctx, (beta != nullptr) == kinds_.reset_after,
                InvalidArgument("a recurrent bias goes with reset_after, and only with it"));
    OP_REQUIRES_OK(ctx, OptionalMask(ctx, T, B, &mask));
    Tensor *h_out, *gates_out, *extra_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({T, B, H}), &h_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({T, B, 3 * H}), &gates_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            2, kinds_.reset_after ? TensorShape({T, B, H}) : TensorShape({0}),
                            &extra_out));
    Buffers b{T, B, H, zx.flat<float>().data(), h0.flat<float>().data(),
              recurrent.flat<float>().data(), beta, mask, h_out->flat<float>().data(),
              gates_out->flat<float>().data(), extra_out->flat<float>().data(), kinds_.order};
    OP_REQUIRES_OK(ctx, WithKinds(kinds_.gate, kinds_.act, [&](auto gate, auto act) {
      if (kinds_.reset_after) {
        RunAfter<decltype(gate)::value, decltype(act)::value>(ctx, b);
      } else {
        RunBefore<decltype(gate)::value, decltype(act)::value>(ctx, b);
      }
    }));
  }

 private:
  struct Buffers {
    int64_t T, B, H;
    const float *zx, *h0, *recurrent, *beta, *mask;
    float *hs, *gates, *extra;
    StepOrder order;

    // The step-th step run, of the n rows from r0: their first row's index t·B + r0 (t its
    // input position) and, in *h_prev, the h of the step run before (h0's for the first);
    // adds their rows of zx and gates to `next`.
    int64_t Step(int64_t step, int64_t r0, int64_t n, lstmviz::Prefetch& next,
                 const float** h_prev) const {
      const int64_t row = order.At(step, T) * B + r0;
      *h_prev = step == 0 ? h0 + r0 * H : hs + (row - order.Back(B)) * H;
      next.Add(zx + row * 3 * H, n * 3 * H);
      next.Add(gates + row * 3 * H, n * 3 * H, true);
      return row;
    }
  };

  // reset_after: one product m = h_{t-1}·U + β per step.
  template <Kind G, Kind A>
  static void RunAfter(OpKernelContext* ctx, const Buffers& b) {
    const int64_t T = b.T, B = b.B, H = b.H;
    Panels weights(3 * H, H);
    weights.Append(b.recurrent, H, 3 * H, 1);
    weights.SetInit(b.beta);
    ForRowBlocks(ctx, B, [&](int64_t, int64_t r0, int64_t r1, const auto& stop) {
      const int64_t n = r1 - r0, width = weights.padded_columns();
      Eigen::ArrayXf m(n * width);
      for (int64_t step = 0; step < T && !stop(); ++step) {
        lstmviz::Prefetch next;
        const float* h_prev;
        const int64_t row = b.Step(step, r0, n, next, &h_prev);
        next.Add(b.extra + row * H, n * H, true);
        next.Add(b.hs + row * H, n * H, true);
        weights.Multiply(n, {{h_prev, H, 1, H}}, m.data(), width, &next);
        for (int64_t r = 0; r < n; ++r) {
          const int64_t at = (row + r) * H;
          const float *zx = b.zx + (row + r) * 3 * H, *mr = m.data() + r * width,
                      *hp = h_prev + r * H;
          float *g = b.gates + (row + r) * 3 * H, *mh_out = b.extra + at, *h = b.hs + at;
          const Share s(b.mask, row + r);
          ForUnits(H, [&](int64_t j, auto lanes) {
            using P = decltype(lanes);
            const P z = Apply<G>(Load<P>(zx + j) + Load<P>(mr + j)),
                    rr = Apply<G>(Load<P>(zx + H + j) + Load<P>(mr + H + j)),
                    mh = Load<P>(mr + 2 * H + j), hh = Apply<A>(Load<P>(zx + 2 * H + j) + rr * mh),
                    before = Load<P>(hp + j), fresh = hh + z * (before - hh);
            Store(g + j, z);
            Store(g + H + j, rr);
            Store(g + 2 * H + j, hh);
            Store(mh_out + j, mh);
            // m·new + (1-m)·previous: exactly the one or the other for m = 1 or 0.
            Store(h + j, ei::pset1<P>(s.share) * fresh + ei::pset1<P>(s.keep) * before);
          });
        }
      }
    }, "GRU", b.order.share);
  }

  // Without reset_after: z, r from h_{t-1}·U_zr, then h̃ from (r ⊙ h_{t-1})·U_h.
  template <Kind G, Kind A>
  static void RunBefore(OpKernelContext* ctx, const Buffers& b) {
    const int64_t T = b.T, B = b.B, H = b.H;
    Panels u_zr(2 * H, H), u_h(H, H);
    u_zr.Append(b.recurrent, H, 3 * H, 1);
    u_h.Append(b.recurrent + 2 * H, H, 3 * H, 1);
    ForRowBlocks(ctx, B, [&](int64_t, int64_t r0, int64_t r1, const auto& stop) {
      const int64_t n = r1 - r0, width_zr = u_zr.padded_columns(), width_h = u_h.padded_columns();
      Eigen::ArrayXf m(n * width_zr), mh(n * width_h), rh(n * H);
      for (int64_t step = 0; step < T && !stop(); ++step) {
        lstmviz::Prefetch next;
        const float* h_prev;
        const int64_t row = b.Step(step, r0, n, next, &h_prev);
        next.Add(b.hs + row * H, n * H, true);
        u_zr.Multiply(n, {{h_prev, H, 1, H}}, m.data(), width_zr, &next);
        for (int64_t r = 0; r < n; ++r) {
          const float *zx = b.zx + (row + r) * 3 * H, *mr = m.data() + r * width_zr,
                      *hp = h_prev + r * H;
          float *g = b.gates + (row + r) * 3 * H, *rh_row = rh.data() + r * H;
          ForUnits(H, [&](int64_t j, auto lanes) {
            using P = decltype(lanes);
            const P z = Apply<G>(Load<P>(zx + j) + Load<P>(mr + j)),
                    rr = Apply<G>(Load<P>(zx + H + j) + Load<P>(mr + H + j));
            Store(g + j, z);
            Store(g + H + j, rr);
            Store(rh_row + j, rr * Load<P>(hp + j));
          });
        }
        u_h.Multiply(n, {{rh.data(), H, 1, H}}, mh.data(), width_h);
        for (int64_t r = 0; r < n; ++r) {
          const float *zx = b.zx + (row + r) * 3 * H, *mr = mh.data() + r * width_h,
                      *hp = h_prev + r * H;
          float *g = b.gates + (row + r) * 3 * H, *h = b.hs + (row + r) * H;
          const Share s(b.mask, row + r);
          ForUnits(H, [&](int64_t j, auto lanes) {
            using P = decltype(lanes);
            const P z = Load<P>(g + j), hh = Apply<A>(Load<P>(zx + 2 * H + j) + Load<P>(mr + j)),
                    before = Load<P>(hp + j), fresh = hh + z * (before - hh);
            Store(g + 2 * H + j, hh);
            Store(h + j, ei::pset1<P>(s.share) * fresh + ei::pset1<P>(s.keep) * before);
          });
        }
      }
    }, "GRU", b.order.share);
  }

  Activations kinds_;
};

class GruBackward : public OpKernel {
 public:
  explicit GruBackward(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, kinds_.Read(ctx));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor &recurrent = ctx->input(0), &h0 = ctx->input(1), &h_in = ctx->input(2),
                 &gates_in = ctx->input(3), &extra_in = ctx->input(4);
    OP_REQUIRES(ctx, h_in.dims() == 3, InvalidArgument("h must be [T, B, H]"));
    const int64_t T = h_in.dim_size(0), B = h_in.dim_size(1), H = h_in.dim_size(2);
    const TensorShape extra_shape =
        kinds_.reset_after ? h_in.shape() : TensorShape({0});  // the forward's recurrent_h
    OP_REQUIRES(ctx,
                recurrent.shape() == TensorShape({H, 3 * H}) &&
                    h0.shape() == TensorShape({B, H}) &&
                    gates_in.shape() == TensorShape({T, B, 3 * H}) &&
                    extra_in.shape() == extra_shape,
                InvalidArgument("GRU gradient shapes disagree: h ", h_in.shape().DebugString(),
                                ", gates ", gates_in.shape().DebugString(), ", recurrent ",
                                recurrent.shape().DebugString()));
    const float *direct, *mask;
    OP_REQUIRES_OK(ctx, Optional(ctx, "dh_direct", h_in.shape(), &direct));
    OP_REQUIRES_OK(ctx, OptionalMask(ctx, T, B, &mask));
    Tensor *dzx_out, *dh_out, *dh0_out, *du_out, *dbeta_out, *norms_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, gates_in.shape(), &dzx_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, h_in.shape(), &dh_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, h0.shape(), &dh0_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, recurrent.shape(), &du_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, TensorShape({3 * H}), &dbeta_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(5, TensorShape({T, 2}), &norms_out));
    const int64_t blocks = RowBlocks(ctx, B, kinds_.order.share);
    Buffers b{T,
              B,
              H,
              recurrent.flat<float>().data(),
              h0.flat<float>().data(),
              h_in.flat<float>().data(),
              gates_in.flat<float>().data(),
              extra_in.flat<float>().data(),
              direct,
              mask,
              dzx_out->flat<float>().data(),
              dh_out->flat<float>().data(),
              dh0_out->flat<float>().data(),
              lstmviz::StepSquares(blocks, T, 2),
              kinds_.order};
    float *du = du_out->flat<float>().data(), *dbeta = dbeta_out->flat<float>().data();
    OP_REQUIRES_OK(ctx, WithKinds(kinds_.gate, kinds_.act, [&](auto gate, auto act) {
      if (kinds_.reset_after) {
        RunAfter<decltype(gate)::value, decltype(act)::value>(ctx, b, du, dbeta);
      } else {
        RunBefore<decltype(gate)::value, decltype(act)::value>(ctx, b, du, dbeta);
      }
    }));
    if (!ctx->status().ok()) return;
    b.squares.Write(ctx, norms_out->flat<float>().data(), {b.dhs, b.direct}, B * H);
  }

 private:
  // The weight gradients accumulate per block over chunks of this many rows' worth of steps
  // (as in lstm_kernels.cc): one product of that depth rather than one per step.
  static constexpr int64_t kChunkDepth = 128;

  struct Buffers {
    int64_t T, B, H;
    const float *recurrent, *h0, *hs, *gates, *extra, *direct, *mask;
    float *dzx, *dhs, *dh0;
    lstmviz::StepSquares squares;  // ‖dh_t‖, ‖direct_t‖
    StepOrder order;
  };

  // Σ over blocks, in block order, of rows [0, rows) of the partials [·, ld] into out [rows,
  // columns] with row stride out_ld, at column offset `column`.
  static void SumPartials(const std::vector<Eigen::ArrayXf>& partials, int64_t first_row,
                          int64_t rows, int64_t columns, int64_t ld, float* out, int64_t out_ld) {
    for (int64_t m = 0; m < rows; ++m) {
      ArrayMap sum(out + m * out_ld, columns);
      sum.setZero();
      for (const Eigen::ArrayXf& partial : partials) {
        sum += ConstArrayMap(partial.data() + (first_row + m) * ld, columns);
      }
    }
  }

  // reset_after. With dm = dL/d(h_{t-1}·U + β) and s = m_t (1 without a mask):
  //   g_z = s·dh·(h_{t-1} − h̃)·σ'(z),  g_h = s·dh·(1 − z)·act'(h̃),  g_r = g_h·m_h·σ'(r)
  //   dzx = [g_z, g_r, g_h],  dm = [g_z, g_r, g_h·r]
  //   dh_{t-1} = dh·(s·z + 1 − s) + dm·Uᵀ;  dU = Σ h_{t-1}ᵀ·dm, dβ = Σ dm.
  template <Kind G, Kind A>
  static void RunAfter(OpKernelContext* ctx, Buffers& b, float* du, float* dbeta) {
    const int64_t T = b.T, B = b.B, H = b.H, wide = H + 1;
    Panels recurrent_t(H, 3 * H);
    recurrent_t.Append(b.recurrent, 3 * H, 1, 3 * H);
    const int64_t gradient_width = Panels::PaddedColumns(3 * H);
    std::vector<Eigen::ArrayXf> partials(RowBlocks(ctx, B, b.order.share));
    const int64_t back = b.order.Back(B);
    ForRowBlocks(ctx, B, [&](int64_t block, int64_t r0, int64_t r1, const auto& stop) {
      const int64_t n = r1 - r0, width = recurrent_t.padded_columns();
      const int64_t chunk_steps = (kChunkDepth + n - 1) / std::max<int64_t>(n, 1);
      Eigen::ArrayXf dh_next = Eigen::ArrayXf::Zero(n * width), dm(n * 3 * H),
                     chunk = Eigen::ArrayXf::Ones(chunk_steps * n * wide);  // [h_{t-1} | 1]
      Eigen::ArrayXf& partial = partials[block];
      partial.setZero(wide * gradient_width);
      Panels dm_chunk(3 * H, chunk_steps * n);
      int64_t chunked = 0;
      for (int64_t step = T - 1; step >= 0 && !stop(); --step) {
        const int64_t t = b.order.At(step, T), row = t * B + r0;
        Packet square[2] = {Packet{}, Packet{}};
        float tail[2] = {0.0f, 0.0f};
        for (int64_t r = 0; r < n; ++r) {
          const int64_t at = (row + r) * H;
          const float *hp = step == 0 ? b.h0 + (r0 + r) * H : b.hs + at - back * H,
                      *g = b.gates + (row + r) * 3 * H, *mh_row = b.extra + at;
          float *dh_in = dh_next.data() + r * width, *dzx = b.dzx + (row + r) * 3 * H,
                *dm_row = dm.data() + r * 3 * H;
          const Share s(b.mask, row + r);
          ForUnits(H, [&](int64_t j, auto lanes) {
            using P = decltype(lanes);
            const P dh = TotalGradient<P>(b.direct, b.dhs, at, dh_in, j, square, tail);
            const P one = ei::pset1<P>(1.0f), share = ei::pset1<P>(s.share),
                    z = Load<P>(g + j), rr = Load<P>(g + H + j), hh = Load<P>(g + 2 * H + j),
                    to_cell = share * dh, gz = to_cell * ((Load<P>(hp + j) - hh) * Slope<G>(z)),
                    gh = to_cell * ((one - z) * Slope<A>(hh)),
                    gr = gh * (Load<P>(mh_row + j) * Slope<G>(rr));
            Store(dzx + j, gz);
            Store(dzx + H + j, gr);
            Store(dzx + 2 * H + j, gh);
            Store(dm_row + j, gz);
            Store(dm_row + H + j, gr);
            Store(dm_row + 2 * H + j, gh * rr);
            Store(dh_in + j, dh * (share * z + ei::pset1<P>(s.keep)));  // what passes straight
          });
          std::copy_n(hp, H, chunk.data() + (chunked * n + r) * wide);
        }
        b.squares.Add(block, t, square, tail);
        lstmviz::Prefetch next;
        if (step > 0) {
          const int64_t before = row - back;
          next.Add(b.gates + before * 3 * H, n * 3 * H);
          next.Add(b.extra + before * H, n * H);
          next.Add(step == 1 ? b.h0 + r0 * H : b.hs + (before - back) * H, n * H);
          if (b.direct != nullptr) next.Add(b.direct + before * H, n * H);
          next.Add(b.dzx + before * 3 * H, n * 3 * H, true);
          next.Add(b.dhs + before * H, n * H, true);
        }
        dm_chunk.Append(dm.data(), n, 3 * H, 1);
        if (++chunked == chunk_steps || step == 0) {
          dm_chunk.Multiply<true>(wide, {{chunk.data(), 1, wide, chunked * n}}, partial.data(),
                                  gradient_width, &next);
          dm_chunk.Clear();
          chunked = 0;
        }
        recurrent_t.Multiply<true>(n, {{dm.data(), 3 * H, 1, 3 * H}}, dh_next.data(), width,
                                   &next);
      }
      for (int64_t r = 0; r < n; ++r) {
        std::copy_n(dh_next.data() + r * width, H, b.dh0 + (r0 + r) * H);
      }
    }, "GRU", b.order.share);
    if (!ctx->status().ok()) return;
    SumPartials(partials, 0, H, 3 * H, gradient_width, du, 3 * H);
    SumPartials(partials, H, 1, 3 * H, gradient_width, dbeta, 3 * H);
  }

  // Without reset_after. With d(rh) = dL/d(r ⊙ h_{t-1}) and s as above:
  //   g_z, g_h as with reset_after;  d(rh) = g_h·U_hᵀ,  g_r = d(rh)·h_{t-1}·σ'(r)
  //   dh_{t-1} = dh·(s·z + 1 − s) + d(rh)·r + [g_z, g_r]·U_zrᵀ
  //   dU_zr = Σ h_{t-1}ᵀ·[g_z, g_r],  dU_h = Σ (r ⊙ h_{t-1})ᵀ·g_h.
  template <Kind G, Kind A>
  static void RunBefore(OpKernelContext* ctx, Buffers& b, float* du, float* dbeta) {
    const int64_t T = b.T, B = b.B, H = b.H, wide = 2 * H;
    Panels u_zr_t(H, 2 * H), u_h_t(H, H);
    u_zr_t.Append(b.recurrent, 2 * H, 1, 3 * H);
    u_h_t.Append(b.recurrent + 2 * H, H, 1, 3 * H);
    const int64_t width_zr = Panels::PaddedColumns(2 * H), width_h = Panels::PaddedColumns(H);
    std::vector<Eigen::ArrayXf> partials(RowBlocks(ctx, B, b.order.share));
    const int64_t back = b.order.Back(B);
    ForRowBlocks(ctx, B, [&](int64_t block, int64_t r0, int64_t r1, const auto& stop) {
      const int64_t n = r1 - r0, width = u_zr_t.padded_columns();
      const int64_t chunk_steps = (kChunkDepth + n - 1) / std::max<int64_t>(n, 1);
      // chunk rows [h_{t-1} | r ⊙ h_{t-1}]; the partial [H, width_zr + width_h]: dU_zr, dU_h
      Eigen::ArrayXf dh_next = Eigen::ArrayXf::Zero(n * width), drh(n * width_h),
                     chunk(chunk_steps * n * wide);
      Eigen::ArrayXf& partial = partials[block];
      partial.setZero(H * (width_zr + width_h));
      Panels zr_chunk(2 * H, chunk_steps * n), h_chunk(H, chunk_steps * n);
      int64_t chunked = 0;
      for (int64_t step = T - 1; step >= 0 && !stop(); --step) {
        const int64_t t = b.order.At(step, T), row = t * B + r0;
        const float* h_prev = step == 0 ? b.h0 + r0 * H : b.hs + (row - back) * H;
        float* dzx_step = b.dzx + row * 3 * H;
        Packet square[2] = {Packet{}, Packet{}};
        float tail[2] = {0.0f, 0.0f};
        for (int64_t r = 0; r < n; ++r) {
          const int64_t at = (row + r) * H;
          const float *hp = h_prev + r * H, *g = b.gates + (row + r) * 3 * H;
          float *dh_in = dh_next.data() + r * width, *dzx = dzx_step + r * 3 * H;
          const Share s(b.mask, row + r);
          ForUnits(H, [&](int64_t j, auto lanes) {
            using P = decltype(lanes);
            const P dh = TotalGradient<P>(b.direct, b.dhs, at, dh_in, j, square, tail);
            const P one = ei::pset1<P>(1.0f), share = ei::pset1<P>(s.share),
                    z = Load<P>(g + j), hh = Load<P>(g + 2 * H + j), to_cell = share * dh;
            Store(dzx + j, to_cell * ((Load<P>(hp + j) - hh) * Slope<G>(z)));
            Store(dzx + 2 * H + j, to_cell * ((one - z) * Slope<A>(hh)));
            Store(dh_in + j, dh * (share * z + ei::pset1<P>(s.keep)));
          });
        }
        b.squares.Add(block, t, square, tail);
        u_h_t.Multiply(n, {{dzx_step + 2 * H, 3 * H, 1, H}}, drh.data(), width_h);
        for (int64_t r = 0; r < n; ++r) {
          const float *hp = h_prev + r * H, *g = b.gates + (row + r) * 3 * H,
                      *d = drh.data() + r * width_h;
          float *dh_in = dh_next.data() + r * width, *dzx = dzx_step + r * 3 * H,
                *chunk_row = chunk.data() + (chunked * n + r) * wide;
          ForUnits(H, [&](int64_t j, auto lanes) {
            using P = decltype(lanes);
            const P rr = Load<P>(g + H + j), before = Load<P>(hp + j), d_rh = Load<P>(d + j);
            Store(dzx + H + j, d_rh * (before * Slope<G>(rr)));
            Store(dh_in + j, Load<P>(dh_in + j) + d_rh * rr);
            Store(chunk_row + j, before);
            Store(chunk_row + H + j, rr * before);
          });
        }
        lstmviz::Prefetch next;
        if (step > 0) {
          const int64_t before = row - back;
          next.Add(b.gates + before * 3 * H, n * 3 * H);
          next.Add(step == 1 ? b.h0 + r0 * H : b.hs + (before - back) * H, n * H);
          if (b.direct != nullptr) next.Add(b.direct + before * H, n * H);
          next.Add(b.dzx + before * 3 * H, n * 3 * H, true);
          next.Add(b.dhs + before * H, n * H, true);
        }
        zr_chunk.Append(dzx_step, n, 3 * H, 1);
        h_chunk.Append(dzx_step + 2 * H, n, 3 * H, 1);
        if (++chunked == chunk_steps || step == 0) {
          zr_chunk.Multiply<true>(H, {{chunk.data(), 1, wide, chunked * n}}, partial.data(),
                                  width_zr + width_h);
          h_chunk.Multiply<true>(H, {{chunk.data() + H, 1, wide, chunked * n}},
                                 partial.data() + width_zr, width_zr + width_h, &next);
          zr_chunk.Clear();
          h_chunk.Clear();
          chunked = 0;
        }
        u_zr_t.Multiply<true>(n, {{dzx_step, 3 * H, 1, 2 * H}}, dh_next.data(), width, &next);
      }
      for (int64_t r = 0; r < n; ++r) {
        std::copy_n(dh_next.data() + r * width, H, b.dh0 + (r0 + r) * H);
      }
    }, "GRU", b.order.share);
    if (!ctx->status().ok()) return;
    const int64_t ld = width_zr + width_h;
    for (int64_t m = 0; m < H; ++m) {
      ArrayMap zr(du + m * 3 * H, 2 * H), h(du + m * 3 * H + 2 * H, H);
      zr.setZero();
      h.setZero();
      for (const Eigen::ArrayXf& partial : partials) {
        zr += ConstArrayMap(partial.data() + m * ld, 2 * H);
        h += ConstArrayMap(partial.data() + m * ld + width_zr, H);
      }
    }
    std::fill_n(dbeta, 3 * H, 0.0f);
  }

  Activations kinds_;
};

REGISTER_KERNEL_BUILDER(Name("LstmvizGruForward").Device(tensorflow::DEVICE_CPU), GruForward);
REGISTER_KERNEL_BUILDER(Name("LstmvizGruBackward").Device(tensorflow::DEVICE_CPU), GruBackward);
