// Hostile and careless input through the public API: each test names the kind of input it covers and the
// oracle checkpoint it starts from (tests/data/, see tests/data/README.md). The CLI side of the same kinds is
// in cli_test.cc.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lfmvox/lfmvox.h"
#include "lfmvox/lfmvox_c.h"
#include "poison_util.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The oracle's tts prompt ids (tests/data/lfm25_tiny/traces/tts__text_ids.npy).
std::vector<int32_t> TtsPrompt() {
  std::vector<int32_t> ids;
  for (int64_t v : testing::LoadTrace("lfm25_tiny/traces/tts__text_ids.npy").ToInt64()) {
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// ---------------------------------------------------------------------------
// Non-finite weights. lfm25_tiny with a NaN at element 1000 of layer 0's w1 ([384, 128] BF16:
// index [7, 104]); lfm25_detok with +inf at element 5 of its layer 0 w1 ([128, 512] BF16).

const char kBackboneTensor[] = "lfm.layers.0.feed_forward.w1.weight";

TEST(NonFiniteWeights, BackboneNanFailsTheLoadNamingTheTensor) {
  const std::string dir =
      testing::PoisonedCopy("api_backbone", testing::DataPath("lfm25_tiny"), kBackboneTensor, 1000, NAN);
  Result<std::shared_ptr<const AudioModel>> m = AudioModel::Load(dir);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
  const std::string& msg = m.status().message();
  EXPECT_TRUE(Has(msg, kBackboneTensor)) << msg;
  EXPECT_TRUE(Has(msg, "NaN at element 1000 (index [7, 104])")) << msg;
}

TEST(NonFiniteWeights, BackboneNanWithTheCheckSkippedStopsGenerationWithAnError) {
  const std::string dir =
      testing::PoisonedCopy("api_backbone_skip", testing::DataPath("lfm25_tiny"), kBackboneTensor, 1000, NAN);
  Result<std::shared_ptr<const AudioModel>> m = AudioModel::Load(dir, {.check_weights = false});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto c = Conversation::Create(*m);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->AddTokens(TtsPrompt()).ok());
  int items = 0;
  OutputCallbacks out;
  out.on_text = [&](int32_t, std::string_view) {
    ++items;
    return Status::Ok();
  };
  out.on_audio_frame = [&](std::span<const int32_t>, bool) {
    ++items;
    return Status::Ok();
  };
  GenerateOptions o;  // greedy text and audio: the argmax path, which used to pick <|pad|> from NaN
  o.max_new_tokens = 16;
  Result<GenerateSummary> r = (*c)->Generate(o, out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(r.status().message(), "non-finite")) << r.status().message();
  EXPECT_EQ(items, 0) << "no token may come out of NaN logits";
  // Sampled audio (the TTS preset) is refused the same way.
  (*c)->Reset();
  ASSERT_TRUE((*c)->AddTokens(TtsPrompt()).ok());
  Result<GenerateSummary> tts = (*c)->Generate(GenerateOptions::ForTts(**m), out);
  ASSERT_FALSE(tts.ok());
  EXPECT_TRUE(Has(tts.status().message(), "non-finite")) << tts.status().message();
  EXPECT_EQ(items, 0);
}

const char kDetokTensor[] = "lfm.layers.0.feed_forward.w1.weight";

TEST(NonFiniteWeights, DetokenizerInfFailsTheLoadNamingTheTensor) {
  const std::string detok =
      testing::PoisonedCopy("api_detok", testing::DataPath("lfm25_detok"), kDetokTensor, 5, INFINITY);
  Result<std::shared_ptr<const DetokenizerModel>> d = DetokenizerModel::Load(detok);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Has(d.status().message(), kDetokTensor)) << d.status().message();
  EXPECT_TRUE(Has(d.status().message(), "+inf at element 5 (index [0, 5])")) << d.status().message();
  // The whole model with that detokenizer: the same error, through AudioModel.
  const std::string whole = testing::PoisonedCopy("api_whole", testing::DataPath("lfm25_tiny"),
                                                  kBackboneTensor, 0, 0.0f, {{"audio_detokenizer", detok}});
  Result<std::shared_ptr<const AudioModel>> m = AudioModel::Load(whole);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Has(m.status().message(), "audio_detokenizer")) << m.status().message();
  EXPECT_TRUE(Has(m.status().message(), kDetokTensor)) << m.status().message();
}

