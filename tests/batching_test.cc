// Sessions batched in one step equal each session run alone, bit for bit, on the oracle models
// (tests/data/lfm25_{tiny,small}): the generated items (greedy and seeded sampling) and every
// byte of the backbone caches. The prompts are the oracle's: tts/text_ids (text only, sequential:
// text then speech), prefill and prefill_speech (text + audio-in rows from adapter/out and
// adapter_speech/out, interleaved). Also: a prefill in chunks of 1, 7 or all rows equals one pass;
// a generation step allocates nothing once warm; Truncate rebuilds the caches of the kept history
// exactly; Cancel stops a generation at the next step. The reference is the unbatched session,
// so the tolerance is zero: the MatMul contract (ops.h) makes every row independent of the batch.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "alloc_counter.h"
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

// One of the test's conversations: its prompt and how it generates.
struct Spec {
  int prompt;  // 0: tts text ids, 1: prefill (text + audio in), 2: prefill_speech
  GenerationMode mode;
  bool sampled;  // seeded sampling (TTS presets) instead of greedy
  uint64_t seed;
  int max_new;
};

void AppendPrompt(Lfm25Session& s, const std::string& name, int prompt) {
  if (prompt == 0) {
    ASSERT_TRUE(s.AppendTokens(TraceIds(name + "/traces/tts__text_ids.npy")).ok());
    return;
  }
  const std::string group = prompt == 1 ? "prefill" : "prefill_speech";
  const std::string adapter = prompt == 1 ? "adapter__out" : "adapter_speech__out";
  const std::vector<float> rows = LoadTrace(name + "/traces/" + adapter + ".npy").ToFloat();
  testing::AppendOraclePrompt(s, name, group, [&] { return s.AppendAudioIn(rows); });
}

GenerationOptions Options(const Spec& sp) {
  GenerationOptions o{.mode = sp.mode, .max_new_tokens = sp.max_new};
  if (sp.sampled) {
    o.text = SamplingParams{0.7f, 8, 1.0f, 0};
    o.audio = SamplingParams::Lfm25TtsAudio();
  }
  return o;
}

void ExpectSameCaches(const Lfm25Session& a, const Lfm25Session& b, const std::string& what);

class Batching : public ::testing::TestWithParam<std::string> {};

