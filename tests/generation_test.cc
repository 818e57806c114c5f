// Greedy generation against the oracle (tests/data/lfm25_{tiny,small}):
// tts/sequential — the text-only prompt tts/text_ids, generate_sequential
// with max_new_tokens 24 — must be reproduced exactly: every text id, every
// code, the switch to audio, the end-of-audio frame and the text after it.
// Also: the official append rules for a second turn, and a clear stop when
// the context is full. The model directories hold the surrogate
// tokenizer.json (tests/data/tokenizer) only for the special-token names.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "models/lfm25_audio/session.h"
#include "pipeline_util.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::LoadTrace;
using testing::RowSink;
using testing::TraceIds;

const Lfm25AudioModel& Model(const std::string& name) { return testing::OracleModel(name, false); }

class Generation : public ::testing::TestWithParam<std::string> {};

TEST_P(Generation, TtsSequentialGreedyMatchesTrace) {
  const Lfm25AudioModel& m = Model(GetParam());
  const NpyArray want = LoadTrace(GetParam() + "/traces/tts__sequential.npy");  // [24, 9]
  const std::vector<int64_t> w = want.ToInt64();
  for (int threads : {1, 2}) {
    ThreadTeam team(threads);
    auto s = Lfm25Session::Create(m, {.threads = threads, .context = 256, .prefill_chunk = 16});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->AppendTokens(TraceIds(GetParam() + "/traces/tts__text_ids.npy")).ok());
    RowSink sink;
    auto r = (*s)->Generate({.mode = GenerationMode::kSequential, .max_new_tokens = 24}, sink, team);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(sink.rows.size(), 24u);
    for (size_t i = 0; i < 24; ++i) {
      const std::vector<int64_t> row(w.begin() + static_cast<long>(i * 9),
                                     w.begin() + static_cast<long>(i * 9 + 9));
      EXPECT_EQ(sink.rows[i], row) << "item " << i << " threads " << threads;
    }
    EXPECT_FALSE(r->ended);
    EXPECT_EQ(r->text_tokens + r->audio_frames, 24);
  }
}

// A sequential prompt that already ends in <|audio_start|> (the trace's first
// generated item) continues with the trace's frames: generation starts in
// audio, exactly as after sampling that token.
TEST_P(Generation, PromptEndingInAudioStartContinuesWithAudio) {
  const Lfm25AudioModel& m = Model(GetParam());
  const std::vector<int64_t> w = LoadTrace(GetParam() + "/traces/tts__sequential.npy").ToInt64();
  ASSERT_EQ(w[0], 0);
  ASSERT_EQ(w[1], m.special().audio_start);  // the trace's first item is the switch to speech
  ThreadTeam team(1);
  auto s = Lfm25Session::Create(m, {.threads = 1, .context = 256});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<int32_t> prompt = TraceIds(GetParam() + "/traces/tts__text_ids.npy");
  prompt.push_back(m.special().audio_start);
  ASSERT_TRUE((*s)->AppendTokens(prompt).ok());
  RowSink sink;
  auto r = (*s)->Generate({.mode = GenerationMode::kSequential, .max_new_tokens = 23}, sink, team);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(sink.rows.size(), 23u);
  for (size_t i = 0; i < 23; ++i) {
    const std::vector<int64_t> row(w.begin() + static_cast<long>((i + 1) * 9),
                                   w.begin() + static_cast<long>((i + 1) * 9 + 9));
    EXPECT_EQ(sink.rows[i], row) << "item " << i + 1;
  }
}

// Turn 2's prompt is turn 1's prompt, every generated item with its flag in
// order, then "<|im_end|>\n" (a sequential turn's own <|im_end|> not added
// twice), then the next turn's pieces.
TEST_P(Generation, SecondTurnFollowsTheAppendRules) {
  const Lfm25AudioModel& m = Model(GetParam());
  ThreadTeam team(1);
  auto s = Lfm25Session::Create(m, {.threads = 1, .context = 256});
  ASSERT_TRUE(s.ok());
  const std::vector<int32_t> prompt = TraceIds(GetParam() + "/traces/tts__text_ids.npy");
  ASSERT_TRUE((*s)->AppendTokens(prompt).ok());
  RowSink sink;
  ASSERT_TRUE((*s)->Generate({.max_new_tokens = 8}, sink, team).ok());
  ASSERT_TRUE((*s)->EndTurn().ok());
  // The next turn's opening, as ids: the surrogate tokenizer's word ids lie
  // beyond these tiny models' vocabularies.
  const std::vector<int32_t> next = {m.special().im_start, 60, *m.tokenizer().TokenId("Ċ")};
  ASSERT_TRUE((*s)->AppendTokens(next).ok());
  const size_t n = prompt.size();
  ASSERT_EQ((*s)->positions(), n + sink.rows.size() + 2 + 3);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ((*s)->token(i), prompt[i]);
  for (size_t i = 0; i < sink.rows.size(); ++i) {
    const auto& row = sink.rows[i];
    if (row[0] == 0) {
      EXPECT_EQ((*s)->modality(n + i), Modality::kText);
      EXPECT_EQ((*s)->token(n + i), row[1]);
    } else {
      EXPECT_EQ((*s)->modality(n + i), Modality::kAudioOut);
      auto codes = (*s)->audio_codes(n + i);
      EXPECT_EQ(std::vector<int64_t>(codes.begin(), codes.end()),
                std::vector<int64_t>(row.begin() + 1, row.end()));
    }
  }
  const size_t e = n + sink.rows.size();
  EXPECT_EQ((*s)->token(e), m.special().im_end);
  EXPECT_EQ((*s)->token(e + 1), *m.tokenizer().TokenId("Ċ"));  // "\n"
  EXPECT_EQ((*s)->token(e + 2), m.special().im_start);
  // The cached prefix is reused: only the new positions run on the next Prefill.
  const size_t cached = (*s)->cached_positions();
  EXPECT_EQ(cached, e - 1);
  ASSERT_TRUE((*s)->Prefill(team).ok());
  EXPECT_EQ((*s)->cached_positions(), (*s)->positions());
}

