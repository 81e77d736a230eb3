// The gates panel's statistics of a recurrent direction, summed from its gate activations:
// the one definition gate_stats.cc (a pass over the activations a kernel wrote) and the LSTM
// forward kernel (lstm_kernels.cc, from the activations it holds in registers) share.
//
// Gates [.., G·H]: G blocks of H units (LSTM i, f, g, o). Gate k is saturated where
// |y - centres[k]| > bounds[k] (float32, as TensorFlow's ops compute it: tanh has centre 0 and
// bound 1 - margin, sigmoid centre 0.5 and bound 0.5 - margin); `diagnosis` the same by the
// diagnosis's margin. Only the (t, b) that count are added (a mask's 1s).
//
// Sums: [T, 3, G], per step and gate, Σ over (b, j) of y, of saturated and of saturated by the
// diagnosis's bound; unit sums [G·H], Σ over (t, b) of y. Blocks of rows (or of steps) sum
// apart: per step and unit over their rows in float, then over the units (and the steps) in
// double, and the blocks' sums are added in block order, so the result does not depend on
// which thread finished first.
#ifndef LSTMVIZ_ENGINE_GATE_SUMS_H_
#define LSTMVIZ_ENGINE_GATE_SUMS_H_

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernel_common.h"

namespace lstmviz {

// 1 where |y - centre| > bound, else 0 (lane-wise for a packet).
template <typename P>
EIGEN_ALWAYS_INLINE P Beyond(const P& y, float centre, float bound) {
  if constexpr (std::is_same_v<P, float>) {
    return std::fabs(y - centre) > bound ? 1.0f : 0.0f;
  } else {
    const P off = ei::pabs(y - ei::pset1<P>(centre));
    return ei::pand(ei::pcmp_lt(ei::pset1<P>(bound), off), ei::pset1<P>(1.0f));
  }
}

class GateSums {
 public:
  // `blocks` blocks of rows adding to T steps of G gates of H units each.
  GateSums(int64_t blocks, int64_t T, int64_t H, const std::vector<float>& centres,
           const std::vector<float>& bounds, const std::vector<float>& diagnosis)
      : steps_(T),
        units_(H),
        gates_(static_cast<int64_t>(centres.size())),
        centres_(centres),
        bounds_(bounds),
        diagnosis_(diagnosis),
        step_(blocks, std::vector<float>(3 * gates_ * H, 0.0f)),
        totals_(blocks, std::vector<double>(gates_ * H, 0.0)),
        sums_(blocks * T * 3 * gates_, 0.0) {}

  // One block's sums of its current step: Add the rows that count, then End the step.
  class Step {
   public:
    // Gate k's activations y at units j.. of one row.
    template <typename P>
    EIGEN_ALWAYS_INLINE void Add(int64_t k, int64_t j, const P& y) {
      const int64_t at = k * units_ + j;
      Store(mean_ + at, Load<P>(mean_ + at) + y);
      Store(saturated_ + at, Load<P>(saturated_ + at) + Beyond(y, centres_[k], bounds_[k]));
      Store(diagnosed_ + at, Load<P>(diagnosed_ + at) + Beyond(y, centres_[k], diagnosis_[k]));
    }

   private:
    friend class GateSums;
    Step(GateSums& sums, int64_t block)
        : units_(sums.units_),
          centres_(sums.centres_.data()),
          bounds_(sums.bounds_.data()),
          diagnosis_(sums.diagnosis_.data()),
          mean_(sums.step_[block].data()),
          saturated_(mean_ + sums.gates_ * units_),
          diagnosed_(saturated_ + sums.gates_ * units_) {}
    int64_t units_;
    const float *centres_, *bounds_, *diagnosis_;
    float *mean_, *saturated_, *diagnosed_;
  };

  Step At(int64_t block) { return Step(*this, block); }

  // Block `block`'s step t is complete: its per-unit sums go into the step's and the units'
  // totals, and start again from zero.
  void End(int64_t block, int64_t t) {
    std::vector<float>& step = step_[block];
    std::vector<double>& totals = totals_[block];
    const int64_t width = gates_ * units_;
    double* sums = sums_.data() + (block * steps_ + t) * 3 * gates_;
    for (int s = 0; s < 3; ++s) {
      const float* values = step.data() + s * width;
      for (int64_t k = 0; k < gates_; ++k) {
        double total = 0.0;
        for (int64_t j = k * units_; j < (k + 1) * units_; ++j) total += values[j];
        sums[s * gates_ + k] += total;
      }
    }
    for (int64_t j = 0; j < width; ++j) totals[j] += step[j];
    std::fill(step.begin(), step.end(), 0.0f);
  }

  // sums [T, 3, G] and unit_sums [G·H]: the blocks' added in block order.
  void Write(float* sums, float* unit_sums) const {
    const int64_t blocks = static_cast<int64_t>(totals_.size()), per_block = steps_ * 3 * gates_;
    for (int64_t at = 0; at < per_block; ++at) {
      double total = 0.0;
      for (int64_t block = 0; block < blocks; ++block) total += sums_[block * per_block + at];
      sums[at] = static_cast<float>(total);
    }
    for (int64_t j = 0; j < gates_ * units_; ++j) {
      double total = 0.0;
      for (const std::vector<double>& block : totals_) total += block[j];
      unit_sums[j] = static_cast<float>(total);
    }
  }

 private:
  int64_t steps_, units_, gates_;
  std::vector<float> centres_, bounds_, diagnosis_;
  std::vector<std::vector<float>> step_;     // per block: [3, G·H] of the current step
  std::vector<std::vector<double>> totals_;  // per block: [G·H], Σ over its steps
  std::vector<double> sums_;                 // [blocks, T, 3, G]
};

}  // namespace lstmviz

#endif  // LSTMVIZ_ENGINE_GATE_SUMS_H_
