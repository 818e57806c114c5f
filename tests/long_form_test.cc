// Long-form TTS (SpeakText) and endless conversations (ContextPolicy::kDropOldest) through the public
// API, on demo checkpoints lfmvox-make-checkpoint writes (LFM2.5-Audio layout, random weights, the real
// tokenizer; the TTS one steered so its greedy TTS answer to "Hello there." is speech). References:
// SpeakText's stream equals each sentence spoken alone on a fresh conversation of the same seed, with
// the documented fades and gaps applied (the same float arithmetic, so the tolerance is zero); a
// conversation after a drop continues exactly as a fresh one given the kept history (greedy, bit for bit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lfmvox/lfmvox.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

std::shared_ptr<const AudioModel> Demo(bool steered) {
  const std::string d = testing::ScratchPath(steered ? "long_form_demo_tts" : "long_form_demo_chat");
  std::string cmd = std::string(LFMVOX_MAKE_CHECKPOINT) + " lfm25-audio --size demo --tokenizer '" +
                    testing::DataPath("tokenizer/tokenizer.json") + "' --out '" + d + "'";
  if (steered) cmd += " --steer-tts 'Hello there.' --voice 'US female'";
  EXPECT_EQ(std::system((cmd + " 2>/dev/null").c_str()), 0) << cmd;
  auto r = AudioModel::Load(d);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : nullptr;
}

// The TTS model and the chat model.
std::shared_ptr<const AudioModel> Model() {
  static std::shared_ptr<const AudioModel> m = Demo(true);
  return m;
}
std::shared_ptr<const AudioModel> ChatModel() {
  static std::shared_ptr<const AudioModel> m = Demo(false);
  return m;
}

