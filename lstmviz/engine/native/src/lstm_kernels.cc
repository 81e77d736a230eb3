// Whole-sequence LSTM kernels for the CPU: the forward recurrence and its BPTT, each one op.
//
// Built by lstmviz/engine/native/kernels.py (g++ against the installed TensorFlow's headers); the
// while-loops in cell.py compute the same and are used wherever this library is not built
// or loaded. Layout and gate order as Keras: x [T, B, I], kernel [I, 4H], recurrent [H, 4H],
// bias [4H], gates i, f, g (candidate), o; h, c [B, H] per step.
//
// Masking (Keras's semantics): both ops take an optional mask [T, B] of 0/1 values, as a list
// of zero or one tensors (TensorFlow's way to make an input optional). Where m_t[b] = 0 the
// state is carried over (h_t = h_{t-1}, c_t = c_{t-1}); where it is 1 the cell runs. Exactly:
// h_t = m·ĥ_t + (1-m)·h_{t-1} + probe_h[t], c_t likewise, ĥ_t, ĉ_t the cell's new state. The
// unmasked code is a separate instantiation (kMasked = false) that pays nothing for masking.
//
// Batch rows never interact along the recurrence, so each op splits the batch into one block
// of rows per intra-op thread and runs the whole sequence on each block with no
// synchronisation, where TensorFlow's while-loop pays a dispatch for each of some 40 small ops
// per step. A forward step is one product, [x_t | h_{t-1}]·[kernel; recurrent] + bias, and one
// pass over the gates; a backward step one pass over the gates and the product dz_t·Uᵀ, and
// every few steps the weight gradients' [x_t | h_{t-1} | 1]ᵀ·dz_t for the steps since. The
// products are panel_gemm.h's register-tiled FMA kernel. Both ops poll an interrupt flag once
// per step (lstmviz_interrupt below: Stop in the GUI).
//
// Memory: the forward keeps the gate activations [T, B, 4H] for the backward, which recomputes
// ĉ_t = f·c_{t-1} + i·g and tanh(ĉ_t) from them and the c_t it is given (the same code on the
// same floats, so the same values), and writes dz over them when TensorFlow lets it reuse the
// buffer (in a compiled graph, where nothing else reads them). A loss that does not reach h or
// c passes no [T, B, H] of zeros for it.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "gate_sums.h"
#include "kernel_common.h"
#include "panel_gemm.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

namespace ei = Eigen::internal;
using namespace lstmviz::names;  // NOLINT(build/namespaces): kernel_common.h

using Masked = std::true_type;
using Unmasked = std::false_type;

// The cell's new state ĉ = f·c_prev + i·g. The forward and the backward both compute it, and
// tanh(ĉ), with this code on the same floats and the same split into packets: the backward's
// values are the forward's, bit for bit.
template <typename P>
EIGEN_ALWAYS_INLINE P NewCell(const P& i, const P& f, const P& g, const P& c_prev) {
  return f * c_prev + i * g;
}

}  // namespace

// Stops every native op (LSTM, GRU) running in this process at its next step (they fail with
// Cancelled); ops started afterwards run normally. Safe from any thread; called through
// ctypes (lstmviz/engine/native/interrupt.py), so the GUI thread never runs TensorFlow for it.
extern "C" void lstmviz_interrupt() { lstmviz::interrupts.fetch_add(1); }

// What this build computes with, for the benchmark's header (native.py reads it by ctypes):
// the instruction set Eigen's packets use, and the register tile of the products.
extern "C" const char* lstmviz_kernel_build() {
  static const std::string text = std::string(kInstructions) + ", " + std::to_string(kLanes) +
                                  " floats a vector, " + std::to_string(kTileRows) + "×" +
                                  std::to_string(kPanel) + " register tiles";
  return text.c_str();
}

