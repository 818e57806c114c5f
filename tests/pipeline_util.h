// Helpers for the LFM2.5-Audio pipeline tests: oracle models loaded once per
// test binary, and a sink that records generated items in the traces' row
// format ([0, id, -1×7] for text, [1, c0..c7] for audio).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/pipeline/lfm25_audio.h"
#include "trace_util.h"

namespace lfmvox::testing {

inline const Lfm25AudioModel& OracleModel(const std::string& name, bool with_detokenizer = true) {
  static std::map<std::string, std::unique_ptr<Lfm25AudioModel>> cache;
  auto& m = cache[name + (with_detokenizer ? "+detok" : "")];
  if (!m) {
    auto r = Lfm25AudioModel::Load(DataPath(name), {.load_detokenizer = with_detokenizer});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    m = std::move(r).value();
  }
  return *m;
}

class RowSink : public GenerationSink {
 public:
  Status OnText(int32_t id) override {
    rows.push_back({0, id, -1, -1, -1, -1, -1, -1, -1});
    return Status::Ok();
  }
  Status OnAudioFrame(std::span<const int32_t> codes, bool) override {
    std::vector<int64_t> r{1};
    r.insert(r.end(), codes.begin(), codes.end());
    rows.push_back(r);
    return Status::Ok();
  }
  std::vector<std::vector<int64_t>> rows;
};

}  // namespace lfmvox::testing
