// What every native sequence kernel shares (lstm_kernels.cc, gru_kernels.cc, rnn_kernels.cc;
// gate_stats.cc its row blocks): the interrupt counter, the split of a batch into one block of rows per intra-op thread, the optional
// inputs (a mask, a given gradient) and the elementwise helpers of a row's units in registers.
#ifndef LSTMVIZ_ENGINE_KERNEL_COMMON_H_
#define LSTMVIZ_ENGINE_KERNEL_COMMON_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "panel_gemm.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace lstmviz {

// Bumped by lstmviz_interrupt() (lstm_kernels.cc); a running op that sees it change stops at
// its next step. One counter for the whole library (an inline variable).
inline std::atomic<int64_t> interrupts{0};

using RowBlockFn = std::function<void(int64_t, int64_t, int64_t, const std::function<bool()>&)>;

// The attributes every sequence op takes: `reverse`, the sequence read from its end (Keras's
// go_backwards) with every [T, ·] array, inputs and outputs, indexed by input position all the
// same; `share`, how many such ops run at once (a Bidirectional's two directions), each on its
// share of the intra-op threads (RowBlocks).
struct StepOrder {
  bool reverse = false;
  int64_t share = 1;

  absl::Status Read(tensorflow::OpKernelConstruction* ctx) {
    TF_RETURN_IF_ERROR(ctx->GetAttr("reverse", &reverse));
    return ctx->GetAttr("share", &share);
  }
  // The input position of the s-th step run, of T.
  int64_t At(int64_t s, int64_t T) const { return reverse ? T - 1 - s : s; }
  // A step's first row (t·B + r) less that of the step run before it.
  int64_t Back(int64_t B) const { return reverse ? -B : B; }
};

// How many blocks ForRowBlocks cuts a batch into: one per intra-op thread, at most one per row.
// `share` ops running at once (a Bidirectional's two directions) each take 1/share of the
// threads: fewer, taller blocks than the threads could run alone, and no more blocks in all
// than threads.
inline int64_t RowBlocks(tensorflow::OpKernelContext* ctx, int64_t batch, int64_t share = 1) {
  const int64_t threads = ctx->device()->tensorflow_cpu_worker_threads()->workers->NumThreads();
  return std::max<int64_t>(1, std::min<int64_t>(threads / std::max<int64_t>(share, 1), batch));
}

// Calls fn(block, first_row, end_row, stop) for the RowBlocks contiguous blocks of [0, batch),
// in parallel; fn polls stop() once per step. The op fails with Cancelled ("<cell> run
// interrupted") when lstmviz_interrupt() was called meanwhile.
inline void ForRowBlocks(tensorflow::OpKernelContext* ctx, int64_t batch, const RowBlockFn& fn,
                         const char* cell = "LSTM", int64_t share = 1) {
  const int64_t epoch = interrupts.load();
  const std::function<bool()> stop = [epoch] { return interrupts.load() != epoch; };
  const int64_t blocks = RowBlocks(ctx, batch, share);
  using Pool = tensorflow::thread::ThreadPool;
  ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
      blocks, Pool::SchedulingParams(Pool::SchedulingStrategy::kFixedBlockSize, std::nullopt, 1),
      [&](int64_t first, int64_t last) {
        for (int64_t k = first; k < last; ++k) {
          fn(k, batch * k / blocks, batch * (k + 1) / blocks, stop);
        }
      });
  OP_REQUIRES(ctx, !stop(), tensorflow::errors::Cancelled(cell, " run interrupted"));
}

// An optional input (a list of zero or one tensors of `shape`): its values, or nullptr when
// it is absent.
inline absl::Status Optional(tensorflow::OpKernelContext* ctx, const char* name,
                             const tensorflow::TensorShape& shape, const float** values) {
  using tensorflow::errors::InvalidArgument;
  tensorflow::OpInputList given;
  TF_RETURN_IF_ERROR(ctx->input_list(name, &given));
  *values = nullptr;
  if (given.size() > 1) return InvalidArgument("at most one ", name, ", got ", given.size());
  if (given.size() == 0) return absl::OkStatus();
  if (given[0].shape() != shape) {
    return InvalidArgument(name, " must be ", shape.DebugString(), ", got ",
                           given[0].shape().DebugString());
  }
  *values = given[0].flat<float>().data();
  return absl::OkStatus();
}

