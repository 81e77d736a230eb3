// Whole-sequence LSTM kernels for the CPU: the forward recurrence and its BPTT, each one op.
//
// Built by lstmviz/engine/native.py (g++ against the installed TensorFlow's headers); the
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
// synchronisation: a step is two small matrix products (Eigen, one thread) and one pass over
// the gates, where TensorFlow's while-loop pays a dispatch for each of some 40 ops.
// The weight gradients, sums over all steps, are left to TensorFlow's matmul (native.py).
// Both ops poll an interrupt flag once per step (lstmviz_interrupt below: Stop in the GUI).
#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::errors::InvalidArgument;
using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const Matrix>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
using Masked = std::true_type;
using Unmasked = std::false_type;

// Bumped by lstmviz_interrupt(); a running op that sees it change stops at its next step.
std::atomic<int64_t> interrupts{0};

using RowBlockFn = std::function<void(int64_t, int64_t, const std::function<bool()>&)>;

// Calls fn(first_row, end_row, stop) for contiguous blocks of [0, batch), one per intra-op
// thread; fn polls stop() once per step. The op fails with Cancelled when lstmviz_interrupt()
// was called meanwhile.
void ForRowBlocks(OpKernelContext* ctx, int64_t batch, const RowBlockFn& fn) {
  const int64_t epoch = interrupts.load();
  const std::function<bool()> stop = [epoch] { return interrupts.load() != epoch; };
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(workers->NumThreads(), batch));
  using Pool = tensorflow::thread::ThreadPool;
  workers->ParallelFor(
      blocks, Pool::SchedulingParams(Pool::SchedulingStrategy::kFixedBlockSize, std::nullopt, 1),
      [&](int64_t first, int64_t last) {
        for (int64_t k = first; k < last; ++k) {
          fn(batch * k / blocks, batch * (k + 1) / blocks, stop);
        }
      });
  OP_REQUIRES(ctx, !stop(), tensorflow::errors::Cancelled("LSTM run interrupted"));
}

// The optional input "mask" (a list of zero or one [T, B] tensors): *values points at its
// values, or is nullptr when it is absent.
absl::Status OptionalMask(OpKernelContext* ctx, int64_t T, int64_t B, const float** values) {
  tensorflow::OpInputList masks;
  TF_RETURN_IF_ERROR(ctx->input_list("mask", &masks));
  *values = nullptr;
  if (masks.size() > 1) return InvalidArgument("at most one mask, got ", masks.size());
  if (masks.size() == 0) return absl::OkStatus();
  if (masks[0].shape() != TensorShape({T, B})) {
    return InvalidArgument("mask must be [T, B] = [", T, ", ", B, "], got ",
                           masks[0].shape().DebugString());
  }
  *values = masks[0].flat<float>().data();
  return absl::OkStatus();
}

// Shape function check: the list "mask" holds zero or one tensor.
absl::Status AtMostOneMask(InferenceContext* ctx) {
  std::vector<tensorflow::shape_inference::ShapeHandle> masks;
  TF_RETURN_IF_ERROR(ctx->input("mask", &masks));
  if (masks.size() > 1) return InvalidArgument("at most one mask, got ", masks.size());
  return absl::OkStatus();
}

}  // namespace

// Stops every native LSTM op running in this process at its next step (they fail with
// Cancelled); ops started afterwards run normally. Safe from any thread; called through
// ctypes (lstmviz/engine/interrupt.py), so the GUI thread never runs TensorFlow for it.
extern "C" void lstmviz_interrupt() { interrupts.fetch_add(1); }

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
    .Output("h: float")         // [T, B, H]
    .Output("c: float")         // [T, B, H]
    .Output("factors: float")   // [T, B, 6H], what a backward step needs (see below)
    .SetShapeFn([](InferenceContext* ctx) {
      DimensionHandle steps = ctx->Dim(ctx->input(0), 0), batch = ctx->Dim(ctx->input(4), 0),
                      hidden = ctx->Dim(ctx->input(4), 1), six;
      TF_RETURN_IF_ERROR(ctx->Multiply(hidden, 6, &six));
      ctx->set_output(0, ctx->MakeShape({steps, batch, hidden}));
      ctx->set_output(1, ctx->MakeShape({steps, batch, hidden}));
      ctx->set_output(2, ctx->MakeShape({steps, batch, six}));
      return AtMostOneMask(ctx);
    });

