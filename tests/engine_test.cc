// The public Engine: conversations batched in Engine::Step produce the same text ids, audio codes
// and PCM samples (bit for bit) as each conversation generated alone on a private engine; two
// threads generating on one engine at once get the same results as one after the other; Cancel
// and TruncateSpeech through the public API; Prefill ahead of Generate changes no bit of the answer. Model:
// the oracle lfm25_tiny checkpoint with its detokenizer (tests/data/lfm25_tiny); prompt: its tts/text_ids
// trace, generated with the TTS preset's sampling (seeded) so every conversation takes its own path. The
// reference is the unbatched run, so the tolerance is zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lfmvox/lfmvox.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

struct Output {
  std::vector<int32_t> text;
  std::vector<int32_t> codes;
  std::vector<float> pcm;
  GenerateSummary summary;
};

OutputCallbacks Collect(Output& o) {
  OutputCallbacks cb;
  cb.on_text = [&o](int32_t id, std::string_view) {
    o.text.push_back(id);
    return Status::Ok();
  };
  cb.on_audio_frame = [&o](std::span<const int32_t> c, bool) {
    o.codes.insert(o.codes.end(), c.begin(), c.end());
    return Status::Ok();
  };
  cb.on_pcm = [&o](std::span<const float> p) {
    o.pcm.insert(o.pcm.end(), p.begin(), p.end());
    return Status::Ok();
  };
  return cb;
}

std::shared_ptr<const AudioModel> Model() {
  static std::shared_ptr<const AudioModel> m = [] {
    auto r = AudioModel::Load(testing::DataPath("lfm25_tiny"));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nullptr;
  }();
  return m;
}

