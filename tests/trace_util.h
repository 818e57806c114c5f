// Helpers for parity tests against the oracle traces (tests/data/*/traces,
// produced by the official liquid-audio v1.3.0 code; see tests/data/README.md).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/trace.h"
#include "io/npy.h"

namespace lfmvox::testing {

inline std::string DataPath(const std::string& rel) { return std::string(LFMVOX_TEST_DATA_DIR) + "/" + rel; }

// A scratch path no other test process shares: ctest runs every test in its
// own process, several at once, all under the same TempDir().
// Each path is removed (with what is under it) when the process exits normally, so repeated runs do
// not fill TempDir() (the memory-bound tests alone write ~100 MB files).
class ScratchPaths {
 public:
  static ScratchPaths& Get() {
    static ScratchPaths s;
    return s;
  }
  void Add(const std::string& p) {
    std::lock_guard lock(mu_);
    paths_.insert(p);
  }
  ~ScratchPaths() {
    for (const std::string& p : paths_) {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  }

 private:
  std::mutex mu_;
  std::set<std::string> paths_;
};

inline std::string ScratchPath(const std::string& name) {
  std::string p = ::testing::TempDir() + "/lfmvox_" + std::to_string(::getpid()) + "_" + name;
  ScratchPaths::Get().Add(p);
  return p;
}

// Loads a trace; fails the test if it is missing.
inline NpyArray LoadTrace(const std::string& rel) {
  Result<NpyArray> a = ReadNpy(DataPath(rel));
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a).value() : NpyArray{};
}

struct Diff {
  double max_abs = 0;  // max |port − ref|
  double scale = 0;    // max |ref|
  double rel() const { return scale > 0 ? max_abs / scale : max_abs; }
};

inline Diff Compare(const float* port, const std::vector<float>& ref) {
  Diff d;
  for (size_t i = 0; i < ref.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(port[i]) - ref[i]));
    d.scale = std::max(d.scale, std::fabs(static_cast<double>(ref[i])));
  }
  return d;
}

// Signal-to-noise ratio of port against ref over [begin, end), in dB.
inline double SnrDb(const float* port, const std::vector<float>& ref, size_t begin, size_t end) {
  double sig = 0, err = 0;
  for (size_t i = begin; i < end; ++i) {
    sig += static_cast<double>(ref[i]) * ref[i];
    const double e = static_cast<double>(port[i]) - ref[i];
    err += e * e;
  }
  if (err == 0) return 400.0;  // identical
  return 10.0 * std::log10(sig / err);
}

// Collects traced intermediates by name, appending the rows of successive calls.
class CollectingSink : public TraceSink {
 public:
  void Record(std::string_view name, const float* data, size_t rows, size_t cols, size_t ld) override {
    std::vector<float>& v = tensors[std::string(name)];
    for (size_t r = 0; r < rows; ++r) v.insert(v.end(), data + r * ld, data + r * ld + cols);
  }
  std::map<std::string, std::vector<float>> tensors;
};

}  // namespace lfmvox::testing