REGISTER_OP("LstmvizSequenceForward")
    .Input("x: float")          // [T, B, I]
    .Input("kernel: float")     // [I, 4H]
    .Input("recurrent: float")  // [H, 4H]
    .Input("bias: float")       // [4H]
    .Input("h0: float")         // [B, H]
    .Input("c0: float")         // [B, H]
    .Input("probe_h: float")    // [T, B, H], added to h_t
    .Input("probe_c: float")    // [T, B, H], added to c_t
    .Input("mask: masks * float")  // none, or [T, B] of 0/1: 0 carries the state over
    .Attr("masks: int >= 0")       // how many: 0 or 1
    // false: the probes are zeros by definition (native.unread_probes), their values neither
    // written nor read: only what dL/dh_t and dL/dc_t are the gradients of.
    .Attr("read_probes: bool = true")
    .Attr("reverse: bool = false")  // StepOrder (kernel_common.h)
    .Attr("share: int = 1")
    // The gates panel's statistics of the activations (gate_sums.h), one value per gate i, f,
    // g, o each; none: not summed (sums [0, 3, 4], unit_sums [0]).
    .Attr("centres: list(float) = []")
    .Attr("bounds: list(float) = []")
    .Attr("diagnosis_bounds: list(float) = []")
    .Output("h: float")          // [T, B, H]
    .Output("c: float")          // [T, B, H]
    .Output("gates: float")      // [T, B, 4H], the cell's i, f, g, o at every step
    .Output("sums: float")       // [T, 3, 4], the steps' sums of the gates
    .Output("unit_sums: float")  // [4H], the units'
    .SetShapeFn([](InferenceContext* ctx) {
      DimensionHandle steps = ctx->Dim(ctx->input(0), 0), batch = ctx->Dim(ctx->input(4), 0),
                      hidden = ctx->Dim(ctx->input(4), 1), four;
      TF_RETURN_IF_ERROR(ctx->Multiply(hidden, 4, &four));
      std::vector<float> centres;
      TF_RETURN_IF_ERROR(ctx->GetAttr("centres", &centres));
      const bool summed = !centres.empty();
      ctx->set_output(0, ctx->MakeShape({steps, batch, hidden}));
      ctx->set_output(1, ctx->MakeShape({steps, batch, hidden}));
      ctx->set_output(2, ctx->MakeShape({steps, batch, four}));
      ctx->set_output(3, summed ? ctx->MakeShape({steps, 3, 4}) : ctx->MakeShape({0, 3, 4}));
      ctx->set_output(4, summed ? ctx->Vector(four) : ctx->Vector(0));
      return AtMostOne(ctx, {"mask"});
    });

REGISTER_OP("LstmvizSequenceBackward")
    .Input("x: float")          // [T, B, I], the forward's inputs and outputs:
    .Input("recurrent: float")  // [H, 4H]
    .Input("h0: float")         // [B, H]
    .Input("c0: float")         // [B, H]
    .Input("h: float")          // [T, B, H]
    .Input("c: float")          // [T, B, H]
    .Input("gates: float")      // [T, B, 4H]
    .Input("dh_direct: dh_given * float")  // none (zero), or [T, B, H]: ∂L/∂h_t
    .Input("dc_direct: dc_given * float")  // none (zero), or [T, B, H]: ∂L/∂c_t
    .Input("mask: masks * float")          // the forward's mask (none, or [T, B])
    .Input("kernel: float")                // [I, 4H], for dx
    .Attr("dh_given: int >= 0")
    .Attr("dc_given: int >= 0")
    .Attr("masks: int >= 0")
    .Attr("reverse: bool = false")  // the forward's StepOrder
    .Attr("share: int = 1")
    .Output("dz: float")            // [T, B, 4H], dL/d(gate pre-activations); may reuse `gates`
    .Output("dh: float")            // [T, B, H], total dL/dh_t through the recurrence
    .Output("dc: float")            // [T, B, H], total dL/dc_t
    .Output("dh0: float")           // [B, H]
    .Output("dc0: float")           // [B, H]
    .Output("d_kernel: float")      // [I, 4H] = Σ_t x_tᵀ·dz_t
    .Output("d_recurrent: float")   // [H, 4H] = Σ_t h_{t-1}ᵀ·dz_t
    .Output("d_bias: float")        // [4H] = Σ_t Σ_b dz_t[b]
    .Output("norms: float")         // [T, 3]: per step ‖dh_t‖, ‖dc_t‖, ‖dh_direct_t‖ (0 if none)
    .Output("dx: float")            // [T, B, I] = dz_t·kernelᵀ
    .SetShapeFn([](InferenceContext* ctx) {
      DimensionHandle steps = ctx->Dim(ctx->input(5), 0), batch = ctx->Dim(ctx->input(5), 1),
                      hidden = ctx->Dim(ctx->input(5), 2), inputs = ctx->Dim(ctx->input(0), 2),
                      four;
      TF_RETURN_IF_ERROR(ctx->Multiply(hidden, 4, &four));
      ctx->set_output(0, ctx->MakeShape({steps, batch, four}));
      ctx->set_output(1, ctx->input(5));
      ctx->set_output(2, ctx->input(5));
      ctx->set_output(3, ctx->MakeShape({batch, hidden}));
      ctx->set_output(4, ctx->MakeShape({batch, hidden}));
      ctx->set_output(5, ctx->MakeShape({inputs, four}));
      ctx->set_output(6, ctx->MakeShape({hidden, four}));
      ctx->set_output(7, ctx->MakeShape({four}));
      ctx->set_output(8, ctx->MakeShape({steps, 3}));
      ctx->set_output(9, ctx->input(0));
      return AtMostOne(ctx, {"dh_direct", "dc_direct", "mask"});
    });