std::vector<int32_t> Prompt() {
  std::vector<int32_t> ids;
  for (int64_t v : testing::LoadTrace("lfm25_tiny/traces/tts__text_ids.npy").ToInt64()) {
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

GenerateOptions Options(const AudioModel& m) {
  GenerateOptions o = GenerateOptions::ForTts(m);
  o.max_new_tokens = 30;
  return o;
}

void ExpectSame(const Output& a, const Output& b, const std::string& what) {
  EXPECT_EQ(a.text, b.text) << what;
  EXPECT_EQ(a.codes, b.codes) << what;
  ASSERT_EQ(a.pcm.size(), b.pcm.size()) << what;
  EXPECT_EQ(std::memcmp(a.pcm.data(), b.pcm.data(), a.pcm.size() * sizeof(float)), 0) << what;
  EXPECT_EQ(a.summary.pcm_samples, a.pcm.size()) << what;
}

// Each seed alone, on a private engine.
Output Alone(uint64_t seed) {
  auto c = Conversation::Create(Model(), {.threads = 2, .context = 256, .seed = seed});
  EXPECT_TRUE(c.ok());
  Output o;
  EXPECT_TRUE((*c)->AddTokens(Prompt()).ok());
  auto r = (*c)->Generate(Options(*Model()), Collect(o));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) o.summary = *r;
  return o;
}

TEST(Engine, BatchedConversationsEqualEachAlone) {
  ASSERT_TRUE(Model());
  const std::vector<uint64_t> seeds = {11, 12, 13};
  std::vector<Output> alone;
  for (uint64_t s : seeds) alone.push_back(Alone(s));
  ASSERT_GT(alone[0].codes.size(), 0u) << "the TTS prompt speaks";
  EXPECT_NE(alone[0].codes, alone[1].codes) << "different seeds take different paths";

  auto engine = Engine::Create({.threads = 2, .max_batch = 4, .prefill_rows = 16, .max_clip_seconds = 1});
  ASSERT_TRUE(engine.ok());
  std::vector<std::unique_ptr<Conversation>> cs;
  std::vector<Output> out(seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i) {
    auto c = Conversation::Create(Model(), {.context = 256, .seed = seeds[i], .engine = *engine});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE((*c)->AddTokens(Prompt()).ok());
    cs.push_back(std::move(c).value());
  }
  std::vector<Conversation*> ptrs;
  for (auto& c : cs) ptrs.push_back(c.get());
  // Conversation i starts at step 3i, so its prefill shares passes with the others' decode rows.
  for (int step = 0;; ++step) {
    for (size_t i = 0; i < cs.size(); ++i) {
      if (step == static_cast<int>(3 * i)) {
        ASSERT_TRUE(cs[i]->BeginGenerate(Options(*Model()), Collect(out[i])).ok());
      }
    }
    auto left = (*engine)->Step(ptrs);
    ASSERT_TRUE(left.ok()) << left.status().ToString();
    if (*left == 0 && step >= static_cast<int>(3 * (cs.size() - 1))) break;
    ASSERT_LT(step, 200);
  }
  for (size_t i = 0; i < cs.size(); ++i) {
    auto r = cs[i]->FinishGenerate();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    out[i].summary = *r;
    ExpectSame(out[i], alone[i], "conversation " + std::to_string(i));
  }
  // A conversation of another engine is refused, and so is a batch over max_batch.
  auto other = Conversation::Create(Model(), {.context = 64});
  ASSERT_TRUE(other.ok());
  Conversation* foreign[1] = {other->get()};
  EXPECT_FALSE((*engine)->Step(foreign).ok());
  std::vector<Conversation*> five(5, ptrs[0]);
  EXPECT_FALSE((*engine)->Step(five).ok());
}

// Conversation::Prefill runs the positions added so far (all but the last) ahead of Generate, as a live
// conversation does while the user speaks: the next Generate gives the same ids, codes and PCM bit for bit
// (a prefill in chunks equals one pass; here in passes of 16 rows, then the rest) on the first turn and on
// more positions added after the reply; cached_positions shows the work done; a second Prefill has nothing to
// do; Prefill while generating is refused and changes nothing. Reference: the same turns without Prefill.
TEST(Engine, PrefillAheadGivesTheSameOutput) {
  ASSERT_TRUE(Model());
  const std::vector<int32_t> prompt = Prompt();
  ASSERT_GT(prompt.size(), 16u) << "the prefill takes more than one pass of 16 rows";
  const std::vector<int32_t> second = {prompt.begin(), prompt.begin() + 7};
  auto turns = [&](bool ahead, Output* first_out, Output* second_out) {
    auto engine = Engine::Create({.threads = 2, .max_batch = 1, .prefill_rows = 16, .max_clip_seconds = 1});
    ASSERT_TRUE(engine.ok());
    auto c = Conversation::Create(Model(), {.context = 256, .seed = 21, .engine = *engine});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    Conversation& conv = **c;
    ASSERT_TRUE(conv.Prefill().ok()) << "an empty conversation has nothing to prefill";
    EXPECT_EQ(conv.context_stats().cached_positions, 0u);
    ASSERT_TRUE(conv.AddTokens(prompt).ok());
    if (ahead) {
      ASSERT_TRUE(conv.Prefill().ok());
      EXPECT_EQ(conv.context_stats().cached_positions, prompt.size() - 1);
      ASSERT_TRUE(conv.Prefill().ok());
      EXPECT_EQ(conv.context_stats().cached_positions, prompt.size() - 1);
    } else {
      EXPECT_EQ(conv.context_stats().cached_positions, 0u);
    }
    ASSERT_TRUE(conv.BeginGenerate(Options(*Model()), Collect(*first_out)).ok());
    const size_t before = conv.context_stats().cached_positions;
    const Status busy = conv.Prefill();
    EXPECT_EQ(busy.code(), StatusCode::kInvalidArgument) << busy.ToString();
    EXPECT_EQ(conv.context_stats().cached_positions, before);
    Conversation* self[1] = {&conv};
    while (conv.generating()) ASSERT_TRUE((*engine)->Step(self).ok());
    auto r = conv.FinishGenerate();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    first_out->summary = *r;
    // The next turn (ids of the prompt's: the tiny model's vocabulary has no chat markers) after the
    // reply; only the reply's last item and the new positions are uncached.
    ASSERT_TRUE(conv.AddTokens(second).ok());
    const size_t positions = conv.context_stats().positions;
    if (ahead) {
      ASSERT_TRUE(conv.Prefill().ok());
      EXPECT_EQ(conv.context_stats().cached_positions, positions - 1);
    } else {
      EXPECT_LT(conv.context_stats().cached_positions, positions - second.size());
    }
    auto r2 = conv.Generate(Options(*Model()), Collect(*second_out));
    ASSERT_TRUE(r2.ok()) << r2.status().ToString();
    second_out->summary = *r2;
  };
  Output cold1, cold2, warm1, warm2;
  turns(false, &cold1, &cold2);
  turns(true, &warm1, &warm2);
  ASSERT_GT(cold1.codes.size(), 0u) << "the TTS prompt speaks";
  ASSERT_GT(cold2.text.size() + cold2.codes.size(), 0u);
  ExpectSame(warm1, cold1, "first turn");
  ExpectSame(warm2, cold2, "second turn");
}

// Prefill ahead over speech in: a prompt holding an encoded clip (AUDIO_IN positions) between text, prefilled
// ahead, gives the interleaved answer (text ids, codes, PCM) of the same prompt without it, bit for bit.
TEST(Engine, PrefillAheadOverSpeechInGivesTheSameAnswer) {
  ASSERT_TRUE(Model());
  const std::vector<int32_t> prompt = Prompt();
  std::vector<float> clip(12000);  // 0.75 s at 16 kHz: a chirp
  for (size_t i = 0; i < clip.size(); ++i) {
    const double t = static_cast<double>(i) / 16000;
    clip[i] = static_cast<float>(0.3 * std::sin(2 * 3.14159265358979 * (200 + 300 * t) * t));
  }
  auto answer = [&](bool ahead, Output* out) {
    auto c = Conversation::Create(Model(), {.threads = 2, .context = 256, .seed = 5});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    Conversation& conv = **c;
    ASSERT_TRUE(conv.AddTokens({prompt.data(), 10}).ok());
    ASSERT_TRUE(conv.AddAudio(clip, 16000).ok());
    const size_t with_clip = conv.context_stats().positions;
    ASSERT_GT(with_clip, 11u) << "the clip adds positions";
    if (ahead) {
      ASSERT_TRUE(conv.Prefill().ok());
      EXPECT_EQ(conv.context_stats().cached_positions, with_clip - 1);
    }
    ASSERT_TRUE(conv.AddTokens({prompt.data() + 10, prompt.size() - 10}).ok());
    GenerateOptions o = GenerateOptions::ForSpeechToSpeech(*Model());
    o.max_new_tokens = 30;
    auto r = conv.Generate(o, Collect(*out));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    out->summary = *r;
  };
  Output cold, warm;
  answer(false, &cold);
  answer(true, &warm);
  ASSERT_GT(cold.text.size() + cold.codes.size(), 0u);
  ExpectSame(warm, cold, "speech in, prefilled ahead");
}

TEST(Engine, ConcurrentGenerateOnOneEngineEqualsSequential) {
  ASSERT_TRUE(Model());
  const Output a = Alone(21), b = Alone(22);
  auto engine = Engine::Create({.threads = 2, .max_batch = 2, .max_clip_seconds = 1});
  ASSERT_TRUE(engine.ok());
  Output got[2];
  auto run = [&](int i, uint64_t seed) {
    auto c = Conversation::Create(Model(), {.context = 256, .seed = seed, .engine = *engine});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->AddTokens(Prompt()).ok());
    auto r = (*c)->Generate(Options(*Model()), Collect(got[i]));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    got[i].summary = *r;
  };
  std::thread t0(run, 0, 21), t1(run, 1, 22);
  t0.join();
  t1.join();
  ExpectSame(got[0], a, "thread 0");
  ExpectSame(got[1], b, "thread 1");
}

