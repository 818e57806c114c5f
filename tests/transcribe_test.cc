// Long-form ASR (lfmvox/transcribe.h) on the oracle checkpoint tests/data/lfm25_tiny and the clip
// tests/data/inputs/question.wav, with the oracle's speech prompt (traces/prefill_speech__text_ids and
// __modality_flag: the text ids before and after the clip; the checkpoint's 1024-token vocabulary lacks the
// official ASR prompt's ids): the one-window case against the single-clip path (AddTokens + AddAudioFile
// + AddTokens + Generate, whose prefill the prefill_speech__ traces check), windows over a longer clip,
// and the subtitle formats.
#include "lfmvox/transcribe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/word_timing.h"
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

// The words' text, joined by single spaces; and a text's white-space-separated pieces, the same way.
std::string JoinWords(const std::vector<WordTiming>& w) {
  std::string s;
  for (const WordTiming& x : w) s += (s.empty() ? "" : " ") + x.text;
  return s;
}
std::string NormalizeSpaces(const std::string& t) {
  std::istringstream in(t);
  std::string s, piece;
  while (in >> piece) s += (s.empty() ? "" : " ") + piece;
  return s;
}

// One ASR turn on question.wav with the oracle prompt, its text sampled near uniformly (temperature 50,
// seed 7: the tiny model's greedy and T = 1 text starts speech at once), with or without word timestamps.
struct SampledAsr {
  std::vector<int32_t> ids;
  std::string text;
  GenerateSummary summary;
};
SampledAsr RunSampledAsr(const std::shared_ptr<const AudioModel>& model, bool words,
                         std::shared_ptr<Engine> engine = nullptr, Conversation* other = nullptr) {
  const TranscribeOptions o = OraclePrompt({});
  SampledAsr out;
  auto conv = Conversation::Create(model, {.seed = 7, .engine = engine});
  EXPECT_TRUE(conv.ok());
  EXPECT_TRUE((*conv)->AddTokens(o.prompt_before_speech).ok());
  EXPECT_TRUE((*conv)->AddAudioFile(testing::DataPath("inputs/question.wav")).ok());
  EXPECT_TRUE((*conv)->AddTokens(o.prompt_after_speech).ok());
  GenerateOptions g = GenerateOptions::ForAsr(*model);
  g.max_new_tokens = 24;
  g.text = {50.0f, 0};  // near uniform: the tiny model's likeliest token starts speech (sequential mode)
  g.word_timestamps = words;
  OutputCallbacks cb;
  cb.on_text = [&](int32_t id, std::string_view piece) {
    out.ids.push_back(id);
    if (!model->IsSpecialToken(id)) out.text.append(piece);
    return Status::Ok();
  };
  if (other == nullptr) {
    auto r = (*conv)->Generate(g, cb);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) out.summary = *r;
    return out;
  }
  // Batched beside `other` (already begun) on the shared engine, step by step.
  EXPECT_TRUE((*conv)->BeginGenerate(g, cb).ok());
  Conversation* both[2] = {conv->get(), other};
  while ((*conv)->generating()) EXPECT_TRUE(engine->Step(both).ok());
  auto r = (*conv)->FinishGenerate();
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (r.ok()) out.summary = *r;
  return out;
}

// Word timestamps (GenerateOptions::word_timestamps, the backbone's attention aligned by DTW): the
// generation is the same with them as without (same ids, same text); the words are the text's
// white-space-separated pieces in order, inside the clip (its encoder positions at 80 ms: 4.9 s → 62
// positions, 4.96 s), their starts never go back, and a second run, or the same conversation batched beside
// another, gives the same times. (Random weights: the times say nothing about where a trained model hears
// the words; this checks the mechanics.)
TEST(Transcribe, WordTimestamps) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  const SampledAsr plain = RunSampledAsr(model, false), timed = RunSampledAsr(model, true);
  EXPECT_EQ(timed.ids, plain.ids);
  EXPECT_EQ(timed.text, plain.text);
  EXPECT_TRUE(plain.summary.words.empty());
  const std::vector<WordTiming>& words = timed.summary.words;
  ASSERT_FALSE(NormalizeSpaces(timed.text).empty()) << "the sampled text is empty";
  EXPECT_EQ(JoinWords(words), NormalizeSpaces(timed.text));
  auto audio = DecodeAudio(ReadBytes(testing::DataPath("inputs/question.wav")), 3600);
  ASSERT_TRUE(audio.ok());
  const double clip = std::ceil(audio->seconds() / 0.08) * 0.08 + 1e-9;
  for (size_t i = 0; i < words.size(); ++i) {
    EXPECT_LE(0.0, words[i].start);
    EXPECT_LE(words[i].start, words[i].end);
    EXPECT_LE(words[i].end, clip);
    if (i > 0) {
      EXPECT_LE(words[i - 1].start, words[i].start);
    }
  }
  auto same = [&](const std::vector<WordTiming>& b) {
    ASSERT_EQ(b.size(), words.size());
    for (size_t i = 0; i < words.size(); ++i) {
      EXPECT_EQ(b[i].text, words[i].text);
      EXPECT_EQ(b[i].start, words[i].start);
      EXPECT_EQ(b[i].end, words[i].end);
    }
  };
  same(RunSampledAsr(model, true).summary.words);

  auto engine = Engine::Create({.threads = 2, .max_batch = 2});
  ASSERT_TRUE(engine.ok());
  auto other = Conversation::Create(model, {.seed = 3, .engine = *engine});
  ASSERT_TRUE(other.ok());
  const TranscribeOptions o = OraclePrompt({});
  ASSERT_TRUE((*other)->AddTokens(o.prompt_before_speech).ok());
  ASSERT_TRUE((*other)->AddAudioFile(testing::DataPath("inputs/question.wav")).ok());
  ASSERT_TRUE((*other)->AddTokens(o.prompt_after_speech).ok());
  GenerateOptions og = GenerateOptions::ForAsr(*model);
  og.max_new_tokens = 40;
  og.text = {1.0f, 0};
  ASSERT_TRUE((*other)->BeginGenerate(og, {}).ok());
  const SampledAsr batched = RunSampledAsr(model, true, *engine, other->get());
  EXPECT_EQ(batched.ids, timed.ids);
  same(batched.summary.words);
}