REGISTER_OP("LstmvizSequenceBackward")
    .Input("recurrent: float")  // [H, 4H]
    .Input("factors: float")    // [T, B, 6H] from the forward
    .Input("dh_direct: float")  // [T, B, H], the loss's partial derivative at each h_t
    .Input("dc_direct: float")  // [T, B, H], the same at each c_t
    .Input("mask: masks * float")  // the forward's mask (none, or [T, B])
    .Attr("masks: int >= 0")
    .Output("dz: float")        // [T, B, 4H], dL/d(gate pre-activations)
    .Output("dh: float")        // [T, B, H], total dL/dh_t through the recurrence
    .Output("dc: float")        // [T, B, H], total dL/dc_t
    .Output("dh0: float")       // [B, H]
    .Output("dc0: float")       // [B, H]
    .SetShapeFn([](InferenceContext* ctx) {
      DimensionHandle steps = ctx->Dim(ctx->input(2), 0), batch = ctx->Dim(ctx->input(2), 1),
                      hidden = ctx->Dim(ctx->input(2), 2), four;
      TF_RETURN_IF_ERROR(ctx->Multiply(hidden, 4, &four));
      ctx->set_output(0, ctx->MakeShape({steps, batch, four}));
      ctx->set_output(1, ctx->input(2));
      ctx->set_output(2, ctx->input(2));
      ctx->set_output(3, ctx->MakeShape({batch, hidden}));
      ctx->set_output(4, ctx->MakeShape({batch, hidden}));
      return AtMostOneMask(ctx);
    });