// N = 1..4 sessions in one worker, started at different steps (so one session's prefill runs in
// the same pass as the others' decode rows), mixing text-only and audio prompts, sequential and
// interleaved, greedy and sampled, equal to the same sessions run alone.
TEST_P(Batching, BatchedSessionsEqualEachAlone) {
  const std::string name = GetParam();
  const Lfm25AudioModel& m = Model(name);
  const std::vector<Spec> specs = {{0, GenerationMode::kSequential, false, 1, 24},
                                   {1, GenerationMode::kInterleaved, false, 2, 20},
                                   {0, GenerationMode::kSequential, true, 3, 18},
                                   {2, GenerationMode::kInterleaved, true, 4, 22}};
  for (int threads : {1, 2}) {
    ThreadTeam team(threads);
    for (size_t n = 1; n <= specs.size(); ++n) {
      // Alone: each on its own worker, one Generate call.
      std::vector<std::unique_ptr<Lfm25Session>> alone;
      std::vector<RowSink> alone_rows(n);
      for (size_t i = 0; i < n; ++i) {
        auto s = Lfm25Session::Create(m, {.threads = threads, .context = 256, .seed = specs[i].seed});
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        AppendPrompt(**s, name, specs[i].prompt);
        auto r = (*s)->Generate(Options(specs[i]), alone_rows[i], team);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        alone.push_back(std::move(s).value());
      }
      // Batched: one shared worker whose passes take 16 rows, so prompts run in several passes.
      auto worker = Lfm25Worker::Create(
          m, {.max_batch = 4, .max_rows = 16, .max_context = 256, .threads = threads, .max_clip_seconds = 1});
      ASSERT_TRUE(worker.ok()) << worker.status().ToString();
      std::shared_ptr<Lfm25Worker> shared = std::move(worker).value();
      std::vector<std::unique_ptr<Lfm25Session>> batched;
      std::vector<RowSink> rows(n);
      for (size_t i = 0; i < n; ++i) {
        auto s = Lfm25Session::Create(
            m, {.context = 256, .prefill_chunk = 8 + 4 * i, .seed = specs[i].seed, .worker = shared});
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        AppendPrompt(**s, name, specs[i].prompt);
        batched.push_back(std::move(s).value());
      }
      std::vector<Lfm25Session*> ptrs;
      for (auto& s : batched) ptrs.push_back(s.get());
      for (int step = 0; step < 64; ++step) {
        // Session i joins at step 2i.
        for (size_t i = 0; i < n; ++i) {
          if (step == static_cast<int>(2 * i)) {
            ASSERT_TRUE(batched[i]->BeginGeneration(Options(specs[i]), rows[i]).ok());
          }
        }
        ASSERT_TRUE(StepSessions(ptrs, *shared, team).ok());
      }
      for (size_t i = 0; i < n; ++i) {
        const std::string what = name + " n=" + std::to_string(n) + " session " + std::to_string(i) +
                                 " threads " + std::to_string(threads);
        EXPECT_FALSE(batched[i]->generating()) << what;
        EXPECT_TRUE(batched[i]->generation_status().ok()) << what;
        ASSERT_EQ(rows[i].rows.size(), alone_rows[i].rows.size()) << what;
        EXPECT_GT(rows[i].rows.size(), 0u);
        for (size_t k = 0; k < rows[i].rows.size(); ++k)
          EXPECT_EQ(rows[i].rows[k], alone_rows[i].rows[k]) << what;
        ExpectSameCaches(*batched[i], *alone[i], what);
      }
    }
  }
}

void ExpectSameCaches(const Lfm25Session& a, const Lfm25Session& b, const std::string& what) {
  ASSERT_EQ(a.positions(), b.positions()) << what;
  ASSERT_EQ(a.cached_positions(), b.cached_positions()) << what;
  for (size_t i = 0; i < a.positions(); ++i) {
    ASSERT_EQ(a.modality(i), b.modality(i)) << what << " position " << i;
  }
  const Lfm2State& sa = a.backbone_state();
  const Lfm2State& sb = b.backbone_state();
  const Lfm2Config& c = a.model().config().lfm;
  const size_t H = static_cast<size_t>(c.hidden_size), K = static_cast<size_t>(c.conv_kernel);
  for (size_t li = 0; li < c.layers.size(); ++li) {
    if (c.layers[li] == LayerKind::kConv) {
      EXPECT_EQ(std::memcmp(sa.conv_state(li), sb.conv_state(li), (K - 1) * H * sizeof(float)), 0)
          << what << " conv state of layer " << li;
    } else {
      const KvCache& ka = sa.kv_cache(li);
      const KvCache& kb = sb.kv_cache(li);
      ASSERT_EQ(ka.len, kb.len) << what;
      const size_t n = ka.len * ka.k.size() / ka.capacity;
      EXPECT_EQ(std::memcmp(ka.k.data(), kb.k.data(), n * sizeof(float)), 0)
          << what << " keys of layer " << li;
      EXPECT_EQ(std::memcmp(ka.v.data(), kb.v.data(), n * sizeof(float)), 0)
          << what << " values of layer " << li;
    }
  }
}

