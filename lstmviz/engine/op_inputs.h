// Optional inputs of the native ops: TensorFlow's way to make an input optional is a list of
// zero or one tensors. Included by lstm_kernels.cc and gate_stats.cc (native.py builds them).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace lstmviz {

using tensorflow::OpKernelContext;
using tensorflow::TensorShape;
using tensorflow::errors::InvalidArgument;
using tensorflow::shape_inference::InferenceContext;

// An optional input (a list of zero or one tensors of `shape`): its values, or nullptr when
// it is absent.
inline absl::Status Optional(OpKernelContext* ctx, const char* name, const TensorShape& shape,
                             const float** values) {
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
inline absl::Status OptionalMask(OpKernelContext* ctx, int64_t T, int64_t B,
                                 const float** values) {
  tensorflow::OpInputList masks;
  TF_RETURN_IF_ERROR(ctx->input_list("mask", &masks));
  if (masks.size() == 1 && masks[0].shape() != TensorShape({T, B})) {
    return InvalidArgument("mask must be [T, B] = [", T, ", ", B, "], got ",
                           masks[0].shape().DebugString());
  }
  return Optional(ctx, "mask", TensorShape({T, B}), values);
}

// Shape function check: each named list holds zero or one tensor.
inline absl::Status AtMostOne(InferenceContext* ctx, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    std::vector<tensorflow::shape_inference::ShapeHandle> given;
    TF_RETURN_IF_ERROR(ctx->input(name, &given));
    if (given.size() > 1) return InvalidArgument("at most one ", name, ", got ", given.size());
  }
  return absl::OkStatus();
}

}  // namespace lstmviz
