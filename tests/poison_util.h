// Hostile copies of the oracle checkpoints: poisoned weights: a model folder whose model.safetensors has one
// element of one tensor replaced (NaN, inf), the rest of the folder linked to the original, so the load-time
// weight scan and the run-time guards can be checked on a file that is the oracle's in every other byte.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "tensor/dtype.h"
#include "trace_util.h"

namespace lfmvox::testing {

// A scratch folder `name` holding `src`'s entries as symlinks, except `own` (which the caller writes) and
// traces/, and with the entries of `replace` (entry name -> path) linked to another path instead.
inline std::filesystem::path LinkedCopy(const std::string& name, const std::string& src,
                                        const std::string& own,
                                        const std::map<std::string, std::string>& replace = {}) {
  namespace fs = std::filesystem;
  const fs::path from = fs::canonical(src);
  const fs::path dir = ScratchPath(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const fs::directory_entry& e : fs::directory_iterator(from)) {
    const std::string entry = e.path().filename().string();
    if (entry == own || entry == "traces") continue;
    auto it = replace.find(entry);
    fs::create_symlink(it != replace.end() ? fs::path(it->second) : fs::canonical(e.path()), dir / entry);
  }
  return dir;
}

// LinkedCopy of `src` whose model.safetensors is rewritten with element `index` of `tensor` set to
// `value` (rounded to the tensor's dtype: F32, BF16 or F16).
inline std::string PoisonedCopy(const std::string& name, const std::string& src, const std::string& tensor,
                                size_t index, float value,
                                const std::map<std::string, std::string>& replace = {}) {
  namespace fs = std::filesystem;
  const fs::path from = fs::canonical(src);
  const fs::path dir = LinkedCopy("poison_" + name, src, "model.safetensors", replace);
  Result<Checkpoint> ck = Checkpoint::Open((from / "model.safetensors").string());
  EXPECT_TRUE(ck.ok()) << ck.status().ToString();
  if (!ck.ok()) return dir.string();
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<TensorToWrite> out;
  bool found = false;
  for (const std::string& n : ck->Names()) {
    const TensorView t = ck->Get(n).value();
    const auto* p = static_cast<const uint8_t*>(t.data);
    bytes.emplace_back(p, p + t.bytes());
    if (n == tensor) {
      found = static_cast<int64_t>(index) < t.elements();
      EXPECT_TRUE(found) << tensor << " has " << t.elements() << " elements";
      if (!found) break;
      uint8_t* at = bytes.back().data() + index * DTypeSize(t.dtype);
      const uint16_t h = t.dtype == DType::kBF16 ? F32ToBf16(value) : F32ToF16(value);
      if (t.dtype == DType::kF32)
        std::memcpy(at, &value, 4);
      else if (t.dtype == DType::kBF16 || t.dtype == DType::kF16)
        std::memcpy(at, &h, 2);
      else
        ADD_FAILURE() << tensor << " is " << DTypeName(t.dtype) << ", not a float tensor";
    }
    out.push_back({n, t.dtype, std::vector<int64_t>(t.shape.dim.begin(), t.shape.dim.begin() + t.shape.rank),
                   nullptr, t.bytes()});
  }
  EXPECT_TRUE(found) << "no tensor " << tensor << " in " << src;
  for (size_t i = 0; i < out.size(); ++i) out[i].data = bytes[i].data();
  const Status s = WriteSafetensors((dir / "model.safetensors").string(), out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return dir.string();
}

// LinkedCopy of model folder `src` whose tokenizer.json (src's, followed through its link) has its first
// "Regex" pattern replaced by `pattern` (JSON-escaped already): a hostile pre-tokenizer.
inline std::string PatternCopy(const std::string& name, const std::string& src, const std::string& pattern) {
  namespace fs = std::filesystem;
  const fs::path dir = LinkedCopy("pattern_" + name, src, "tokenizer.json");
  std::ifstream in(fs::canonical(fs::path(src) / "tokenizer.json"));
  std::string j((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t key = j.find("\"Regex\"");
  EXPECT_NE(key, std::string::npos);
  if (key == std::string::npos) return dir.string();
  const size_t open = j.find('"', j.find(':', key) + 1);
  size_t close = open + 1;
  while (close < j.size() && j[close] != '"') close += j[close] == '\\' ? 2 : 1;
  j.replace(open + 1, close - open - 1, pattern);
  std::ofstream(dir / "tokenizer.json") << j;
  return dir.string();
}

}  // namespace lfmvox::testing
