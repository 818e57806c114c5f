// Audio in, end to end through the session (file → mono → 16 kHz → log-mel →
// FastConformer → adapter → AUDIO_IN positions → backbone → generation),
// against the oracle traces of both cases (tests/data/lfm25_{tiny,small}):
// audio/mel, adapter/out, prefill/in_emb and last_hidden for the synthetic
// clip (tests/data/inputs/synthetic_16k.wav) and prefill_speech/ for the real
// speech file (question.wav); gen/sequential and gen/interleaved exactly.
// Tolerances measured by the oracle (its README's recommended k, not derived): audio k = 2e-4 (speech 1e-4),
// adapter 5e-5, prefill 1e-4, as max|port − oracle| ≤ k·max|oracle|.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "io/audio_file.h"
#include "models/lfm25_audio/session.h"
#include "pipeline_util.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::CollectingSink;
using testing::Compare;
using testing::Diff;
using testing::LoadTrace;
using testing::RowSink;

const Lfm25AudioModel& Model(const std::string& name) { return testing::OracleModel(name, true); }

void Expect(const std::string& what, const std::vector<float>& port, const std::vector<float>& ref,
            double tol) {
  ASSERT_EQ(port.size(), ref.size()) << what;
  const Diff d = Compare(port.data(), ref);
  EXPECT_LE(d.rel(), tol) << what << ": max abs " << d.max_abs << " scale " << d.scale;
}

// The oracle prompt: text ids and one audio clip in the order of modality_flag.
void AppendPrompt(Lfm25Session& s, const std::string& group, const std::string& case_name,
                  const std::string& wav, ThreadTeam& team, TraceSink* sink) {
  auto audio = ReadAudioFile(testing::DataPath("inputs/" + wav));
  ASSERT_TRUE(audio.ok()) << audio.status().ToString();
  testing::AppendOraclePrompt(s, case_name, group, [&] { return s.AppendAudio(*audio, team, sink); });
}

class AudioPipeline : public ::testing::TestWithParam<std::string> {};

TEST_P(AudioPipeline, SyntheticClipMatchesEveryStage) {
  const Lfm25AudioModel& m = Model(GetParam());
  ThreadTeam team(2);
  auto s =
      Lfm25Session::Create(m, {.threads = 2, .context = 256, .prefill_chunk = 64, .max_clip_seconds = 10});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  CollectingSink sink;
  AppendPrompt(**s, "prefill", GetParam(), "synthetic_16k.wav", team, &sink);
  const std::string t = GetParam() + "/traces/";
  Expect("audio/mel", sink.tensors["mel"], LoadTrace(t + "audio__mel.npy").ToFloat(), 2e-4);
  Expect("adapter/out", sink.tensors["adapter_out"], LoadTrace(t + "adapter__out.npy").ToFloat(), 5e-5);
  ASSERT_TRUE((*s)->Prefill(team, &sink).ok());
  Expect("prefill/in_emb", sink.tensors["in_emb"], LoadTrace(t + "prefill__in_emb.npy").ToFloat(), 1e-4);
  Expect("prefill/last_hidden", sink.tensors["last_hidden"],
         LoadTrace(t + "prefill__last_hidden.npy").ToFloat(), 1e-4);
}

TEST_P(AudioPipeline, SpeechFileMatchesPrefill) {
  const Lfm25AudioModel& m = Model(GetParam());
  ThreadTeam team(1);
  auto s =
      Lfm25Session::Create(m, {.threads = 1, .context = 256, .prefill_chunk = 128, .max_clip_seconds = 10});
  ASSERT_TRUE(s.ok());
  CollectingSink sink;
  AppendPrompt(**s, "prefill_speech", GetParam(), "question.wav", team, &sink);
  const std::string t = GetParam() + "/traces/";
  Expect("audio_speech/mel", sink.tensors["mel"], LoadTrace(t + "audio_speech__mel.npy").ToFloat(), 1e-4);
  Expect("adapter_speech/out", sink.tensors["adapter_out"],
         LoadTrace(t + "adapter_speech__out.npy").ToFloat(), 5e-5);
  ASSERT_TRUE((*s)->Prefill(team, &sink).ok());
  Expect("prefill_speech/in_emb", sink.tensors["in_emb"],
         LoadTrace(t + "prefill_speech__in_emb.npy").ToFloat(), 1e-4);
  Expect("prefill_speech/last_hidden", sink.tensors["last_hidden"],
         LoadTrace(t + "prefill_speech__last_hidden.npy").ToFloat(), 1e-4);
}