TEST_P(Generation, FullContextStopsCleanly) {
  const Lfm25AudioModel& m = Model(GetParam());
  ThreadTeam team(1);
  const std::vector<int32_t> prompt = TraceIds(GetParam() + "/traces/tts__text_ids.npy");
  auto s = Lfm25Session::Create(m, {.threads = 1, .context = prompt.size() + 5});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->AppendTokens(prompt).ok());
  RowSink sink;
  auto r = (*s)->Generate({.max_new_tokens = 24}, sink, team);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->context_full);
  EXPECT_EQ(sink.rows.size(), 5u);
  auto too_long = (*s)->AppendTokens(prompt);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("context"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Oracle, Generation, ::testing::Values("lfm25_tiny", "lfm25_small"));

}  // namespace
}  // namespace lfmvox

namespace lfmvox {
namespace {

// gen/sequential and gen/interleaved: the synthetic audio prompt (prefill/
// text_ids and modality_flag, with the stored adapter output adapter/out as
// the AUDIO_IN embeddings), greedy, max_new_tokens 16, interleave schedule
// from config.json. Every item must match exactly.
void AppendSyntheticPrompt(Lfm25Session& s, const std::string& c) {
  const std::vector<float> audio = LoadTrace(c + "/traces/adapter__out.npy").ToFloat();
  testing::AppendOraclePrompt(s, c, "prefill", [&] { return s.AppendAudioIn(audio); });  // one clip: all rows
}

TEST_P(Generation, AudioPromptSequentialAndInterleaved) {
  const Lfm25AudioModel& m = Model(GetParam());
  for (auto [mode, trace] : {std::pair{GenerationMode::kSequential, "gen__sequential"},
                             {GenerationMode::kInterleaved, "gen__interleaved"}}) {
    const std::vector<int64_t> w = LoadTrace(GetParam() + "/traces/" + trace + ".npy").ToInt64();
    ThreadTeam team(2);
    auto s = Lfm25Session::Create(m, {.threads = 2, .context = 256, .prefill_chunk = 8});
    ASSERT_TRUE(s.ok());
    AppendSyntheticPrompt(**s, GetParam());
    ASSERT_EQ((*s)->positions(),
              LoadTrace(GetParam() + "/traces/prefill__modality_flag.npy").ToInt64().size());
    RowSink sink;
    auto r = (*s)->Generate({.mode = mode, .max_new_tokens = 16}, sink, team);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(sink.rows.size(), 16u) << trace;
    for (size_t i = 0; i < 16; ++i) {
      const std::vector<int64_t> row(w.begin() + static_cast<long>(i * 9),
                                     w.begin() + static_cast<long>(i * 9 + 9));
      EXPECT_EQ(sink.rows[i], row) << trace << " item " << i;
    }
  }
}

}  // namespace
}  // namespace lfmvox

namespace lfmvox {
namespace {

// A model directory missing a file or a tensor is an error that names it.
TEST(ModelLoad, MissingFilesAndTensorsAreNamed) {
  if (!testing::WeightsVariant().empty()) GTEST_SKIP() << "edits the safetensors snapshot";
  namespace fs = std::filesystem;
  const std::string dir = testing::ScratchPath("lfm25_partial");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = testing::DataPath("lfm25_tiny");
  fs::copy_file(src + "/config.json", dir + "/config.json");
  auto no_weights = Lfm25AudioModel::Load(dir, {.load_detokenizer = false});
  ASSERT_FALSE(no_weights.ok());
  EXPECT_NE(no_weights.status().message().find("model.safetensors"), std::string::npos)
      << no_weights.status().message();
  fs::copy_file(src + "/model.safetensors", dir + "/model.safetensors");
  auto no_tokenizer = Lfm25AudioModel::Load(dir, {.load_detokenizer = false});
  ASSERT_FALSE(no_tokenizer.ok());
  EXPECT_NE(no_tokenizer.status().message().find("tokenizer.json"), std::string::npos)
      << no_tokenizer.status().message();
  fs::copy_file(testing::DataPath("tokenizer/tokenizer.json"), dir + "/tokenizer.json");
  EXPECT_TRUE(Lfm25AudioModel::Load(dir, {.load_detokenizer = false}).ok());
  // Without its speech decoder the snapshot loads and says what speech output lacks.
  auto no_detok = Lfm25AudioModel::Load(dir);
  ASSERT_TRUE(no_detok.ok()) << no_detok.status().message();
  EXPECT_EQ((*no_detok)->detokenizer(), nullptr);
  EXPECT_NE((*no_detok)->speech_out_missing().find("audio_detokenizer/"), std::string::npos)
      << (*no_detok)->speech_out_missing();
  // A tensor missing from the weights.
  auto ck = Checkpoint::Open(src + "/model.safetensors");
  ASSERT_TRUE(ck.ok());
  std::vector<TensorToWrite> ts;
  for (const std::string& n : ck->Names()) {
    if (n == "lfm.layers.3.feed_forward.w2.weight") continue;
    TensorView v = *ck->Get(n);
    ts.push_back({n, v.dtype, std::vector<int64_t>(v.shape.dim.begin(), v.shape.dim.begin() + v.shape.rank),
                  v.data, v.bytes()});
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", ts).ok());
  auto missing = Lfm25AudioModel::Load(dir, {.load_detokenizer = false});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("lfm.layers.3.feed_forward.w2.weight"), std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace lfmvox
