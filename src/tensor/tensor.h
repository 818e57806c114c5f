// A non-owning view of a tensor: dtype, shape (row-major, PyTorch order) and
// a pointer into memory someone else owns (an mmap'd checkpoint, an arena).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "tensor/dtype.h"

namespace lfmvox {

inline constexpr int kMaxDims = 4;

struct Shape {
  std::array<int64_t, kMaxDims> dim{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    for (int64_t x : d)
      if (rank < kMaxDims) dim[rank++] = x;
  }
  int64_t operator[](int i) const { return dim[i]; }
  int64_t elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dim[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dim[i] != o.dim[i]) return false;
    return true;
  }
  std::string ToString() const;  // "[1282, 512]"
};

struct TensorView {
  DType dtype = DType::kF32;
  Shape shape;
  const void* data = nullptr;

  int64_t elements() const { return shape.elements(); }
  // For a block dtype, valid only when the last dimension is whole blocks
  // (then the rows are whole blocks too, and elements() counts weights).
  size_t bytes() const { return DTypeRowBytes(dtype, elements()); }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};

}  // namespace lfmvox