// The optional mask [T, B], named as the Python side states it.
inline absl::Status OptionalMask(tensorflow::OpKernelContext* ctx, int64_t T, int64_t B,
                                 const float** values) {
  tensorflow::OpInputList masks;
  TF_RETURN_IF_ERROR(ctx->input_list("mask", &masks));
  if (masks.size() == 1 && masks[0].shape() != tensorflow::TensorShape({T, B})) {
    return tensorflow::errors::InvalidArgument("mask must be [T, B] = [", T, ", ", B, "], got ",
                                               masks[0].shape().DebugString());
  }
  return Optional(ctx, "mask", tensorflow::TensorShape({T, B}), values);
}

// Shape function check: each named list holds zero or one tensor.
inline absl::Status AtMostOne(tensorflow::shape_inference::InferenceContext* ctx,
                              std::initializer_list<const char*> names) {
  for (const char* name : names) {
    std::vector<tensorflow::shape_inference::ShapeHandle> given;
    TF_RETURN_IF_ERROR(ctx->input(name, &given));
    if (given.size() > 1) {
      return tensorflow::errors::InvalidArgument("at most one ", name, ", got ", given.size());
    }
  }
  return absl::OkStatus();
}

// ---- A row of a step, in registers ------------------------------------------------------------
//
// The elementwise part of a step runs over a row's units in packets of kLanes (P = Packet) and
// the last H mod kLanes units one at a time (P = float): one pass over the row's memory, every
// intermediate in registers. Packets are GCC vector types, so + - * apply to both kinds; the
// build's -ffp-contract=off keeps each product and sum rounded as written.

template <typename P>
EIGEN_ALWAYS_INLINE P Load(const float* from) {
  return ei::ploadu<P>(from);
}

template <typename P>
EIGEN_ALWAYS_INLINE void Store(float* to, const P& value) {
  ei::pstoreu(to, value);
}

template <typename P>
EIGEN_ALWAYS_INLINE P Sigmoid(const P& x) {  // Eigen's logistic(), as ArrayXf::logistic()
  if constexpr (std::is_same_v<P, float>) {
    return ei::scalar_logistic_op<float>()(x);
  } else {
    return ei::scalar_logistic_op<float>().packetOp(x);
  }
}

template <typename P>
EIGEN_ALWAYS_INLINE P Tanh(const P& x) {  // Eigen's tanh(), as ArrayXf::tanh()
  if constexpr (std::is_same_v<P, float>) {
    return ei::scalar_tanh_op<float>()(x);
  } else {
    return ei::ptanh(x);
  }
}

// fn(j, P{}) for the units j of a row: packets of kLanes, then single floats.
template <typename Fn>
EIGEN_ALWAYS_INLINE void ForUnits(int64_t H, Fn&& fn) {
  int64_t j = 0;
  for (; j + kLanes <= H; j += kLanes) fn(j, Packet{});
  for (; j < H; ++j) fn(j, 0.0f);
}

// sum += v² (lane-wise for a packet).
template <typename P>
EIGEN_ALWAYS_INLINE void AddSquare(Packet& packets, float& floats, const P& v) {
  if constexpr (std::is_same_v<P, float>) {
    floats += v * v;
  } else {
    packets = packets + v * v;
  }
}

// A step's sum of squares below this (a norm below 1e-10, arrays.TINY_NORM) or not finite is
// summed again in double (ExactSquares): float squares of entries under 1.1e-19 fall below
// float's smallest normal number and lose digits or flush to zero, and those of entries over
// 1.8e19 overflow. Above it, what the float squares can lose (< n · 1.2e-38 for n <= 2^30
// entries) is below 1e-9 of the sum. So a norm is zero only where the gradient is, and not
// finite only where it holds NaN or Inf (or the norm itself exceeds float's range).
constexpr double kExactBelow = 1e-20;