class SequenceForward : public OpKernel {
 public:
  explicit SequenceForward(OpKernelConstruction* ctx) : OpKernel(ctx) {}

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
    Tensor *h_out, *c_out, *factors_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, states, &h_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, states, &c_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({T, B, 6 * H}), &factors_out));
    const float *xs = x.flat<float>().data(), *h_init = h0.flat<float>().data(),
                *c_init = c0.flat<float>().data(), *ph = probe_h.flat<float>().data(),
                *pc = probe_c.flat<float>().data();
    float *hs = h_out->flat<float>().data(), *cs = c_out->flat<float>().data(),
          *factors = factors_out->flat<float>().data();
    const ConstMatrixMap W(kernel.flat<float>().data(), I, 4 * H);
    const ConstMatrixMap U(recurrent.flat<float>().data(), H, 4 * H);
    const Eigen::Map<const Eigen::RowVectorXf> b(bias.flat<float>().data(), 4 * H);
    const float* mask;
    OP_REQUIRES_OK(ctx, OptionalMask(ctx, T, B, &mask));

    // kMasked (Masked or Unmasked) picks the instantiation; the unmasked one is the mask-free
    // code, with no per-row test.
    const auto run = [&](auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
      ForRowBlocks(ctx, B, [&](int64_t r0, int64_t r1, const auto& stop) {
        const int64_t n = r1 - r0;
        Matrix z(n, 4 * H);
        Eigen::ArrayXf c_new(H), tanh_c(H);
        for (int64_t t = 0; t < T && !stop(); ++t) {
          const int64_t row = t * B + r0;  // this block's first row at step t in [T·B, ·]
          const float* h_prev = t == 0 ? h_init + r0 * H : hs + (row - B) * H;
          const float* c_prev_block = t == 0 ? c_init + r0 * H : cs + (row - B) * H;
          z.noalias() = ConstMatrixMap(xs + row * I, n, I) * W;
          z.noalias() += ConstMatrixMap(h_prev, n, H) * U;
          z.rowwise() += b;
          for (int64_t r = 0; r < n; ++r) {
            ArrayMap zr(z.row(r).data(), 4 * H);
            zr.head(2 * H) = zr.head(2 * H).logistic();
            zr.segment(2 * H, H) = zr.segment(2 * H, H).tanh();
            zr.tail(H) = zr.tail(H).logistic();
            const auto i = zr.head(H), f = zr.segment(H, H), g = zr.segment(2 * H, H),
                       o = zr.tail(H);
            const ConstArrayMap c_prev(c_prev_block + r * H, H);
            c_new = f * c_prev + i * g;
            tanh_c = c_new.tanh();
            const int64_t at = (row + r) * H;
            if constexpr (kMasked) {
              // m·new + (1-m)·previous: exactly the one or the other for m = 1 or 0.
              const float m = mask[row + r], keep = 1.0f - m;
              ArrayMap(cs + at, H) = m * c_new + keep * c_prev + ConstArrayMap(pc + at, H);
              ArrayMap(hs + at, H) = m * (o * tanh_c) + keep * ConstArrayMap(h_prev + r * H, H) +
                                     ConstArrayMap(ph + at, H);
            } else {
              ArrayMap(cs + at, H) = c_new + ConstArrayMap(pc + at, H);
              ArrayMap(hs + at, H) = o * tanh_c + ConstArrayMap(ph + at, H);
            }
            // dz/dc for i, f, g; dz/dh for o; then f (dc_{t-1} = dc_t·f) and dc/dh.
            float* fr = factors + (row + r) * 6 * H;
            ArrayMap(fr, H) = g * i * (1.0f - i);
            ArrayMap(fr + H, H) = c_prev * f * (1.0f - f);
            ArrayMap(fr + 2 * H, H) = i * (1.0f - g * g);
            ArrayMap(fr + 3 * H, H) = tanh_c * o * (1.0f - o);
            ArrayMap(fr + 4 * H, H) = f;
            ArrayMap(fr + 5 * H, H) = o * (1.0f - tanh_c * tanh_c);
            if constexpr (kMasked) {  // times m: the cell's share of the gradient (none if 0)
              ArrayMap(fr, 6 * H) *= mask[row + r];
            }
          }
        }
      });
    };
    if (mask == nullptr) {
      run(Unmasked{});
    } else {
      run(Masked{});
    }
  }
};