std::unique_ptr<Conversation> NewConversation(ConversationOptions o, bool chat = false) {
  auto c = Conversation::Create(chat ? ChatModel() : Model(), o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

GenerateOptions TtsOptions() {
  GenerateOptions o = GenerateOptions::ForTts(*Model());
  o.max_new_tokens = 24;
  return o;
}

// One sentence spoken alone on a fresh conversation.
std::vector<float> SpeakAlone(const std::string& sentence) {
  auto c = NewConversation({.context = 512, .seed = 7});
  std::vector<float> pcm;
  OutputCallbacks cb;
  cb.on_pcm = [&](std::span<const float> p) {
    pcm.insert(pcm.end(), p.begin(), p.end());
    return Status::Ok();
  };
  EXPECT_TRUE(c->StartSpeech(Model()->default_voice(), sentence).ok());
  auto r = c->Generate(TtsOptions(), cb);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return pcm;
}

TEST(LongTts, StreamIsEachSentenceAloneJoinedWithoutJumps) {
  ASSERT_TRUE(Model());
  const std::string text = "Hello there. How are you today?\nFine, thanks! 你好。";
  auto split = SplitSentences(text);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(*split,
            (std::vector<std::string>{"Hello there.", "How are you today?", "Fine, thanks!", "你好。"}));

  auto c = NewConversation({.context = 512, .seed = 7});
  std::vector<float> stream;
  size_t calls = 0;
  OutputCallbacks cb;
  cb.on_pcm = [&](std::span<const float> p) {
    stream.insert(stream.end(), p.begin(), p.end());
    ++calls;
    return Status::Ok();
  };
  const SpeakOptions speak;  // 5 ms fades, 120 ms gaps
  auto r = SpeakText(*c, Model()->default_voice(), text, TtsOptions(), cb, speak);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->segments, 4u);
  EXPECT_EQ(r->pcm_samples, stream.size());
  EXPECT_GT(calls, 4u);  // streamed, not handed over at the end

  // The expected stream, built from each sentence alone.
  const size_t F = static_cast<size_t>(speak.fade_seconds * Model()->sample_rate());
  const size_t G = static_cast<size_t>(speak.gap_seconds * Model()->sample_rate());
  ASSERT_EQ(F, 120u);
  std::vector<float> expected;
  std::vector<size_t> starts, ends;  // each segment's span in the stream
  float inner = 0;                   // the largest |x[n] - x[n-1]| inside the segments (fades excluded)
  for (size_t k = 0; k < split->size(); ++k) {
    std::vector<float> seg = SpeakAlone((*split)[k]);
    ASSERT_GT(seg.size(), 4 * F) << "sentence " << k;
    for (size_t n = F + 1; n + F < seg.size(); ++n) inner = std::max(inner, std::fabs(seg[n] - seg[n - 1]));
    if (k > 0) {
      for (size_t n = 0; n < F; ++n) seg[n] *= static_cast<float>(n) / static_cast<float>(F);
    }
    if (k + 1 < split->size()) {
      for (size_t j = 0; j < F; ++j) {
        seg[seg.size() - F + j] *= static_cast<float>(F - 1 - j) / static_cast<float>(F);
      }
    }
    starts.push_back(expected.size());
    expected.insert(expected.end(), seg.begin(), seg.end());
    ends.push_back(expected.size());
    if (k + 1 < split->size()) expected.insert(expected.end(), G, 0.0f);
  }
  ASSERT_EQ(stream.size(), expected.size());
  EXPECT_EQ(std::memcmp(stream.data(), expected.data(), stream.size() * sizeof(float)), 0);
  // The first sentence is exactly its lone TTS up to its fade-out.
  const std::vector<float> first = SpeakAlone((*split)[0]);
  EXPECT_EQ(std::memcmp(stream.data(), first.data(), (first.size() - F) * sizeof(float)), 0);

  // The joins: no step across a fade, the gap or into the next sentence beyond the signal's own.
  ASSERT_GT(inner, 0.0f);
  for (size_t k = 0; k + 1 < split->size(); ++k) {
    float jump = 0;
    for (size_t n = ends[k] - F; n <= starts[k + 1] + F; ++n)
      jump = std::max(jump, std::fabs(stream[n] - stream[n - 1]));
    EXPECT_LE(jump, inner) << "join " << k;
    EXPECT_EQ(stream[ends[k] - 1], 0.0f);
    EXPECT_EQ(stream[starts[k + 1]], 0.0f);
  }
}

TEST(LongTts, NothingToSpeakAndInvalidUtf8AreErrors) {
  ASSERT_TRUE(Model());
  auto c = NewConversation({.context = 256});
  auto r = SpeakText(*c, Model()->default_voice(), " ... !!! ", TtsOptions(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nothing to speak"), std::string::npos) << r.status().message();
  r = SpeakText(*c, Model()->default_voice(), "ok \xc3\x28 no", TtsOptions(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("UTF-8"), std::string::npos) << r.status().message();
}

// A generated item, in order.
struct Item {
  bool audio = false;
  int32_t id = 0;
  std::vector<int32_t> codes;
  bool operator==(const Item&) const = default;
};

struct Turn {
  std::string role, text;   // user: its text
  std::vector<Item> items;  // assistant: what it generated
};

GenerateOptions ChatOptions() {
  GenerateOptions o = GenerateOptions::ForSpeechToSpeech(*ChatModel());
  o.audio = {};  // greedy: the comparison is bit for bit
  o.max_new_tokens = 12;
  return o;
}

std::vector<Item> Answer(Conversation& c, const std::string& user) {
  std::vector<Item> items;
  OutputCallbacks cb;
  cb.on_text = [&](int32_t id, std::string_view) {
    items.push_back({false, id, {}});
    return Status::Ok();
  };
  cb.on_audio_frame = [&](std::span<const int32_t> codes, bool) {
    items.push_back({true, 0, {codes.begin(), codes.end()}});
    return Status::Ok();
  };
  EXPECT_TRUE(c.StartTurn("user").ok());
  EXPECT_TRUE(c.AddText(user).ok());
  EXPECT_TRUE(c.EndTurn().ok());
  EXPECT_TRUE(c.StartTurn("assistant").ok());
  auto r = c.Generate(ChatOptions(), cb);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) {
    EXPECT_FALSE(r->context_full);
  }
  EXPECT_TRUE(c.EndTurn().ok());
  return items;
}

TEST(EndlessConversation, AfterADropTheTurnEqualsAFreshConversationOfTheKeptHistory) {
  ASSERT_TRUE(ChatModel());
  const ConversationOptions o{
      .context = 160, .context_policy = ContextPolicy::kDropOldest, .context_reserve = 60};
  auto a = NewConversation(o, true);
  ASSERT_TRUE(a->StartChat().ok());
  std::vector<Turn> turns;  // user and assistant turns after the system turn, in order
  for (int t = 0; t < 40; ++t) {
    const std::string user = "question number " + std::to_string(t);
    const uint64_t before = a->context_stats().dropped_turns;
    const std::vector<Item> got = Answer(*a, user);
    turns.push_back({"user", user, {}});
    turns.push_back({"assistant", "", got});
    const ContextStats s = a->context_stats();
    ASSERT_LE(s.positions, s.context);
    if (s.dropped_turns == before) continue;
    // The kept history: the system turn and turns[dropped, the last user turn].
    auto b = NewConversation({.context = 160}, true);
    ASSERT_TRUE(b->StartChat().ok());
    const size_t d = s.dropped_turns;
    ASSERT_LE(d + 2, turns.size());
    for (size_t k = d; k + 2 < turns.size(); ++k) {
      ASSERT_TRUE(b->StartTurn(turns[k].role).ok());
      if (turns[k].role == "user") {
        ASSERT_TRUE(b->AddText(turns[k].text).ok());
      }
      for (const Item& it : turns[k].items) {
        ASSERT_TRUE((it.audio ? b->AddAudioOut(it.codes) : b->AddTokens({&it.id, 1})).ok());
      }
      ASSERT_TRUE(b->EndTurn().ok());
    }
    const std::vector<Item> fresh = Answer(*b, user);
    EXPECT_EQ(fresh, got) << "turn " << t << " after dropping " << d << " turns";
    EXPECT_EQ(b->context_stats().positions, s.positions);
    EXPECT_FALSE(got.empty());
    if (d >= 6) return;  // two drops or more compared
  }
  FAIL() << "no turn was dropped in 40 turns of a 160-position context";
}

TEST(EndlessConversation, FiveHundredTurnsInBoundedState) {
  ASSERT_TRUE(ChatModel());
  auto c = NewConversation(
      {.context = 128, .context_policy = ContextPolicy::kDropOldest, .context_reserve = 48}, true);
  ASSERT_TRUE(c->StartChat().ok());
  size_t first_half_max = 0;
  for (int t = 0; t < 500; ++t) {
    Answer(*c, "hi " + std::to_string(t));
    if (HasFailure()) FAIL() << "turn " << t;
    const ContextStats s = c->context_stats();
    ASSERT_LE(s.positions, s.context);
    if (t < 250) {
      first_half_max = std::max(first_half_max, s.state_bytes);
    } else {
      ASSERT_LE(s.state_bytes, first_half_max) << "turn " << t;
    }
  }
  EXPECT_GT(c->context_stats().dropped_turns, 500u);
}

TEST(EndlessConversation, StopPolicyStillStops) {
  ASSERT_TRUE(ChatModel());
  auto c = NewConversation({.context = 64}, true);
  ASSERT_TRUE(c->StartChat().ok());
  bool full = false;
  for (int t = 0; t < 20 && !full; ++t) {
    Status s = c->StartTurn("user");
    if (s.ok()) s = c->AddText("hello again");
    if (s.ok()) s = c->EndTurn();
    if (s.ok()) s = c->StartTurn("assistant");
    if (!s.ok()) {
      full = true;
      break;
    }
    auto r = c->Generate(ChatOptions(), {});
    ASSERT_TRUE(r.ok());
    full = r->context_full;
    if (!full) {
      ASSERT_TRUE(c->EndTurn().ok());
    }
  }
  EXPECT_TRUE(full);
  EXPECT_EQ(c->context_stats().dropped_turns, 0u);
}

}  // namespace
}  // namespace lfmvox