class SequenceForward : public OpKernel {
 public:
  explicit SequenceForward(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("read_probes", &read_probes_));
    OP_REQUIRES_OK(ctx, order_.Read(ctx));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("centres", &centres_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("bounds", &bounds_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("diagnosis_bounds", &diagnosis_));
    OP_REQUIRES(ctx,
                (centres_.empty() || centres_.size() == 4) && bounds_.size() == centres_.size() &&
                    diagnosis_.size() == centres_.size(),
                InvalidArgument("the gate statistics take one centre and two bounds per gate"));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor &x = ctx->input(0), &kernel = ctx->input(1), &recurrent = ctx->input(2),
                 &bias = ctx->input(3), &h0 = ctx->input(4), &c0 = ctx->input(5),
                 &probe_h = ctx->input(6), &probe_c = ctx->input(7);
    OP_REQUIRES(ctx, x.dims() == 3 && h0.dims() == 2,
                InvalidArgument("x must be [T, B, I] and h0 [B, H]"));
    const int64_t T = x.dim_size(0), B = x.dim_size(1), I = x.dim_size(2), H = h0.dim_size(1);
    const TensorShape state({B, H}), states({T, B, H});
    OP_REQUIRES(ctx,
                kernel.shape() == TensorShape({I, 4 * H}) &&
                    recurrent.shape() == TensorShape({H, 4 * H}) &&
                    bias.shape() == TensorShape({4 * H}) && h0.shape() == state &&
                    c0.shape() == state && probe_h.shape() == states && probe_c.shape() == states,
                InvalidArgument("LSTM shapes disagree: x ", x.shape().DebugString(), ", kernel ",
                                kernel.shape().DebugString(), ", recurrent ",
                                recurrent.shape().DebugString(), ", h0 ",
                                h0.shape().DebugString()));
    Tensor *h_out, *c_out, *gates_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, states, &h_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, states, &c_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({T, B, 4 * H}), &gates_out));
    const bool summed = !centres_.empty();
    Tensor *sums_out, *unit_sums_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({summed ? T : 0, 3, 4}), &sums_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, TensorShape({summed ? 4 * H : 0}), &unit_sums_out));
    std::optional<lstmviz::GateSums> sums;
    if (summed) {
      sums.emplace(RowBlocks(ctx, B, order_.share), T, H, centres_, bounds_, diagnosis_);
    }
    const float *xs = x.flat<float>().data(), *h_init = h0.flat<float>().data(),
                *c_init = c0.flat<float>().data(),
                *ph = read_probes_ ? probe_h.flat<float>().data() : nullptr,
                *pc = read_probes_ ? probe_c.flat<float>().data() : nullptr;
    float *hs = h_out->flat<float>().data(), *cs = c_out->flat<float>().data(),
          *gates = gates_out->flat<float>().data();
    const float* mask;
    OP_REQUIRES_OK(ctx, OptionalMask(ctx, T, B, &mask));
    // z_t = [x_t | h_{t-1}]·[kernel; recurrent] + bias, the weights packed once for all steps,
    // into this thread's buffer kept from call to call (the backward's buffers say why); the
    // blocks, on other threads, reach it through the reference.
    static thread_local Panels weights_buffer(0, 0);
    Panels& weights = weights_buffer;
    weights.Reset(4 * H, I + H);
    weights.Append(kernel.flat<float>().data(), I, 4 * H, 1);
    weights.Append(recurrent.flat<float>().data(), H, 4 * H, 1);
    weights.SetInit(bias.flat<float>().data());
    const int64_t back = order_.Back(B);

    // kMasked (Masked or Unmasked), kProbed (the probes are read) and kSummed (the gate
    // statistics) pick the instantiation; the unmasked one is the mask-free code, with no
    // per-row test.
    const auto run = [&](auto masked, auto probed, auto with_sums) {
      constexpr bool kMasked = decltype(masked)::value, kProbed = decltype(probed)::value,
                     kSummed = decltype(with_sums)::value;
      ForRowBlocks(ctx, B, [&](int64_t block, int64_t r0, int64_t r1, const auto& stop) {
        std::optional<lstmviz::GateSums::Step> step_sums;
        if constexpr (kSummed) step_sums.emplace(sums->At(block));
        const int64_t n = r1 - r0, width = weights.padded_columns();
        static thread_local Eigen::ArrayXf z;
        z.resize(n * width);
        for (int64_t step = 0; step < T && !stop(); ++step) {
          const int64_t t = order_.At(step, T);
          const int64_t row = t * B + r0;  // this block's first row at step t in [T·B, ·]
          const float* h_prev = step == 0 ? h_init + r0 * H : hs + (row - back) * H;
          const float* c_prev_block = step == 0 ? c_init + r0 * H : cs + (row - back) * H;
          // What this step's gate pass reads and writes, and the next step's x.
          lstmviz::Prefetch next;
          if (ph != nullptr) next.Add(ph + row * H, n * H);
          if (pc != nullptr) next.Add(pc + row * H, n * H);
          next.Add(gates + row * 4 * H, n * 4 * H, true);
          next.Add(hs + row * H, n * H, true);
          next.Add(cs + row * H, n * H, true);
          if (step + 1 < T) next.Add(xs + (row + back) * I, n * I);
          weights.Multiply(n, {{xs + row * I, I, 1, I}, {h_prev, H, 1, H}}, z.data(), width,
                           &next);
          for (int64_t r = 0; r < n; ++r) {
            const int64_t at = (row + r) * H;
            const float *zr = z.data() + r * width, *c_prev = c_prev_block + r * H,
                        *h_row = h_prev + r * H;
            float *g_row = gates + (row + r) * 4 * H, *c_row = cs + at, *h_row_out = hs + at;
            const float m = kMasked ? mask[row + r] : 1.0f;
            const bool counted = kSummed && m != 0.0f;  // a masked row is not summed
            ForUnits(H, [&](int64_t j, auto lanes) {
              using P = decltype(lanes);
              const P i = Sigmoid(Load<P>(zr + j)), f = Sigmoid(Load<P>(zr + H + j)),
                      g = Tanh(Load<P>(zr + 2 * H + j)), o = Sigmoid(Load<P>(zr + 3 * H + j));
              Store(g_row + j, i);
              Store(g_row + H + j, f);
              Store(g_row + 2 * H + j, g);
              Store(g_row + 3 * H + j, o);
              if (counted) {
                step_sums->Add(0, j, i);
                step_sums->Add(1, j, f);
                step_sums->Add(2, j, g);
                step_sums->Add(3, j, o);
              }
              const P cp = Load<P>(c_prev + j), c_new = NewCell(i, f, g, cp), h_new = o * Tanh(c_new);
              P c_out = c_new, h_out = h_new;
              if constexpr (kMasked) {
                // m·new + (1-m)·previous: exactly the one or the other for m = 1 or 0.
                const P share = ei::pset1<P>(m), keep = ei::pset1<P>(1.0f - m);
                c_out = share * c_new + keep * cp;
                h_out = share * h_new + keep * Load<P>(h_row + j);
              }
              if constexpr (kProbed) {
                c_out = c_out + Load<P>(pc + at + j);
                h_out = h_out + Load<P>(ph + at + j);
              }
              Store(c_row + j, c_out);
              Store(h_row_out + j, h_out);
            });
          }
          if constexpr (kSummed) sums->End(block, t);
        }
      }, "LSTM", order_.share);
    };
    // The instantiation for (masked, probed) with kSummed as `summed` says.
    const auto run_summed = [&](auto masked, auto probed) {
      summed ? run(masked, probed, std::true_type{}) : run(masked, probed, std::false_type{});
    };
    using Probed = std::true_type;
    using Unprobed = std::false_type;
    if (mask == nullptr) {
      read_probes_ ? run_summed(Unmasked{}, Probed{}) : run_summed(Unmasked{}, Unprobed{});
    } else {
      read_probes_ ? run_summed(Masked{}, Probed{}) : run_summed(Masked{}, Unprobed{});
    }
    if (summed && ctx->status().ok()) {
      sums->Write(sums_out->flat<float>().data(), unit_sums_out->flat<float>().data());
    }
  }

 private:
  bool read_probes_;
  StepOrder order_;
  std::vector<float> centres_, bounds_, diagnosis_;  // the gate statistics' (none: not summed)
};

