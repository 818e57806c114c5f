// Long-form ASR (lfmvox/transcribe.h) on the oracle checkpoint tests/data/lfm25_tiny and the clip
// tests/data/inputs/question.wav, with the oracle's speech prompt (traces/prefill_speech__text_ids and
// __modality_flag: the text ids before and after the clip; the checkpoint's 1024-token vocabulary lacks the
// official ASR prompt's ids): the one-window case against the single-clip path (AddTokens + AddAudioFile
// + AddTokens + Generate, whose prefill the prefill_speech__ traces check), windows over a longer clip,
// and the subtitle formats.
#include "lfmvox/transcribe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lfmvox/audio_io.h"
#include "lfmvox/lfmvox.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

std::shared_ptr<const AudioModel> Tiny() {
  static auto m = AudioModel::Load(testing::DataPath("lfm25_tiny"));
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : nullptr;
}

// The oracle prompt's text ids before and after the speech (flag 1 text, 2 audio).
TranscribeOptions OraclePrompt(TranscribeOptions o) {
  const std::vector<int64_t> text =
      testing::LoadTrace("lfm25_tiny/traces/prefill_speech__text_ids.npy").ToInt64();
  const std::vector<int64_t> flags =
      testing::LoadTrace("lfm25_tiny/traces/prefill_speech__modality_flag.npy").ToInt64();
  size_t ti = 0;
  bool after = false;
  for (int64_t f : flags) {
    if (f == 2) {
      after = true;
      continue;
    }
    (after ? o.prompt_after_speech : o.prompt_before_speech).push_back(static_cast<int32_t>(text[ti++]));
  }
  EXPECT_EQ(ti, text.size());
  EXPECT_FALSE(o.prompt_before_speech.empty());
  return o;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Transcribe, OneWindowEqualsTheSingleClipPath) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  const std::string clip = testing::DataPath("inputs/question.wav");
  const TranscribeOptions o = OraclePrompt({.max_new_tokens = 24});
  GenerateOptions gen = GenerateOptions::ForAsr(*model);
  gen.max_new_tokens = 24;
  auto conv = Conversation::Create(model);
  ASSERT_TRUE(conv.ok());
  ASSERT_TRUE((*conv)->AddTokens(o.prompt_before_speech).ok());
  ASSERT_TRUE((*conv)->AddAudioFile(clip).ok());
  ASSERT_TRUE((*conv)->AddTokens(o.prompt_after_speech).ok());
  std::string want;
  std::vector<int32_t> want_ids;
  OutputCallbacks cb;
  cb.on_text = [&](int32_t id, std::string_view piece) {
    want_ids.push_back(id);
    if (!model->IsSpecialToken(id)) want.append(piece);
    return Status::Ok();
  };
  ASSERT_TRUE((*conv)->Generate(gen, cb).ok());
  ASSERT_FALSE(want_ids.empty());

  auto r = Transcribe(model, clip, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->segments.size(), 1u);
  EXPECT_EQ(r->segments[0].ids, want_ids);
  EXPECT_EQ(r->segments[0].text, want);
  auto audio = DecodeAudio(ReadBytes(clip), 3600);
  ASSERT_TRUE(audio.ok());
  EXPECT_EQ(r->segments[0].start, 0.0);
  EXPECT_DOUBLE_EQ(r->segments[0].end, audio->seconds());
  EXPECT_DOUBLE_EQ(r->seconds, audio->seconds());
}

// question.wav tiled `times` times into a WAV under the test's temp folder.
std::string Tiled(int times) {
  auto audio = DecodeAudio(ReadBytes(testing::DataPath("inputs/question.wav")), 3600);
  EXPECT_TRUE(audio.ok() && audio->channels == 1);
  std::vector<float> tiled;
  for (int i = 0; i < times; ++i) tiled.insert(tiled.end(), audio->samples.begin(), audio->samples.end());
  auto wav = EncodeAudio(tiled, audio->sample_rate, AudioFileFormat::kWav);
  EXPECT_TRUE(wav.ok());
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lfmvox_transcribe_" + std::to_string(times) + ".wav"))
          .string();
  std::ofstream(path, std::ios::binary) << *wav;
  return path;
}

// Segments in order, contiguous, covering the whole file, each at most one window; the decoded samples
// held at once are one window's (16 kHz mono: 2 s = 32000), the same for a file twice as long.
TEST(Transcribe, WindowsCoverALongerClipWithBoundedBuffer) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  const TranscribeOptions o = OraclePrompt({.window_seconds = 2, .search_seconds = 0.5, .max_new_tokens = 4});
  size_t peak[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const int times = 3 * (k + 1);
    const std::string path = Tiled(times);
    auto audio = DecodeAudio(ReadBytes(path), 3600);
    ASSERT_TRUE(audio.ok());
    int streamed = 0;
    auto r = Transcribe(model, path, o, [&](const TranscriptSegment&) {
      ++streamed;
      return Status::Ok();
    });
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(streamed, static_cast<int>(r->segments.size()));
    ASSERT_GT(r->segments.size(), 1u);
    EXPECT_EQ(r->segments.front().start, 0.0);
    EXPECT_DOUBLE_EQ(r->segments.back().end, audio->seconds());
    EXPECT_DOUBLE_EQ(r->seconds, audio->seconds());
    for (size_t i = 0; i < r->segments.size(); ++i) {
      const TranscriptSegment& s = r->segments[i];
      EXPECT_GT(s.end, s.start) << i;
      EXPECT_LE(s.end - s.start, 2.0 + 1e-9) << i;
      if (i + 1 < r->segments.size()) {
        EXPECT_EQ(r->segments[i + 1].start, s.end) << i;
        EXPECT_GE(s.end - s.start, 1.5 - 1e-9) << i;  // a cut lies in the last search_seconds
      }
    }
    peak[k] = r->peak_buffered_samples;
    EXPECT_LT(peak[k], audio->samples.size());
    std::filesystem::remove(path);
  }
  EXPECT_EQ(peak[0], 32000u);
  EXPECT_EQ(peak[1], peak[0]);
}

TEST(Transcribe, LongerThanTheCapIsOutOfRange) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  auto r = Transcribe(model, testing::DataPath("inputs/question.wav"), {.max_seconds = 0.5});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("--max-seconds"), std::string::npos) << r.status().message();
}

TEST(Transcribe, SubtitleFormats) {
  const std::vector<TranscriptSegment> segs = {{0, 29.9994, "Hello there."}, {29.9994, 3661.2345, "Bye."}};
  EXPECT_EQ(FormatTranscript(segs, TranscriptFormat::kSrt),
            "1\n00:00:00,000 --> 00:00:29,999\nHello there.\n\n"
            "2\n00:00:29,999 --> 01:01:01,235\nBye.\n\n");
  EXPECT_EQ(FormatTranscript(segs, TranscriptFormat::kVtt),
            "WEBVTT\n\n00:00:00.000 --> 00:00:29.999\nHello there.\n\n"
            "00:00:29.999 --> 01:01:01.235\nBye.\n\n");
  EXPECT_EQ(FormatTranscript(segs, TranscriptFormat::kText), "Hello there.\nBye.\n");
  EXPECT_EQ(FormatTranscript(segs, TranscriptFormat::kJson),
            "{\"segments\":[{\"start\":0.0,\"end\":29.9994,\"text\":\"Hello there.\"},"
            "{\"start\":29.9994,\"end\":3661.2345,\"text\":\"Bye.\"}]}\n");
}

}  // namespace
}  // namespace lfmvox
