// Helpers for the LFM2.5-Audio pipeline tests: oracle models loaded once per
// test binary, and a sink that records generated items in the traces' row
// format ([0, id, -1×7] for text, [1, c0..c7] for audio).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model_files.h"
#include "models/lfm25_audio/session.h"
#include "trace_util.h"

namespace lfmvox::testing {

inline const Lfm25AudioModel& OracleModel(const std::string& name, bool with_detokenizer = true) {
  static std::map<std::string, std::unique_ptr<Lfm25AudioModel>> cache;
  auto& m = cache[name + (with_detokenizer ? "+detok" : "")];
  if (!m) {
    auto r = Lfm25AudioModel::Load(ModelDir(name), {.load_detokenizer = with_detokenizer});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    m = std::move(r).value();
  }
  return *m;
}

// A 1-D integer trace (token ids) as int32.
inline std::vector<int32_t> TraceIds(const std::string& trace) {
  std::vector<int32_t> out;
  for (int64_t v : LoadTrace(trace).ToInt64()) out.push_back(static_cast<int32_t>(v));
  return out;
}

// Records generated items as rows of the trace format: [0, id, -1×7] or [1, c0..c7].
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

// Appends an oracle prompt in the order of `<group>__modality_flag`: its text
// ids from `<group>__text_ids`, and for each run of AUDIO_IN flags whatever
// append_audio adds (which must be exactly that many positions).
template <typename AppendAudio>
void AppendOraclePrompt(Lfm25Session& s, const std::string& case_name, const std::string& group,
                        AppendAudio append_audio) {
  const std::vector<int64_t> text = LoadTrace(case_name + "/traces/" + group + "__text_ids.npy").ToInt64();
  const std::vector<int64_t> flags =
      LoadTrace(case_name + "/traces/" + group + "__modality_flag.npy").ToInt64();
  size_t ti = 0;
  for (size_t p = 0; p < flags.size();) {
    size_t q = p;
    while (q < flags.size() && flags[q] == flags[p]) ++q;
    if (flags[p] == 1) {
      std::vector<int32_t> ids;
      for (size_t i = p; i < q; ++i) ids.push_back(static_cast<int32_t>(text[ti++]));
      ASSERT_TRUE(s.AppendTokens(ids).ok());
    } else {
      ASSERT_EQ(flags[p], 2);
      const size_t before = s.positions();
      ASSERT_TRUE(append_audio().ok());
      ASSERT_EQ(s.positions() - before, q - p) << "audio positions";
    }
    p = q;
  }
}

}  // namespace lfmvox::testing