TEST(NonFiniteWeights, DetokenizerInfWithTheCheckSkippedFailsTheStep) {
  const std::string detok =
      testing::PoisonedCopy("api_detok_skip", testing::DataPath("lfm25_detok"), kDetokTensor, 5, INFINITY);
  Result<std::shared_ptr<const DetokenizerModel>> d = DetokenizerModel::Load(detok, {.check_weights = false});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto s = DetokenizerStream::Create(*d);
  ASSERT_TRUE(s.ok());
  std::vector<int32_t> codes((*d)->num_codebooks(), 7);
  std::vector<float> pcm((*d)->samples_per_frame());
  Status failed;
  for (int f = 0; f < 8 && failed.ok(); ++f) {
    Result<size_t> n = (*s)->Step(codes, pcm);
    if (!n.ok()) failed = n.status();
  }
  ASSERT_FALSE(failed.ok()) << "PCM from an inf weight must not pass as speech";
  EXPECT_EQ(failed.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(failed.message(), "non-finite")) << failed.message();
  // Through a whole model (lfm25_tiny with this detokenizer), TTS with speech decoded: the generation stops
  // on the first non-finite PCM instead of handing silence to on_pcm.
  const std::string whole = testing::PoisonedCopy("api_whole_skip", testing::DataPath("lfm25_tiny"),
                                                  kBackboneTensor, 0, 0.0f, {{"audio_detokenizer", detok}});
  auto m = AudioModel::Load(whole, {.check_weights = false});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto c = Conversation::Create(*m);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->AddTokens(TtsPrompt()).ok());
  size_t pcm_samples = 0;
  OutputCallbacks out;
  out.on_pcm = [&](std::span<const float> p) {
    pcm_samples += p.size();
    return Status::Ok();
  };
  GenerateOptions o = GenerateOptions::ForTts(**m);
  o.audio.temperature = 0;
  o.max_new_tokens = 64;
  Result<GenerateSummary> r = (*c)->Generate(o, out);
  ASSERT_FALSE(r.ok()) << "frames decoded: " << pcm_samples;
  EXPECT_TRUE(Has(r.status().message(), "the decoded speech holds")) << r.status().message();
  EXPECT_EQ(pcm_samples, 0u);
}

// ---------------------------------------------------------------------------
// A pre-tokenizer regex that backtracks super-linearly. lfm25_tiny with its Split pattern replaced
// by `a(?=.*.*.*!)`: on 1600 a's each start position's lookahead costs ~n^3 steps (> 60 s in all with a
// per-call limit); the per-text budget (10M + 1024 steps per byte and pass) stops it with an error. The
// oracle's own pattern still encodes a long prose text (its golden encodings are in tokenizer_test).