class SequenceBackward : public OpKernel {
 public:
  explicit SequenceBackward(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, order_.Read(ctx));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor &x = ctx->input(0), &recurrent = ctx->input(1), &h0 = ctx->input(2),
                 &c0 = ctx->input(3), &h_in = ctx->input(4), &c_in = ctx->input(5),
                 &gates_in = ctx->input(6);
    OP_REQUIRES(ctx, x.dims() == 3 && c_in.dims() == 3,
                InvalidArgument("x must be [T, B, I] and c [T, B, H]"));
    const int64_t T = c_in.dim_size(0), B = c_in.dim_size(1), H = c_in.dim_size(2),
                  I = x.dim_size(2);
    OP_REQUIRES(ctx,
                x.shape() == TensorShape({T, B, I}) &&
                    recurrent.shape() == TensorShape({H, 4 * H}) &&
                    h0.shape() == TensorShape({B, H}) && c0.shape() == h0.shape() &&
                    h_in.shape() == c_in.shape() &&
                    gates_in.shape() == TensorShape({T, B, 4 * H}),
                InvalidArgument("LSTM gradient shapes disagree: x ", x.shape().DebugString(),
                                ", c ", c_in.shape().DebugString(), ", gates ",
                                gates_in.shape().DebugString(), ", h0 ",
                                h0.shape().DebugString()));
    const Tensor* kernel;
    OP_REQUIRES_OK(ctx, ctx->input("kernel", &kernel));
    OP_REQUIRES(ctx, kernel->shape() == TensorShape({I, 4 * H}),
                InvalidArgument("kernel must be [I, 4H], got ", kernel->shape().DebugString()));
    const float *dh_d, *dc_d, *mask;
    OP_REQUIRES_OK(ctx, Optional(ctx, "dh_direct", c_in.shape(), &dh_d));
    OP_REQUIRES_OK(ctx, Optional(ctx, "dc_direct", c_in.shape(), &dc_d));
    OP_REQUIRES_OK(ctx, OptionalMask(ctx, T, B, &mask));
    Tensor *dz_out = nullptr, *dx_out = nullptr, *dh_out, *dc_out, *dh0_out, *dc0_out, *dk_out,
           *du_out, *db_out, *norms_out;
    // dz is an output only when something reads it (not the gradient function, which takes dx:
    // compiled graphs prune it): then each step's dz stays in a block's scratch rows, and the
    // gates, only read, are not written back. Kept, it takes the gates' buffer when it can.
    const bool keep_dz = ctx->output_required(0);
    if (keep_dz) {
      OP_REQUIRES_OK(ctx,
                     ctx->forward_input_or_allocate_output({6}, 0, gates_in.shape(), &dz_out));
    }
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, c_in.shape(), &dh_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, c_in.shape(), &dc_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, h0.shape(), &dh0_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, h0.shape(), &dc0_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(5, TensorShape({I, 4 * H}), &dk_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(6, TensorShape({H, 4 * H}), &du_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(7, TensorShape({4 * H}), &db_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(8, TensorShape({T, 3}), &norms_out));
    // dx likewise only when asked for: each step's product gives it beside dh_{t-1}.
    const int64_t dx_width = ctx->output_required(9) ? I : 0;
    // The weight gradients likewise (a pass that follows only the states' gradients, e.g. the
    // error of one step, prunes them): their chunk products are half the work of a step.
    const bool weight_grads =
        ctx->output_required(5) || ctx->output_required(6) || ctx->output_required(7);
    if (dx_width > 0) OP_REQUIRES_OK(ctx, ctx->allocate_output(9, x.shape(), &dx_out));
    const float *xs = x.flat<float>().data(), *gates = gates_in.flat<float>().data(),
                *hs = h_in.flat<float>().data(), *cs = c_in.flat<float>().data(),
                *h_init = h0.flat<float>().data(), *c_init = c0.flat<float>().data();
    float *dzs = keep_dz ? dz_out->flat<float>().data() : nullptr,
          *dxs = dx_out != nullptr ? dx_out->flat<float>().data() : nullptr,
          *dhs = dh_out->flat<float>().data(),
          *dcs = dc_out->flat<float>().data(), *dh0 = dh0_out->flat<float>().data(),
          *dc0 = dc0_out->flat<float>().data();
    // dh_{t-1}'s recurrent part dz_t·Uᵀ (and dx_t = dz_t·kernelᵀ beside it: one product of
    // [U; kernel]ᵀ [4H, H + I]), packed once.
    // This thread's buffers (here and in the blocks below) are kept from call to call: fresh
    // ones, zeroed, would be pages faulted in at every call, milliseconds for a call of one
    // step (a decoder stepped per token). One op runs on a thread at a time.
    // (The blocks run on other threads: they reach the caller's buffers through references.)
    static thread_local std::vector<float> joined_buffer;
    std::vector<float>& joined = joined_buffer;
    joined.assign(recurrent.flat<float>().data(), recurrent.flat<float>().data() + H * 4 * H);
    joined.insert(joined.end(), kernel->flat<float>().data(),
                  kernel->flat<float>().data() + dx_width * 4 * H);
    static thread_local Panels recurrent_buffer(0, 0);
    Panels& recurrent_t = recurrent_buffer;
    recurrent_t.Reset(H + dx_width, 4 * H);
    recurrent_t.Append(joined.data(), 4 * H, 1, 4 * H);
    // The weight gradients [x_t | h_{t-1} | 1]ᵀ·dz_t [I+H+1, 4H] (the last row: the bias's)
    // accumulate per block over chunks of steps, dz packed as B: one product of depth
    // kChunkDepth or more rather than one per step of depth n, which few rows would make
    // load-bound. Each block sums into its own partial; the partials are added in block order,
    // so the result does not depend on which thread finished first.
    constexpr int64_t kChunkDepth = 256;
    const int64_t wide = I + H + 1, blocks = RowBlocks(ctx, B, order_.share);
    const int64_t gradient_width = Panels::PaddedColumns(4 * H);
    static thread_local std::vector<Eigen::ArrayXf> partials_buffer;
    std::vector<Eigen::ArrayXf>& partials = partials_buffer;
    partials.resize(blocks);
    // The per-step norms of dh, dc and dh_direct, from the values the gate pass has in
    // registers (gradients.graph_step_norm uses them rather than read the arrays again): the
    // squares summed in packets along a row, the rows' sums in double, per block [T, 3].
    lstmviz::StepSquares squares(blocks, T, 3);

    // dh_t = direct_t + dz_{t+1}·Uᵀ;  dc_t = direct_t + dc_{t+1}·f_{t+1} + dh_t·o_t(1-tanh²c_t).
    // Masked, with m = m_t and m' = m_{t+1}: the cell gets m·dh_t and m·dc_t, the carried
    // state passes the rest straight back to step t-1:
    //   dh_t = direct_t + dz_{t+1}·Uᵀ + (1-m')·dh_{t+1}
    //   dc_t = a_t + m·dh_t·o_t(1-tanh²ĉ_t)
    //   a_t  = direct_t + m'·dc_{t+1}·f_{t+1} + (1-m')·a_{t+1}
    // where a_t is dL/dc_t other than through h_t: what the carry passes on.
    const int64_t back = order_.Back(B);
    const auto run = [&](auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
      ForRowBlocks(ctx, B, [&](int64_t block, int64_t r0, int64_t r1, const auto& stop) {
        const int64_t n = r1 - r0, width = recurrent_t.padded_columns();
        const int64_t chunk_steps = (kChunkDepth + n - 1) / std::max<int64_t>(n, 1);
        static thread_local Eigen::ArrayXf dh_next, dc_next, chunk, scratch;
        dh_next.setZero(n * width);
        dc_next.setZero(n * H);
        chunk.setOnes(weight_grads ? chunk_steps * n * wide : 0);  // [x | h | 1]
        Eigen::ArrayXf& partial = partials[block];
        partial.setZero(weight_grads ? wide * gradient_width : 0);
        static thread_local Panels dz_chunk(0, 0);
        dz_chunk.Reset(4 * H, chunk_steps * n);
        scratch.resize(keep_dz ? 0 : n * 4 * H);  // this step's dz [n, 4H]
        int64_t chunked = 0;  // steps in the chunk so far
        for (int64_t step = T - 1; step >= 0 && !stop(); --step) {
          const int64_t t = order_.At(step, T);
          const int64_t row = t * B + r0;
          float* dz_step = keep_dz ? dzs + row * 4 * H : scratch.data();
          for (int64_t r = 0; r < n; ++r) {
            const int64_t at = (row + r) * H;
            const float* c_prev = step == 0 ? c_init + (r0 + r) * H : cs + at - back * H;
            // The gates and dz may share a buffer: each unit's four gates are read before
            // its four dz are written.
            const float *g_row = gates + (row + r) * 4 * H, *dh_in = dh_next.data() + r * width;
            float *dz = dz_step + r * 4 * H, *carry = dc_next.data() + r * H;
            const float m = kMasked ? mask[row + r] : 1.0f;
            Packet square[3] = {Packet{}, Packet{}, Packet{}};
            float square_tail[3] = {0.0f, 0.0f, 0.0f};
            ForUnits(H, [&](int64_t j, auto lanes) {
              using P = decltype(lanes);
              const P one = ei::pset1<P>(1.0f), i = Load<P>(g_row + j), f = Load<P>(g_row + H + j),
                      g = Load<P>(g_row + 2 * H + j), o = Load<P>(g_row + 3 * H + j),
                      cp = Load<P>(c_prev + j), tanh_c = Tanh(NewCell(i, f, g, cp));
              P dh = Load<P>(dh_in + j), a = Load<P>(carry + j);  // a_t: below
              if (dh_d != nullptr) {
                const P direct = Load<P>(dh_d + at + j);
                AddSquare(square[2], square_tail[2], direct);
                dh = dh + direct;
              }
              if (dc_d != nullptr) a = a + Load<P>(dc_d + at + j);
              const P through_h = dh * (o * (one - tanh_c * tanh_c));
              P dc, to_cell, dz_o, carried;
              if constexpr (kMasked) {  // the cell gets m·dh and m·dc
                const P share = ei::pset1<P>(m);
                dc = a + share * through_h;
                to_cell = share * dc;
                dz_o = share * dh * (tanh_c * (o * (one - o)));
                carried = ei::pset1<P>(1.0f - m) * a + to_cell * f;
              } else {
                dc = a + through_h;
                to_cell = dc;
                dz_o = dh * (tanh_c * (o * (one - o)));
                carried = to_cell * f;
              }
              Store(dhs + at + j, dh);
              Store(dcs + at + j, dc);
              AddSquare(square[0], square_tail[0], dh);
              AddSquare(square[1], square_tail[1], dc);
              Store(dz + j, to_cell * (g * (i * (one - i))));
              Store(dz + H + j, to_cell * (cp * (f * (one - f))));
              Store(dz + 2 * H + j, to_cell * (i * (one - g * g)));
              Store(dz + 3 * H + j, dz_o);
              Store(carry + j, carried);
            });
            squares.Add(block, t, square, square_tail);
            if (!weight_grads) continue;
            float* chunk_row = chunk.data() + (chunked * n + r) * wide;
            std::copy_n(xs + (row + r) * I, I, chunk_row);
            std::copy_n(step == 0 ? h_init + (r0 + r) * H : hs + at - back * H, H, chunk_row + I);
          }
          // What the next step's gate pass reads and writes.
          lstmviz::Prefetch next;
          if (step > 0) {
            const int64_t before = row - back;  // the step run before
            next.Add(gates + before * 4 * H, n * 4 * H, dzs == gates);
            if (keep_dz && dzs != gates) next.Add(dzs + before * 4 * H, n * 4 * H, true);
            next.Add(step == 1 ? c_init + r0 * H : cs + (before - back) * H, n * H);
            next.Add(step == 1 ? h_init + r0 * H : hs + (before - back) * H, n * H);
            next.Add(xs + before * I, n * I);
            if (dh_d != nullptr) next.Add(dh_d + before * H, n * H);
            if (dc_d != nullptr) next.Add(dc_d + before * H, n * H);
            next.Add(dhs + before * H, n * H, true);
            next.Add(dcs + before * H, n * H, true);
          }
          if (dxs != nullptr) next.Add(dxs + row * I, n * I, true);
          if (weight_grads) dz_chunk.Append(dz_step, n, 4 * H, 1);
          if (weight_grads && (++chunked == chunk_steps || step == 0)) {
            dz_chunk.Multiply<true>(wide, {{chunk.data(), 1, wide, chunked * n}},
                                    partial.data(), gradient_width, &next);
            dz_chunk.Clear();
            chunked = 0;
          }
          recurrent_t.Multiply(n, {{dz_step, 4 * H, 1, 4 * H}}, dh_next.data(), width,
                               &next);
          for (int64_t r = 0; dxs != nullptr && r < n; ++r) {
            std::copy_n(dh_next.data() + r * width + H, I, dxs + (row + r) * I);
          }
          if constexpr (kMasked) {  // the carried part, row r scaled by 1 - m_t[r]
            for (int64_t r = 0; r < n; ++r) {
              ArrayMap(dh_next.data() + r * width, H) +=
                  (1.0f - mask[row + r]) * ConstArrayMap(dhs + (row + r) * H, H);
            }
          }
        }
        for (int64_t r = 0; r < n; ++r) {
          std::copy_n(dh_next.data() + r * width, H, dh0 + (r0 + r) * H);
        }
        std::copy_n(dc_next.data(), n * H, dc0 + r0 * H);
      }, "LSTM", order_.share);
    };
    if (mask == nullptr) {
      run(Unmasked{});
    } else {
      run(Masked{});
    }
    if (!ctx->status().ok()) return;
    squares.Write(ctx, norms_out->flat<float>().data(), {dhs, dcs, dh_d}, B * H);
    // [d_kernel; d_recurrent; d_bias] = Σ over blocks of their partials [I+H+1, 4H].
    float* sums[] = {dk_out->flat<float>().data(), du_out->flat<float>().data(),
                     db_out->flat<float>().data()};
    const int64_t first_row[] = {0, I, I + H, wide};
    for (int part = 0; part < 3; ++part) {
      for (int64_t m = first_row[part]; m < first_row[part + 1]; ++m) {
        ArrayMap sum(sums[part] + (m - first_row[part]) * 4 * H, 4 * H);
        sum.setZero();
        for (const Eigen::ArrayXf& partial : partials) {
          if (!weight_grads) break;  // zeros: nothing reads them
          sum += ConstArrayMap(partial.data() + m * gradient_width, 4 * H);
        }
      }
    }
  }

 private:
  StepOrder order_;
};

REGISTER_KERNEL_BUILDER(Name("LstmvizSequenceForward").Device(tensorflow::DEVICE_CPU),
                        SequenceForward);
REGISTER_KERNEL_BUILDER(Name("LstmvizSequenceBackward").Device(tensorflow::DEVICE_CPU),
                        SequenceBackward);
