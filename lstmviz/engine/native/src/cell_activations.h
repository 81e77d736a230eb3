// The activations and per-row pieces the GRU and SimpleRNN kernels share (gru_kernels.cc,
// rnn_kernels.cc): each activation by Keras name, computed in registers, with its derivative
// from its output y; the mask's share of a row; the start of a backward step's row.
#ifndef LSTMVIZ_ENGINE_CELL_ACTIVATIONS_H_
#define LSTMVIZ_ENGINE_CELL_ACTIVATIONS_H_

#include <algorithm>
#include <string>
#include <type_traits>

#include "kernel_common.h"

namespace lstmviz {

// The activations, by Keras name: "hard_sigmoid" is Keras 3's relu6(x + 3) / 6,
// "hard_sigmoid_keras2" Keras 2's clip(0.2·x + 0.5, 0, 1).
enum class Kind { kSigmoid, kTanh, kHardSigmoid, kHardSigmoidKeras2, kRelu };

inline absl::Status KindOf(const std::string& name, Kind* kind) {
  if (name == "sigmoid") {
    *kind = Kind::kSigmoid;
  } else if (name == "tanh") {
    *kind = Kind::kTanh;
  } else if (name == "hard_sigmoid") {
    *kind = Kind::kHardSigmoid;
  } else if (name == "hard_sigmoid_keras2") {
    *kind = Kind::kHardSigmoidKeras2;
  } else if (name == "relu") {
    *kind = Kind::kRelu;
  } else {
    return tensorflow::errors::InvalidArgument("the GRU kernels do not compute activation '", name, "'");
  }
  return absl::OkStatus();
}

template <typename P>
EIGEN_ALWAYS_INLINE P Clip(const P& x, float low, float high) {
  if constexpr (std::is_same_v<P, float>) {
    return std::min(std::max(x, low), high);
  } else {
    return ei::pmin(ei::pmax(x, ei::pset1<P>(low)), ei::pset1<P>(high));
  }
}

// `value` where 0 < y < 1, else 0.
template <typename P>
EIGEN_ALWAYS_INLINE P InsideUnit(const P& y, float value) {
  if constexpr (std::is_same_v<P, float>) {
    return y > 0.0f && y < 1.0f ? value : 0.0f;
  } else {
    const P inside = ei::pand(ei::pcmp_lt(ei::pzero(y), y), ei::pcmp_lt(y, ei::pset1<P>(1.0f)));
    return ei::pand(inside, ei::pset1<P>(value));
  }
}

template <Kind K, typename P>
EIGEN_ALWAYS_INLINE P Apply(const P& x) {
  if constexpr (K == Kind::kSigmoid) {
    return lstmviz::Sigmoid(x);
  } else if constexpr (K == Kind::kTanh) {
    return lstmviz::Tanh(x);
  } else if constexpr (K == Kind::kHardSigmoid) {  // as Keras: relu6(x + 3) / 6
    return Clip(x + ei::pset1<P>(3.0f), 0.0f, 6.0f) / ei::pset1<P>(6.0f);
  } else if constexpr (K == Kind::kHardSigmoidKeras2) {
    return Clip(ei::pset1<P>(0.2f) * x + ei::pset1<P>(0.5f), 0.0f, 1.0f);
  } else {
    if constexpr (std::is_same_v<P, float>) {
      return std::max(x, 0.0f);
    } else {
      return ei::pmax(x, ei::pzero(x));
    }
  }
}

// dy/dx where y = Apply<K>(x).
template <Kind K, typename P>
EIGEN_ALWAYS_INLINE P Slope(const P& y) {
  const P one = ei::pset1<P>(1.0f);
  if constexpr (K == Kind::kSigmoid) {
    return y * (one - y);
  } else if constexpr (K == Kind::kTanh) {
    return one - y * y;
  } else if constexpr (K == Kind::kHardSigmoid) {
    return InsideUnit(y, 1.0f / 6.0f);
  } else if constexpr (K == Kind::kHardSigmoidKeras2) {
    return InsideUnit(y, 0.2f);
  } else {  // relu: 1 where y > 0
    if constexpr (std::is_same_v<P, float>) {
      return y > 0.0f ? 1.0f : 0.0f;
    } else {
      return ei::pand(ei::pcmp_lt(ei::pzero(y), y), one);
    }
  }
}


// The start of a backward step's row at `at` ([T·B·H] offset): dh_t = the recurrent part
// (dh_in) + the direct gradient (when given), written to dhs and its squares (and the
// direct's) summed into square[0] (square[1]); returns dh_t.
template <typename P>
EIGEN_ALWAYS_INLINE P TotalGradient(const float* direct, float* dhs, int64_t at,
                                    const float* dh_in, int64_t j, Packet (&square)[2],
                                    float (&tail)[2]) {
  P dh = Load<P>(dh_in + j);
  if (direct != nullptr) {
    const P given = Load<P>(direct + at + j);
    AddSquare(square[1], tail[1], given);
    dh = dh + given;
  }
  Store(dhs + at + j, dh);
  AddSquare(square[0], tail[0], dh);
  return dh;
}

// The mask's pair (share, keep) = (m, 1 − m) of a row, (1, 0) without a mask.
struct Share {
  float share, keep;
  Share(const float* mask, int64_t row)
      : share(mask == nullptr ? 1.0f : mask[row]), keep(1.0f - share) {}
};


}  // namespace lstmviz

namespace lstmviz::names {  // kernel_common.h
using lstmviz::Apply;
using lstmviz::Kind;
using lstmviz::KindOf;
using lstmviz::Share;
using lstmviz::Slope;
using lstmviz::TotalGradient;
}  // namespace lstmviz::names

#endif  // LSTMVIZ_ENGINE_CELL_ACTIVATIONS_H_
