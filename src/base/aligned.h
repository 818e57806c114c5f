// Aligned storage. Buffers are sized once (from a config) and never grow on a
// hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

namespace lfmvox {

inline constexpr size_t kAlign = 64;  // a cache line; also the widest SIMD vector

inline size_t RoundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// An owned, 64-byte aligned, zero-initialised array of trivially copyable T.
template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { Reset(n); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~AlignedBuffer() { std::free(p_); }

  // Reallocates to n elements, all zero. Not for hot paths.
  void Reset(size_t n) {
    std::free(p_);
    p_ = nullptr;
    n_ = 0;
    if (n == 0) return;
    p_ = static_cast<T*>(std::aligned_alloc(kAlign, RoundUp(n * sizeof(T), kAlign)));
    if (p_ == nullptr) throw std::bad_alloc();
    n_ = n;
    Zero();
  }
  void Zero() {
    if (n_) std::memset(static_cast<void*>(p_), 0, n_ * sizeof(T));
  }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  std::span<T> span() { return {p_, n_}; }
  std::span<const T> span() const { return {p_, n_}; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace lfmvox