// The transcription path carries them: with word_timestamps the segment's ids and text are unchanged and
// its words (the tiny model's greedy text has none) stay inside it; FormatTranscript's json shows them.
TEST(Transcribe, WordTimestampsInSegments) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  const std::string clip = testing::DataPath("inputs/question.wav");
  TranscribeOptions o = OraclePrompt({.max_new_tokens = 24});
  auto plain = Transcribe(model, clip, o);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  o.word_timestamps = true;
  auto r = Transcribe(model, clip, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->segments.size(), 1u);
  EXPECT_EQ(r->segments[0].ids, plain->segments[0].ids);
  EXPECT_EQ(r->segments[0].text, plain->segments[0].text);
  EXPECT_EQ(JoinWords(r->segments[0].words), NormalizeSpaces(r->segments[0].text));
  TranscriptSegment seg;
  seg.start = 1.5;
  seg.end = 2.5;
  seg.text = " hi there";
  seg.words = {{"hi", 1.5, 1.75}, {"there", 1.75, 2.5}};
  EXPECT_EQ(FormatTranscript({&seg, 1}, TranscriptFormat::kJson),
            "{\"segments\":[{\"start\":1.5,\"end\":2.5,\"text\":\" hi there\",\"words\":[{\"word\":\"hi\","
            "\"start\":1.5,\"end\":1.75},{\"word\":\"there\",\"start\":1.75,\"end\":2.5}]}]}\n");
  // Asked for words, a segment without any still carries the key (a client reads it unconditionally).
  seg.words.clear();
  EXPECT_EQ(FormatTranscript({&seg, 1}, TranscriptFormat::kJson),
            "{\"segments\":[{\"start\":1.5,\"end\":2.5,\"text\":\" hi there\"}]}\n");
  EXPECT_EQ(FormatTranscript({&seg, 1}, TranscriptFormat::kJson, /*with_words=*/true),
            "{\"segments\":[{\"start\":1.5,\"end\":2.5,\"text\":\" hi there\",\"words\":[]}]}\n");
}

// Without speech in the conversation there is nothing to time: Generate fails and says why.
TEST(Transcribe, WordTimestampsNeedSpeech) {
  auto model = Tiny();
  ASSERT_TRUE(model);
  auto conv = Conversation::Create(model);
  ASSERT_TRUE(conv.ok());
  ASSERT_TRUE((*conv)->AddTokens(OraclePrompt({}).prompt_before_speech).ok());
  GenerateOptions g = GenerateOptions::ForAsr(*model);
  g.max_new_tokens = 2;
  g.word_timestamps = true;
  auto r = (*conv)->Generate(g, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("AddAudio"), std::string::npos) << r.status().message();
}

// Grouping and times (api/word_timing.h) on an attention matrix with a known alignment: token i attends
// to frames [8i, 8i + 8) of 40, so DTW starts the five tokens at frames 0, 8, 16, 24, 32 (80 ms each);
// " Hello" + "," make one word, " wor" + "ld" another, the white-space piece ends a word, the control
// token is aligned (it ends "world") but is no word.
TEST(WordTiming, GroupsPiecesAndTimesWordsFromTheAlignment) {
  const size_t T = 5, F = 40;
  std::vector<float> rows(T * F, 0.01f);
  for (size_t i = 0; i < T; ++i) {
    for (size_t j = 8 * i; j < 8 * i + 8; ++j) rows[i * F + j] = 1.0f;
  }
  const std::vector<AlignedToken> tokens = {
      {" Hello", false}, {",", false}, {" wor", false}, {"ld", false}, {"<|im_end|>", true}};
  auto words = WordsFromAttention(rows, F, tokens, 0.08, 3.2);
  ASSERT_TRUE(words.ok()) << words.status().message();
  ASSERT_EQ(words->size(), 2u);
  EXPECT_EQ((*words)[0].text, "Hello,");
  EXPECT_DOUBLE_EQ((*words)[0].start, 0.0);
  EXPECT_DOUBLE_EQ((*words)[0].end, 16 * 0.08);
  EXPECT_EQ((*words)[1].text, "world");
  EXPECT_DOUBLE_EQ((*words)[1].start, 16 * 0.08);
  EXPECT_DOUBLE_EQ((*words)[1].end, 32 * 0.08);

  // A white-space-only piece splits "ab" from "cd"; the last word ends at the clip's end.
  const std::vector<AlignedToken> split = {{"ab", false}, {"\n", false}, {"cd", false}};
  std::vector<float> r3(3 * F, 0.01f);
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 13 * i; j < 13 * i + 13; ++j) r3[i * F + j] = 1.0f;
  }
  auto w3 = WordsFromAttention(r3, F, split, 0.08, 3.2);
  ASSERT_TRUE(w3.ok());
  ASSERT_EQ(w3->size(), 2u);
  EXPECT_EQ((*w3)[0].text, "ab");
  EXPECT_EQ((*w3)[1].text, "cd");
  EXPECT_DOUBLE_EQ((*w3)[1].start, 26 * 0.08);
  EXPECT_DOUBLE_EQ((*w3)[1].end, 3.2);
}

}  // namespace
}  // namespace lfmvox
