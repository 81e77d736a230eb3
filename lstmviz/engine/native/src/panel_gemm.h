// The matrix products of the sequence kernels (lstm_kernels.cc, gru_kernels.cc, rnn_kernels.cc): a register-tiled FMA kernel on
// packed panels, in Eigen's packets (AVX-512, AVX2+FMA, NEON, ... as the build's -march gives).
#ifndef LSTMVIZ_ENGINE_PANEL_GEMM_H_
#define LSTMVIZ_ENGINE_PANEL_GEMM_H_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "Eigen/Core"

namespace lstmviz {

// out[n, N] = init + Σ_s A_s·B_s, for row blocks A_s [n, K_s] read in place (any strides) and
// B_s [K_s, N] packed into panels of kPanel columns (two of Eigen's packets, zero-padded past N),
// each panel holding the rows of every B_s in turn, contiguous. The weights are packed once per
// op call; Eigen's GEMM (Matrix products) packs both operands at every call, which at one call
// per step meant the whole [H, 4H] weight matrix at every step. A tile of R <= kTileRows rows ×
// one panel accumulates in registers across all K_s: per k, two packet loads of the panel and
// one broadcast of A per row feed 2·R FMAs, and the panel stays in cache while every row tile
// passes over it. The tile fits the register file: AVX2 has 16 registers (6 × 2 accumulators
// and the panel's two packets), AVX-512 32 (8 × 2).
namespace ei = Eigen::internal;
using Packet = ei::packet_traits<float>::type;
constexpr int kLanes = ei::unpacket_traits<Packet>::size;
constexpr int kPanel = 2 * kLanes;
constexpr int kTileRows = kLanes >= 16 ? 8 : 6;

// A_s [n, depth]: element (r, k) at a[r·row_stride + k·k_stride].
struct Operand {
  const float* a;
  int64_t row_stride, k_stride, depth;
};

template <int R>
EIGEN_ALWAYS_INLINE void Accumulate(Packet (&acc)[R][2], const Operand& op, int64_t row,
                                    const float*& panel) {
  const float* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = op.a + (row + r) * op.row_stride;
  for (int64_t k = 0, at = 0; k < op.depth; ++k, at += op.k_stride, panel += kPanel) {
    const Packet b0 = ei::pload<Packet>(panel), b1 = ei::pload<Packet>(panel + kLanes);
    for (int r = 0; r < R; ++r) {
      const Packet ar = ei::pset1<Packet>(rows[r][at]);
      acc[r][0] = ei::pmadd(ar, b0, acc[r][0]);
      acc[r][1] = ei::pmadd(ar, b1, acc[r][1]);
    }
  }
}

// Rows row..row+R-1 (R <= kTileRows) of one panel of out: init, or with kAccumulate what out
// holds, plus Σ_s A_s·B_s.
template <int R, bool kAccumulate>
void Tile(const Operand* ops, int count, int64_t row, const float* panel, const float* init,
          float* out, int64_t ldo) {
  if constexpr (R > 0) {
    Packet acc[R][2];
    for (int r = 0; r < R; ++r) {
      const float* from = kAccumulate ? out + r * ldo : init;
      acc[r][0] = ei::ploadu<Packet>(from), acc[r][1] = ei::ploadu<Packet>(from + kLanes);
    }
    for (int s = 0; s < count; ++s) Accumulate<R>(acc, ops[s], row, panel);
    for (int r = 0; r < R; ++r) {
      ei::pstoreu(out + r * ldo, acc[r][0]);
      ei::pstoreu(out + r * ldo + kLanes, acc[r][1]);
    }
  }
}

// Tile<rows> for a number of rows known only at run time (1..kTileRows).
template <bool kAccumulate, int R = kTileRows>
void TileOf(int64_t rows, const Operand* ops, int count, int64_t row, const float* panel,
            const float* init, float* out, int64_t ldo) {
  if constexpr (R > 0) {
    if (rows == R) return Tile<R, kAccumulate>(ops, count, row, panel, init, out, ldo);
    TileOf<kAccumulate, R - 1>(rows, ops, count, row, panel, init, out, ldo);
  }
}

// Memory the code after a product will read or write, fetched into L2 while the product runs:
// the product's FMAs hide the latency the next elementwise pass, which reads and writes
// fresh rows of [T, B, ·] arrays, would otherwise wait for. Multiply issues a few lines of it
// after each register tile, spread over the whole product.
class Prefetch {
 public:
  // `width` contiguous floats from `at` (nothing when null).
  void Add(const float* at, int64_t width, bool write = false) {
    if (at == nullptr || count_ == kRanges) return;
    ranges_[count_++] = {at, width, write};
    lines_ += Lines(at, width);
  }