TEST(RegexBudget, NestedLookaheadFailsWithTheBudgetError) {
  const std::string dir = testing::PatternCopy("api", testing::DataPath("lfm25_tiny"), "a(?=.*.*.*!)");
  auto m = AudioModel::Load(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto c = Conversation::Create(*m);
  ASSERT_TRUE(c.ok());
  const Status s = (*c)->AddText(std::string(1600, 'a'));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  // Two pre-tokenizer passes (Split, ByteLevel): 10'000'000 + 2 * 1024 * 1600 steps.
  EXPECT_TRUE(Has(s.message(), "budget of 13276800 match steps for a 1600-byte text")) << s.message();
  // A short text under the same pattern is fine (the budget is per text, not a blanket refusal).
  EXPECT_TRUE((*c)->AddText("aaaa!").ok());
}

// ---------------------------------------------------------------------------
// Exceptions never escape. A child process with its address space capped (RLIMIT_AS) 48 MiB
// above what it uses asks for a conversation of 128 000 positions on lfm25_tiny: ~190 MiB of caches and
// history, inside the memory budget (the machine's memory) but beyond the cap, so an allocation throws
// std::bad_alloc; the public API must return kOutOfMemory (C API: LFMVOX_NO_MEMORY) with what to lower,
// where it used to terminate the process.

// Runs `body` in a forked child under the cap; returns the child's exit code (128 + signal if killed).
template <typename F>
int InChildWithCappedMemory(F body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    long pages = 0, page = sysconf(_SC_PAGESIZE);
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t cap = static_cast<rlim_t>(pages) * page + (rlim_t{48} << 20);
    const rlimit r{cap, cap};
    if (pages == 0 || setrlimit(RLIMIT_AS, &r) != 0) _exit(90);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Exceptions, BadAllocBecomesOutOfMemoryThroughTheCppApi) {
  auto m = AudioModel::Load(testing::DataPath("lfm25_tiny"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int rc = InChildWithCappedMemory([&] {
    auto c = Conversation::Create(*m, {.context = 128000});
    if (c.ok()) return 10;
    if (c.status().code() != StatusCode::kOutOfMemory) return 11;
    if (!Has(c.status().message(), "Conversation::Create ran out of memory")) return 12;
    if (!Has(c.status().message(), "--context")) return 13;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "10: created, 11: another code, 12/13: another message, 134: aborted";
  // The parent, uncapped, creates the same conversation.
  EXPECT_TRUE(Conversation::Create(*m, {.context = 128000}).ok());
}

TEST(Exceptions, BadAllocBecomesNoMemoryThroughTheCApi) {
  lfmvox_model* model = nullptr;
  ASSERT_EQ(lfmvox_model_load(testing::DataPath("lfm25_tiny").c_str(), &model), LFMVOX_OK)
      << lfmvox_last_error();
  const int rc = InChildWithCappedMemory([&] {
    lfmvox_conversation_options o;
    lfmvox_conversation_options_init(&o);
    o.context = 128000;
    lfmvox_conversation* c = nullptr;
    const int code = lfmvox_conversation_create(model, &o, &c);
    if (code == LFMVOX_OK) return 10;
    if (code != LFMVOX_NO_MEMORY) return 11;
    if (!Has(lfmvox_last_error(), "ran out of memory")) return 12;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "10: created, 11: another code, 12: another message, 134: aborted";
  lfmvox_model_free(model);
}

// ---------------------------------------------------------------------------
// Item 1: the session's total state is checked against the memory budget before anything is allocated.
// lfm25_tiny (hidden 128, 2 attention layers of 2 KV heads of 32, 8 codebooks): 4096 positions hold
// 4 MiB of K/V caches (2 layers * 2 * 4096 * 64 floats) and 2.2 MiB of history (4096 * (8 + 32 + 512)
// bytes); with LFMVOX_MEMORY_LIMIT=4M the conversation is refused with the sizes and the advice, and a
// context of 256 positions fits.

TEST(SessionBudget, ContextBeyondTheLimitIsRefusedWithTheSizes) {
  auto m = AudioModel::Load(testing::DataPath("lfm25_tiny"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  setenv("LFMVOX_MEMORY_LIMIT", "4M", 1);
  auto big = Conversation::Create(*m, {.context = 4096});
  auto small = Conversation::Create(*m, {.context = 256});
  unsetenv("LFMVOX_MEMORY_LIMIT");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
  const std::string& msg = big.status().message();
  EXPECT_TRUE(Has(msg, "a conversation of 4096 positions needs")) << msg;
  EXPECT_TRUE(Has(msg, "K/V caches 4.0 MiB")) << msg;
  EXPECT_TRUE(Has(msg, "history 2.2 MiB")) << msg;
  EXPECT_TRUE(Has(msg, "memory limit of 4.0 MiB")) << msg;
  EXPECT_TRUE(Has(msg, "--context")) << msg;
  EXPECT_TRUE(small.ok()) << small.status().ToString();
}

}  // namespace
}  // namespace lfmvox