TEST(Engine, CancelAndTruncateSpeech) {
  ASSERT_TRUE(Model());
  auto c = Conversation::Create(Model(), {.context = 256, .seed = 5});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->AddTokens(Prompt()).ok());
  Output o;
  OutputCallbacks cb = Collect(o);
  int frames = 0;
  Conversation* conv = c->get();
  cb.on_audio_frame = [&](std::span<const int32_t> codes, bool) {
    o.codes.insert(o.codes.end(), codes.begin(), codes.end());
    if (++frames == 3) conv->Cancel();
    return Status::Ok();
  };
  auto r = (*c)->Generate(Options(*Model()), cb);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(frames, 3);
  EXPECT_EQ(r->audio_frames, 3);
  // Three frames decoded and flushed: 3 × 1920 samples.
  EXPECT_EQ(o.pcm.size(), 3u * 1920u);

  // The listener heard 1.5 frames: keep 2 frames, drop the third and what followed.
  const Output before = o;
  EXPECT_FALSE((*c)->TruncateSpeech(4 * 1920).ok()) << "more than was spoken";
  ASSERT_TRUE((*c)->TruncateSpeech(1920 + 960).ok());
  // The history now holds the prompt, the text before speech and 2 frames: continuing it greedily
  // gives exactly what a new conversation given that history gives.
  GenerateOptions greedy = Options(*Model());
  greedy.audio = {};
  greedy.max_new_tokens = 12;
  Output next;
  auto r2 = (*c)->Generate(greedy, Collect(next));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  auto f = Conversation::Create(Model(), {.context = 256, .seed = 99});
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->AddTokens(Prompt()).ok());
  ASSERT_TRUE((*f)->AddTokens(before.text).ok());
  ASSERT_TRUE((*f)->AddAudioOut({before.codes.data(), 2 * 8}).ok());
  Output fresh;
  auto r3 = (*f)->Generate(greedy, Collect(fresh));
  ASSERT_TRUE(r3.ok());
  EXPECT_GT(next.text.size() + next.codes.size(), 0u);
  ExpectSame(next, fresh, "after truncation");
}

}  // namespace
}  // namespace lfmvox
