// Aligned storage. Buffers are sized once (from a config) and never grow on a
// hot path; AlignedBuffer owns one block, Arena hands out sub-blocks of one.
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

// A bump allocator over one aligned block. Plan the total with Reserve()
// calls, Finalize() once, then Take() the same sequence of sizes.
class Arena {
 public:
  // Phase 1: record a request of n floats (or bytes / sizeof(float)).
  template <typename T>
  void Reserve(size_t n) { planned_ += RoundUp(n * sizeof(T), kAlign); }
  void Finalize() { block_.Reset(planned_); used_ = 0; }
  // Phase 2: hand out the next block; zeroed at Finalize().
  template <typename T>
  T* Take(size_t n) {
    const size_t bytes = RoundUp(n * sizeof(T), kAlign);
    if (used_ + bytes > block_.size()) return nullptr;  // a planning bug; callers check
    T* p = reinterpret_cast<T*>(block_.data() + used_);
    used_ += bytes;
    return p;
  }
  size_t bytes() const { return block_.size(); }

 private:
  AlignedBuffer<std::byte> block_;
  size_t planned_ = 0;
  size_t used_ = 0;
};

}  // namespace lfmvox