// A prompt prefilled in chunks of 1, 7 and all its rows gives the same last hidden state and
// caches as one pass, bit for bit.
TEST_P(Batching, PrefillChunksEqualOnePass) {
  const std::string name = GetParam();
  const Lfm25AudioModel& m = Model(name);
  const size_t H = static_cast<size_t>(m.config().lfm.hidden_size);
  ThreadTeam team(2);
  for (int prompt : {0, 1}) {
    std::vector<std::unique_ptr<Lfm25Session>> sessions;
    std::vector<std::vector<float>> last;
    for (size_t chunk : {size_t{256}, size_t{1}, size_t{7}}) {
      auto s = Lfm25Session::Create(m, {.threads = 2, .context = 256, .prefill_chunk = chunk});
      ASSERT_TRUE(s.ok());
      AppendPrompt(**s, name, prompt);
      ASSERT_GT((*s)->positions(), 7u);
      auto h = (*s)->Prefill(team);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      last.emplace_back(*h, *h + H);
      sessions.push_back(std::move(s).value());
    }
    for (size_t i = 1; i < sessions.size(); ++i) {
      const std::string what = name + " prompt " + std::to_string(prompt) + " chunking " + std::to_string(i);
      EXPECT_EQ(std::memcmp(last[0].data(), last[i].data(), H * sizeof(float)), 0) << what;
      ExpectSameCaches(*sessions[0], *sessions[i], what);
    }
  }
}

// Once warm (the sampler and history reserved), a generation step of two batched sessions
// (sampled audio, 2 threads) makes no heap allocation: the backbone decode row, the text head,
// the depthformer frame and the sampler all run in scratch sized at creation.
TEST_P(Batching, StepAllocatesNothingOnceWarm) {
  const std::string name = GetParam();
  const Lfm25AudioModel& m = Model(name);
  ThreadTeam team(2);
  auto worker = Lfm25Worker::Create(
      m, {.max_batch = 2, .max_rows = 32, .max_context = 256, .threads = 2, .max_clip_seconds = 1});
  ASSERT_TRUE(worker.ok());
  std::shared_ptr<Lfm25Worker> shared = std::move(worker).value();
  // Sinks that only count, into memory reserved up front.
  struct Counter : GenerationSink {
    Status OnText(int32_t) override {
      ++items;
      return Status::Ok();
    }
    Status OnAudioFrame(std::span<const int32_t>, bool) override {
      ++items;
      return Status::Ok();
    }
    int items = 0;
  };
  Counter sinks[2];
  std::unique_ptr<Lfm25Session> s[2];
  for (int i = 0; i < 2; ++i) {
    auto r = Lfm25Session::Create(m, {.context = 256, .prefill_chunk = 32, .seed = 9u + i, .worker = shared});
    ASSERT_TRUE(r.ok());
    s[i] = std::move(r).value();
    AppendPrompt(*s[i], name, i);
    ASSERT_TRUE(
        s[i]->BeginGeneration(Options({i, GenerationMode::kInterleaved, true, 0, 40}), sinks[i]).ok());
  }
  Lfm25Session* ptrs[2] = {s[0].get(), s[1].get()};
  for (int step = 0; step < 3; ++step)
    ASSERT_TRUE(StepSessions(ptrs, *shared, team).ok());  // prefill + warm-up
  int steps = 0;
  while (s[0]->generating() || s[1]->generating()) {
    const long before = testing::AllocationCount();
    ASSERT_TRUE(StepSessions(ptrs, *shared, team).ok());
    EXPECT_EQ(testing::AllocationCount() - before, 0) << "step " << steps;
    ++steps;
  }
  EXPECT_GT(steps, 20);
  for (int i = 0; i < 2; ++i) {
    const GenerationResult& g = s[i]->generation();
    EXPECT_EQ(sinks[i].items, g.text_tokens + g.audio_frames) << "session " << i;
    EXPECT_TRUE(g.ended || g.text_tokens + g.audio_frames == 40) << "session " << i;
  }
}