inline bool Inexact(double sum) { return !(sum >= kExactBelow) || std::isinf(sum); }

// Σ v[k]² over k < n, each square in double: in kSums interleaved partial sums, which the
// compiler turns into vectors of doubles (one running sum would wait on each add in turn).
inline double ExactSquares(const float* v, int64_t n) {
  constexpr int kSums = 8;
  double sums[kSums] = {};
  int64_t k = 0;
  for (; k + kSums <= n; k += kSums) {
    for (int i = 0; i < kSums; ++i) {
      const double x = v[k + i];
      sums[i] += x * x;
    }
  }
  double total = 0.0;
  for (; k < n; ++k) total += static_cast<double>(v[k]) * static_cast<double>(v[k]);
  for (const double sum : sums) total += sum;
  return total;
}

// The per-step norms of the gradients a backward op writes ([T, columns]): each block adds,
// per step, the squares it summed in packets along its rows (and the tail's floats); the
// blocks' sums are added in double, in block order, so the result does not depend on which
// thread finished first.
class StepSquares {
 public:
  StepSquares(int64_t blocks, int64_t steps, int columns)
      : steps_(steps), columns_(columns), sums_(blocks * steps * columns, 0.0) {}

  void Add(int64_t block, int64_t t, const Packet* packets, const float* floats) {
    for (int k = 0; k < columns_; ++k) {
      sums_[(block * steps_ + t) * columns_ + k] +=
          static_cast<double>(ei::predux(packets[k])) + static_cast<double>(floats[k]);
    }
  }

  // norms [T, columns] = sqrt of the sums over the blocks. arrays[k] [T, per_step] holds
  // what column k summed (nullptr: an absent input, all zero); a step whose sum is Inexact is
  // summed again from it, the steps spread over the intra-op threads.
  void Write(tensorflow::OpKernelContext* ctx, float* norms,
             std::initializer_list<const float*> arrays, int64_t per_step) const {
    const int64_t per_block = steps_ * columns_;
    const int64_t blocks = static_cast<int64_t>(sums_.size()) / std::max<int64_t>(per_block, 1);
    const std::vector<const float*> from(arrays);
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        steps_, columns_ * (blocks + per_step / 16), [&](int64_t first, int64_t last) {
          for (int64_t k = first * columns_; k < last * columns_; ++k) {
            double sum = 0.0;
            for (int64_t block = 0; block < blocks; ++block) sum += sums_[block * per_block + k];
            const float* values = from[k % columns_];
            if (Inexact(sum) && values != nullptr) {
              sum = ExactSquares(values + (k / columns_) * per_step, per_step);
            }
            norms[k] = static_cast<float>(std::sqrt(sum));
          }
        });
  }

 private:
  int64_t steps_;
  int columns_;
  std::vector<double> sums_;
};

}  // namespace lstmviz

// The names the kernel files use unqualified: each says `using namespace lstmviz::names;` in
// its anonymous namespace (cell_activations.h adds the activations' to it).
namespace lstmviz::names {
using lstmviz::AddSquare;
using lstmviz::AtMostOne;
using lstmviz::ForRowBlocks;
using lstmviz::ForUnits;
using lstmviz::kInstructions;
using lstmviz::kLanes;
using lstmviz::kPanel;
using lstmviz::kTileRows;
using lstmviz::Load;
using lstmviz::Optional;
using lstmviz::OptionalMask;
using lstmviz::Packet;
using lstmviz::Panels;
using lstmviz::RowBlocks;
using lstmviz::Sigmoid;
using lstmviz::StepOrder;
using lstmviz::Store;
using lstmviz::Tanh;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::errors::InvalidArgument;
using tensorflow::shape_inference::DimensionHandle;
using tensorflow::shape_inference::InferenceContext;

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
}  // namespace lstmviz::names

#endif  // LSTMVIZ_ENGINE_KERNEL_COMMON_H_