TEST_P(AudioPipeline, GreedyGenerationFromTheAudioFile) {
  const Lfm25AudioModel& m = Model(GetParam());
  for (auto [mode, trace] : {std::pair{GenerationMode::kSequential, "gen__sequential"},
                             {GenerationMode::kInterleaved, "gen__interleaved"}}) {
    ThreadTeam team(1);
    auto s = Lfm25Session::Create(m, {.threads = 1, .context = 256, .max_clip_seconds = 10});
    ASSERT_TRUE(s.ok());
    AppendPrompt(**s, "prefill", GetParam(), "synthetic_16k.wav", team, nullptr);
    RowSink sink;
    auto r = (*s)->Generate({.mode = mode, .max_new_tokens = 16}, sink, team);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::vector<int64_t> w = LoadTrace(GetParam() + "/traces/" + trace + ".npy").ToInt64();
    ASSERT_EQ(sink.rows.size(), 16u);
    for (size_t i = 0; i < 16; ++i) {
      EXPECT_EQ(sink.rows[i], std::vector<int64_t>(w.begin() + static_cast<long>(9 * i),
                                                   w.begin() + static_cast<long>(9 * i + 9)))
          << trace << " item " << i;
    }
  }
}

// A→B→A: the answer to A after a reset (and in a fresh session) equals the
// first answer; turn 2's history is turn 1's prompt, the answer, <|im_end|>\n
// (interleaved mode does not yield <|im_end|>), then the new turn.
TEST_P(AudioPipeline, ConversationTurnsAndResets) {
  const Lfm25AudioModel& m = Model(GetParam());
  ThreadTeam team(1);
  auto answer = [&](Lfm25Session& s, const std::string& group, const std::string& wav) {
    const size_t start = s.positions();
    AppendPrompt(s, group, GetParam(), wav, team, nullptr);
    RowSink sink;
    auto r = s.Generate({.mode = GenerationMode::kInterleaved, .max_new_tokens = 12}, sink, team);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(s.positions(),
              start + LoadTrace(GetParam() + "/traces/" + group + "__modality_flag.npy").ToInt64().size() +
                  sink.rows.size());
    return sink.rows;
  };
  auto s1 = Lfm25Session::Create(m, {.threads = 1, .context = 512, .max_clip_seconds = 10});
  auto s2 = Lfm25Session::Create(m, {.threads = 1, .context = 512, .max_clip_seconds = 10});
  ASSERT_TRUE(s1.ok() && s2.ok());
  const auto a1 = answer(**s1, "prefill", "synthetic_16k.wav");
  const size_t after_a = (*s1)->positions();
  ASSERT_TRUE((*s1)->EndTurn().ok());
  EXPECT_EQ((*s1)->token(after_a), m.special().im_end);
  const auto b = answer(**s1, "prefill_speech", "question.wav");  // turn 2 continues the conversation
  EXPECT_FALSE(b.empty());
  (*s1)->Reset();
  const auto a2 = answer(**s1, "prefill", "synthetic_16k.wav");
  const auto a3 = answer(**s2, "prefill", "synthetic_16k.wav");
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(a1, a3);
}

TEST_P(AudioPipeline, BadAudioIsAClearError) {
  const Lfm25AudioModel& m = Model(GetParam());
  ThreadTeam team(1);
  auto s = Lfm25Session::Create(m, {.threads = 1, .context = 64, .max_clip_seconds = 2});
  ASSERT_TRUE(s.ok());
  AudioBuffer a;
  a.sample_rate = 16000;
  a.channels = 1;
  a.samples = {0.5f};  // one sample: no valid mel frame
  EXPECT_FALSE((*s)->AppendAudio(a, team).ok());
  a.samples.assign(16000 * 3, 0.1f);  // 3 s > max_clip_seconds
  auto too_long = (*s)->AppendAudio(a, team);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("max_clip_seconds"), std::string::npos) << too_long.message();
  a.samples.assign(16000, 0.1f);
  a.samples[100] = NAN;
  EXPECT_FALSE((*s)->AppendAudio(a, team).ok());
  // 1.9 s = 24 positions fit a 64-position context once, not three times.
  a.samples.assign(30400, 0.1f);
  for (size_t i = 0; i < a.samples.size(); ++i) a.samples[i] = 0.1f * std::sin(0.01f * static_cast<float>(i));
  EXPECT_TRUE((*s)->AppendAudio(a, team).ok());
  EXPECT_TRUE((*s)->AppendAudio(a, team).ok());
  auto full = (*s)->AppendAudio(a, team);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.message().find("context"), std::string::npos) << full.message();
  EXPECT_EQ((*s)->positions(), 2 * 24u);
}

INSTANTIATE_TEST_SUITE_P(Oracle, AudioPipeline, ::testing::Values("lfm25_tiny", "lfm25_small"));

}  // namespace
}  // namespace lfmvox