  // Spreads the lines over `calls` calls of Issue, at most kBurst a call: more at once would
  // fill the line-fill buffers the product's own loads need (with AVX-512's larger register
  // tiles a product has fewer tiles); lines beyond that are left to the pass itself.
  void Spread(int64_t calls) {
    per_call_ = std::min(kBurst, (lines_ + calls - 1) / std::max<int64_t>(calls, 1));
  }

  void Issue() {
    for (int64_t left = per_call_; left > 0 && range_ < count_;) {
      const Range& range = ranges_[range_];
      const char* line = Line(range.at) + line_ * kLine;
      if (range.write) {
        __builtin_prefetch(line, 1, 2);
      } else {
        __builtin_prefetch(line, 0, 2);
      }
      --left;
      if (++line_ == Lines(range.at, range.width)) line_ = 0, ++range_;
    }
  }

 private:
  static constexpr int kRanges = 10;
  static constexpr int64_t kBurst = 12;
  static constexpr int64_t kLine = 64;
  struct Range {
    const float* at;
    int64_t width;
    bool write;
  };
  static const char* Line(const float* at) {
    return reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(at) & ~uintptr_t{kLine - 1});
  }
  static int64_t Lines(const float* at, int64_t width) {
    const char* end = reinterpret_cast<const char*>(at + width);
    return (end - Line(at) + kLine - 1) / kLine;
  }
  Range ranges_[kRanges];
  int count_ = 0, range_ = 0;
  int64_t line_ = 0, lines_ = 0, per_call_ = 0;
};

// B [depth, columns] in panels, and the products of row blocks with it. Multiply only reads
// it, so threads share one.
class Panels {
 public:
  // Room for up to max_depth rows of B, packed by Append; init is zero until SetInit.
  Panels(int64_t columns, int64_t max_depth)
      : columns_(columns),
        panels_((columns + kPanel - 1) / kPanel),
        max_depth_(max_depth),
        init_(panels_ * kPanel),
        packed_(panels_ * max_depth * kPanel) {}

  // Packs rows k < depth of a matrix (element (k, j) at b[k·k_stride + j·j_stride]) below
  // the rows packed so far.
  void Append(const float* b, int64_t depth, int64_t k_stride, int64_t j_stride) {
    const int64_t whole = j_stride == 1 ? columns_ / kPanel : 0;  // full panels of unit stride
    if (whole > 0) {
      // Row by row: each row of b is read once, front to back, into `whole` panel streams.
      float* const base = packed_.data() + depth_ * kPanel;
      const int64_t panel_size = max_depth_ * kPanel;
      for (int64_t k = 0; k < depth; ++k) {
        const float* from = b + k * k_stride;
        float* to = base + k * kPanel;
        for (int64_t p = 0; p < whole; ++p, from += kPanel, to += panel_size) {
          ei::pstore(to, ei::ploadu<Packet>(from));
          ei::pstore(to + kLanes, ei::ploadu<Packet>(from + kLanes));
        }
      }
    }
    for (int64_t p = whole; p < panels_; ++p) {
      const int64_t j0 = p * kPanel, width = std::min<int64_t>(kPanel, columns_ - j0);
      for (int64_t k = 0; k < depth; ++k) {
        float* to = packed_.data() + (p * max_depth_ + depth_ + k) * kPanel;
        const float* from = b + k * k_stride + j0 * j_stride;
        if (j_stride == 1 && width == kPanel) {  // two packets: no call to memmove per row
          ei::pstore(to, ei::ploadu<Packet>(from));
          ei::pstore(to + kLanes, ei::ploadu<Packet>(from + kLanes));
        } else if (j_stride == 1) {
          std::copy_n(from, width, to);
        } else {
          for (int64_t j = 0; j < width; ++j) to[j] = from[j * j_stride];
        }
      }
    }
    depth_ += depth;
  }