class SequenceBackward : public OpKernel {
 public:
  explicit SequenceBackward(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor &recurrent = ctx->input(0), &factors = ctx->input(1),
                 &dh_direct = ctx->input(2), &dc_direct = ctx->input(3);
    OP_REQUIRES(ctx, dh_direct.dims() == 3, InvalidArgument("dh_direct must be [T, B, H]"));
    const int64_t T = dh_direct.dim_size(0), B = dh_direct.dim_size(1),
                  H = dh_direct.dim_size(2);
    OP_REQUIRES(ctx,
                recurrent.shape() == TensorShape({H, 4 * H}) &&
                    factors.shape() == TensorShape({T, B, 6 * H}) &&
                    dc_direct.shape() == dh_direct.shape(),
                InvalidArgument("LSTM gradient shapes disagree: dh ",
                                dh_direct.shape().DebugString(), ", factors ",
                                factors.shape().DebugString()));
    Tensor *dz_out, *dh_out, *dc_out, *dh0_out, *dc0_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({T, B, 4 * H}), &dz_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, dh_direct.shape(), &dh_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, dh_direct.shape(), &dc_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({B, H}), &dh0_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, TensorShape({B, H}), &dc0_out));
    const float *fs = factors.flat<float>().data(), *dh_d = dh_direct.flat<float>().data(),
                *dc_d = dc_direct.flat<float>().data();
    float *dzs = dz_out->flat<float>().data(), *dhs = dh_out->flat<float>().data(),
          *dcs = dc_out->flat<float>().data(), *dh0 = dh0_out->flat<float>().data(),
          *dc0 = dc0_out->flat<float>().data();
    const ConstMatrixMap U(recurrent.flat<float>().data(), H, 4 * H);
    const float* mask;
    OP_REQUIRES_OK(ctx, OptionalMask(ctx, T, B, &mask));

    // dh_t = direct_t + dz_{t+1}·Uᵀ;  dc_t = direct_t + dc_{t+1}·f_{t+1} + dh_t·o_t(1-tanh²c_t).
    // Masked, with m = m_t and m' = m_{t+1}: the cell gets m·dh_t and m·dc_t (the factors hold
    // m), the carried state passes the rest straight back to step t-1:
    //   dh_t = direct_t + dz_{t+1}·Uᵀ + (1-m')·dh_{t+1}
    //   dc_t = a_t + m·dh_t·o_t(1-tanh²ĉ_t)
    //   a_t  = direct_t + m'·dc_{t+1}·f_{t+1} + (1-m')·a_{t+1}
    // where a_t is dL/dc_t other than through h_t: what the carry passes on.
    const auto run = [&](auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
      ForRowBlocks(ctx, B, [&](int64_t r0, int64_t r1, const auto& stop) {
        const int64_t n = r1 - r0;
        Matrix dh_next = Matrix::Zero(n, H), dc_next = Matrix::Zero(n, H);
        for (int64_t t = T - 1; t >= 0 && !stop(); --t) {
          const int64_t row = t * B + r0;
          for (int64_t r = 0; r < n; ++r) {
            const int64_t at = (row + r) * H;
            const float* fr = fs + (row + r) * 6 * H;
            ArrayMap dh(dhs + at, H), dc(dcs + at, H), dc_carry(dc_next.row(r).data(), H);
            dh = ConstArrayMap(dh_d + at, H) + dh_next.row(r).transpose().array();
            if constexpr (kMasked) {
              dc = ConstArrayMap(dc_d + at, H) + dc_carry;  // a_t
              dc_carry = (1.0f - mask[row + r]) * dc;
              dc += dh * ConstArrayMap(fr + 5 * H, H);
            } else {
              dc = ConstArrayMap(dc_d + at, H) + dc_carry + dh * ConstArrayMap(fr + 5 * H, H);
            }
            float* dz = dzs + (row + r) * 4 * H;
            ArrayMap(dz, H) = dc * ConstArrayMap(fr, H);
            ArrayMap(dz + H, H) = dc * ConstArrayMap(fr + H, H);
            ArrayMap(dz + 2 * H, H) = dc * ConstArrayMap(fr + 2 * H, H);
            ArrayMap(dz + 3 * H, H) = dh * ConstArrayMap(fr + 3 * H, H);
            if constexpr (kMasked) {
              dc_carry += dc * ConstArrayMap(fr + 4 * H, H);
            } else {
              dc_carry = dc * ConstArrayMap(fr + 4 * H, H);
            }
          }
          dh_next.noalias() = ConstMatrixMap(dzs + row * 4 * H, n, 4 * H) * U.transpose();
          if constexpr (kMasked) {  // the carried part, row r scaled by 1 - m_t[r]
            const Eigen::Map<const Eigen::ArrayXf> m(mask + row, n);
            const ConstMatrixMap dh(dhs + row * H, n, H);
            dh_next.array() += dh.array().colwise() * (1.0f - m);
          }
        }
        Eigen::Map<Matrix>(dh0 + r0 * H, n, H) = dh_next;
        Eigen::Map<Matrix>(dc0 + r0 * H, n, H) = dc_next;
      });
    };
    if (mask == nullptr) {
      run(Unmasked{});
    } else {
      run(Masked{});
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("LstmvizSequenceForward").Device(tensorflow::DEVICE_CPU),
                        SequenceForward);
REGISTER_KERNEL_BUILDER(Name("LstmvizSequenceBackward").Device(tensorflow::DEVICE_CPU),
                        SequenceBackward);