// Truncate keeps a prefix and rebuilds the caches from it: the next prefill equals a fresh
// session given that prefix, bit for bit. DropTrailingAudioOut cuts at the audio frames.
TEST_P(Batching, TruncateRebuildsTheKeptHistory) {
  const std::string name = GetParam();
  const Lfm25AudioModel& m = Model(name);
  const size_t H = static_cast<size_t>(m.config().lfm.hidden_size);
  ThreadTeam team(1);
  auto s = Lfm25Session::Create(m, {.context = 256, .prefill_chunk = 16});
  ASSERT_TRUE(s.ok());
  AppendPrompt(**s, name, 0);
  RowSink sink;
  ASSERT_TRUE((*s)->Generate({.max_new_tokens = 24}, sink, team).ok());
  const size_t prompt = TraceIds(name + "/traces/tts__text_ids.npy").size();
  size_t frames = 0;
  for (const auto& r : sink.rows) frames += r[0] == 1;
  ASSERT_GE(frames, 3u) << "tts/sequential speaks within 24 items";
  // Drop the last 2 frames and whatever followed them.
  size_t cut = (*s)->positions();
  for (size_t seen = 0; seen < 2;) {
    if ((*s)->modality(--cut) == Modality::kAudioOut) ++seen;
  }
  ASSERT_TRUE((*s)->DropTrailingAudioOut(2).ok());
  ASSERT_EQ((*s)->positions(), cut);
  EXPECT_LT((*s)->cached_positions(), cut);  // caches are rebuilt, not rolled back
  auto h = (*s)->Prefill(team);
  ASSERT_TRUE(h.ok());
  std::vector<float> got(*h, *h + H);
  // The same prefix appended to a fresh session.
  auto f = Lfm25Session::Create(m, {.context = 256, .prefill_chunk = 16});
  ASSERT_TRUE(f.ok());
  for (size_t i = 0; i < cut; ++i) {
    if ((*s)->modality(i) == Modality::kText) {
      const int32_t id = (*s)->token(i);
      ASSERT_TRUE((*f)->AppendTokens({&id, 1}).ok());
    } else {
      ASSERT_TRUE((*f)->AppendAudioOut((*s)->audio_codes(i)).ok());
    }
  }
  auto hf = (*f)->Prefill(team);
  ASSERT_TRUE(hf.ok());
  EXPECT_EQ(std::memcmp(got.data(), *hf, H * sizeof(float)), 0);
  ExpectSameCaches(**s, **f, "truncated");
  EXPECT_GT(cut, prompt);
  EXPECT_FALSE((*s)->Truncate(cut + 1).ok());
  EXPECT_FALSE((*s)->DropTrailingAudioOut(frames + 1).ok());
}

// Cancel() from inside a callback stops the generation at the next step, keeping what was produced.
TEST_P(Batching, CancelStopsAtTheNextStep) {
  const std::string name = GetParam();
  const Lfm25AudioModel& m = Model(name);
  ThreadTeam team(1);
  auto s = Lfm25Session::Create(m, {.context = 256});
  ASSERT_TRUE(s.ok());
  AppendPrompt(**s, name, 0);
  struct Stopper : RowSink {
    Lfm25Session* session = nullptr;
    Status OnText(int32_t id) override {
      if (rows.size() == 2) session->Cancel();
      return RowSink::OnText(id);
    }
    Status OnAudioFrame(std::span<const int32_t> codes, bool eoa) override {
      if (rows.size() == 2) session->Cancel();
      return RowSink::OnAudioFrame(codes, eoa);
    }
  } sink;
  sink.session = s->get();
  const size_t before = (*s)->positions();
  auto r = (*s)->Generate({.max_new_tokens = 24}, sink, team);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(sink.rows.size(), 3u);
  EXPECT_EQ((*s)->positions(), before + 3);
  // The next generation starts clean.
  RowSink again;
  auto r2 = (*s)->Generate({.max_new_tokens = 2}, again, team);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->cancelled);
  EXPECT_EQ(again.rows.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Oracle, Batching, ::testing::Values("lfm25_tiny", "lfm25_small"));

}  // namespace
}  // namespace lfmvox