  void Clear() { depth_ = 0; }

  // The same as a new Panels(columns, max_depth), keeping the memory this one holds: a kernel
  // called again and again (a decoder's steps) does not fault fresh pages in at every call.
  // The packed rows are left as they were: only the `depth` rows Append writes are read.
  void Reset(int64_t columns, int64_t max_depth) {
    columns_ = columns;
    panels_ = (columns + kPanel - 1) / kPanel;
    max_depth_ = max_depth;
    depth_ = 0;
    init_.assign(panels_ * kPanel, 0.0f);
    packed_.resize(panels_ * max_depth * kPanel);
  }

  // What a product starts from: init [columns] in every row (the bias).
  void SetInit(const float* init) { std::copy_n(init, columns_, init_.begin()); }

  // out's row stride must be at least this: whole panels are stored.
  int64_t padded_columns() const { return PaddedColumns(columns_); }
  static int64_t PaddedColumns(int64_t columns) { return (columns + kPanel - 1) / kPanel * kPanel; }

  // out[n, padded_columns()] (row stride ldo) = init, or with kAccumulate out itself, plus
  // Σ_s operands[s]·(B's rows for s: the operands' depths in turn add up to B's). The rows are
  // cut into tiles of near-equal height: a last tile of one or two rows would be load-bound.
  // With a prefetch, its lines are issued over the tiles.
  template <bool kAccumulate = false>
  void Multiply(int64_t n, std::initializer_list<Operand> operands, float* out, int64_t ldo,
                Prefetch* prefetch = nullptr) const {
    const int count = static_cast<int>(operands.size());
    const int64_t tiles = (n + kTileRows - 1) / kTileRows;
    if (prefetch != nullptr) prefetch->Spread(panels_ * tiles);
    for (int64_t p = 0; p < panels_; ++p) {
      const float* panel = packed_.data() + p * max_depth_ * kPanel;
      for (int64_t tile = 0, row = 0; tile < tiles; ++tile) {
        const int64_t rows = n * (tile + 1) / tiles - row;
        TileOf<kAccumulate>(rows, operands.begin(), count, row, panel,
                            init_.data() + p * kPanel, out + row * ldo + p * kPanel, ldo);
        row += rows;
        if (prefetch != nullptr) prefetch->Issue();
      }
    }
  }

 private:
  int64_t columns_, panels_, max_depth_, depth_ = 0;
  std::vector<float, Eigen::aligned_allocator<float>> init_, packed_;
};

#if defined(EIGEN_VECTORIZE_AVX512)
constexpr const char* kInstructions = "AVX-512";
#elif defined(EIGEN_VECTORIZE_AVX2) && defined(EIGEN_VECTORIZE_FMA)
constexpr const char* kInstructions = "AVX2+FMA";
#elif defined(EIGEN_VECTORIZE_AVX)
constexpr const char* kInstructions = "AVX";
#elif defined(EIGEN_VECTORIZE_NEON)
constexpr const char* kInstructions = "NEON";
#elif defined(EIGEN_VECTORIZE_SSE2)
constexpr const char* kInstructions = "SSE2";
#else
constexpr const char* kInstructions = "no vector instructions";
#endif

}  // namespace lstmviz

#endif  // LSTMVIZ_ENGINE_PANEL_GEMM_H_
