// LFM3-Audio through the public API (AudioModel / Conversation / Engine, the C API and the CLI), on a
// small random full checkpoint that tools/lfm3_checkpoint_gen.h writes here (backbone, depth decoder,
// codec; tests/data/tokenizer/tokenizer.json as its tokenizer). Asserted:
//   (a) the text tokens and frames a Conversation generates equal Lfm3Generator driven directly on the
//       same prompt ids (the loop of generation.h with Lfm3DepthDecoder inside), bit for bit: a TTS turn
//       (the prompt ends with <|audio_start|>) and an interleaved one (<|mixed_start|>, 6 text / 12 audio);
//   (b) the PCM equals the codec (Lfm3CodecSession) run frame by frame on those frames, flushed at each
//       end-of-audio frame and at the end: memcmp;
//   (c) three conversations batched on one engine (different prompts, lengths, seeds and modes) equal
//       each run alone: items and PCM, memcmp;
//   (d) the same seed reproduces every code; another seed changes the sampled codes;
//   (e) Cancel() from a callback stops the generation before the next item;
//   (f) the C API and `lfmvox tts` give the PCM the C++ API gives, memcmp;
//   (g) speech input and a speech-output-only folder are clear errors.
// Unverified here (no oracle exists for the LFM3 backbone; src/models/lfm3_audio/README.md lists it):
// the backbone's numbers, the chat template's exact strings (assistantOpen, the chat system prompt) and
// the loop details the seed settles alone. These tests prove the API path adds nothing and loses nothing
// on top of the library's loop, not that the loop is Liquid's.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lfmvox/lfmvox.h"
#include "lfmvox/lfmvox_c.h"
#include "models/lfm3_audio/codec.h"
#include "models/lfm3_audio/generation.h"
#include "models/lfm3_audio/session.h"
#include "threading/thread_team.h"
#include "tools/lfm3_checkpoint_gen.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

const char* kText = "Hello there, this is a test.";

// A random whole model in a scratch folder; eos_row_scale as tools::Lfm3Shape.
std::string WriteModel(const std::string& name, float eos_row_scale) {
  tools::Lfm3Shape s;
  s.text_hidden = 32;
  s.codec_hidden = 32;
  s.codec_heads = 2;
  s.codec_kv_heads = 1;
  s.codec_ffn = 48;
  s.quantizer_dim = 16;
  s.depth_hidden = 32;
  s.depth_heads = 2;
  s.depth_kv_heads = 1;
  s.depth_ffn = 48;
  s.with_backbone = true;
  s.tokenizer = testing::DataPath("tokenizer/tokenizer.json");
  s.interleaved_n_text = 6;
  s.interleaved_n_audio = 12;
  s.eos_row_scale = eos_row_scale;
  const std::string d = testing::ScratchPath(name);
  std::filesystem::remove_all(d);
  const Status st = tools::WriteRandomLfm3(d, s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return d;
}

// Written once per test process. Speech that ends: with the EOS rows 3× wider the TTS turn below ends its
// speech after 9 frames (then text), so the end-of-audio paths run (the codec flushed, the EOS row fed, text
// after speech).
const std::string& ModelDir() {
  static const std::string dir = WriteModel("lfm3_api_model", 3.0f);
  return dir;
}

std::shared_ptr<const AudioModel> LoadModel() {
  Result<std::shared_ptr<const AudioModel>> m = AudioModel::Load(ModelDir());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : nullptr;
}

struct Item {
  bool audio = false;
  int32_t token = -1;
  std::vector<int32_t> codes;
  bool end_of_audio = false;
  bool operator==(const Item&) const = default;
};

struct Output {
  std::vector<Item> items;
  std::vector<float> pcm;
  GenerateSummary summary;
};

OutputCallbacks Collect(Output* o) {
  OutputCallbacks cb;
  cb.on_text = [o](int32_t id, std::string_view) {
    o->items.push_back({false, id, {}, false});
    return Status::Ok();
  };
  cb.on_audio_frame = [o](std::span<const int32_t> codes, bool eoa) {
    o->items.push_back({true, -1, {codes.begin(), codes.end()}, eoa});
    return Status::Ok();
  };
  cb.on_pcm = [o](std::span<const float> pcm) {
    o->pcm.insert(o->pcm.end(), pcm.begin(), pcm.end());
    return Status::Ok();
  };
  return cb;
}

bool SamePcm(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The prompt a task builds, one piece at a time (the pieces Conversation tokenizes separately).
enum class Prompt { kTts, kInterleaved };

Status BuildPrompt(Conversation& c, Prompt p, const std::string& text) {
  if (p == Prompt::kTts) return c.StartSpeech(c.model().default_voice(), text);
  LFM_RETURN_IF_ERROR(c.StartChat());
  LFM_RETURN_IF_ERROR(c.StartTurn("user"));
  LFM_RETURN_IF_ERROR(c.AddText(text));
  LFM_RETURN_IF_ERROR(c.EndTurn());
  return c.StartTurn("assistant");
}

GenerateOptions Options(const AudioModel& m, Prompt p, int max_new) {
  GenerateOptions o = p == Prompt::kTts ? GenerateOptions::ForTts(m) : GenerateOptions::ForSpeechToSpeech(m);
  o.max_new_tokens = max_new;
  return o;
}

Output Generate(const std::shared_ptr<const AudioModel>& m, Prompt p, const std::string& text, uint64_t seed,
                int max_new) {
  Output out;
  Result<std::unique_ptr<Conversation>> c = Conversation::Create(m, {.threads = 2, .seed = seed});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return out;
  EXPECT_TRUE(BuildPrompt(**c, p, text).ok());
  Result<GenerateSummary> r = (*c)->Generate(Options(*m, p, max_new), Collect(&out));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) out.summary = *r;
  return out;
}

// The same turn through Lfm3Generator, on prompt ids this test builds itself from the tokenizer.
std::vector<Item> RunGenerator(Prompt p, const std::string& text, uint64_t seed, int max_new) {
  Result<std::unique_ptr<Lfm3AudioModel>> mr = Lfm3AudioModel::Load(ModelDir());
  EXPECT_TRUE(mr.ok()) << mr.status().ToString();
  if (!mr.ok()) return {};
  const Lfm3AudioModel& m = **mr;
  const Tokenizer& tok = m.tokenizer();
  std::vector<int32_t> ids = {m.bos()};
  auto add = [&](const std::string& s) {
    Result<std::vector<int32_t>> e = tok.Encode(s);
    EXPECT_TRUE(e.ok());
    ids.insert(ids.end(), e->begin(), e->end());
  };
  if (p == Prompt::kTts) {
    for (const std::string& s : {std::string("<|im_start|>system\n"),
                                 std::string("Perform TTS in American English using a female voice."),
                                 std::string("<|im_end|>\n"), std::string("<|im_start|>user\n"), text,
                                 std::string("<|im_end|>\n"), std::string("<|im_start|>assistant\n")}) {
      add(s);
    }
    ids.push_back(*tok.TokenId("<|audio_start|>"));
  } else {
    for (const std::string& s :
         {std::string("<|im_start|>system\n"), std::string("Respond with interleaved text and audio."),
          std::string("<|im_end|>\n"), std::string("<|im_start|>user\n"), text, std::string("<|im_end|>\n"),
          std::string("<|im_start|>assistant\n")}) {
      add(s);
    }
    ids.push_back(*tok.TokenId("<|mixed_start|>"));
  }
  ThreadTeam team(2);
  Result<Lfm3Generator> g =
      Lfm3Generator::Create(m.backbone(), m.depth(), m.tokens(), m.config().interleaved_n_text,
                            m.config().interleaved_n_audio, m.sampling(), seed, 4096, ids.size(), 2);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  EXPECT_TRUE(g->Begin(ids, seed, team).ok());
  std::vector<Item> items;
  for (int i = 0; i < max_new; ++i) {
    Lfm3StepOut o;
    const Status st = g->Step(team, &o);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    if (o.audio) {
      items.push_back({true, -1, {g->frame().begin(), g->frame().end()}, o.end_of_audio});
    } else {
      items.push_back({false, o.token, {}, false});
    }
    if (o.turn_ended) break;
  }
  return items;
}

// The codec alone on the frames: each stretch of speech a stream, flushed at its end-of-audio frame.
std::vector<float> DecodeAlone(const std::vector<Item>& items) {
  Result<std::unique_ptr<Lfm3AudioModel>> mr = Lfm3AudioModel::Load(ModelDir());
  EXPECT_TRUE(mr.ok());
  if (!mr.ok()) return {};
  const Lfm3Codec& codec = (*mr)->codec();
  Result<std::unique_ptr<Lfm3CodecSession>> s = Lfm3CodecSession::Create(codec, 1, 1);
  EXPECT_TRUE(s.ok());
  ThreadTeam team(1);
  std::vector<float> pcm, buf(std::max(codec.samples_per_frame(), codec.tail_samples()));
  auto flush = [&] {
    if ((*s)->frames_decoded() == 0) return;
    Result<size_t> n = (*s)->Flush(buf);
    EXPECT_TRUE(n.ok());
    pcm.insert(pcm.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(*n));
  };
  for (const Item& it : items) {
    if (!it.audio) continue;
    if (it.end_of_audio) {
      flush();
      continue;
    }
    Result<size_t> n = (*s)->Step(it.codes, buf, team);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    if (n.ok()) pcm.insert(pcm.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(*n));
  }
  flush();
  return pcm;
}

std::string Describe(const std::vector<Item>& items) {
  std::string s;
  for (const Item& it : items) s += !it.audio ? "t" : it.end_of_audio ? "E" : "a";
  return s;
}

TEST(Lfm3Api, LoadsAsAnAudioModel) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->family(), "LFM3-Audio");
  EXPECT_EQ(m->num_codebooks(), 12);
  EXPECT_EQ(m->audio_vocab(), 2017);
  EXPECT_EQ(m->samples_per_frame(), 1920);
  EXPECT_EQ(m->sample_rate(), 24000);
  const GenerateOptions tts = GenerateOptions::ForTts(*m);  // the files' draw: none given, so LFM3-Audio's
  EXPECT_EQ(tts.audio.temperature, 1.0f);
  EXPECT_EQ(tts.audio.top_k, 128);
  EXPECT_EQ(tts.text.temperature, 0.0f);
  EXPECT_EQ(GenerateOptions::ForSpeechToSpeech(*m).mode, GenerationMode::kInterleaved);
}

TEST(Lfm3Api, TtsTurnEqualsTheGeneratorAndThePcmTheCodec) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  const Output api = Generate(m, Prompt::kTts, kText, 5, 40);
  const std::vector<Item> ref = RunGenerator(Prompt::kTts, kText, 5, 40);
  std::printf("[tts] api %s\n[tts] gen %s\n", Describe(api.items).c_str(), Describe(ref).c_str());
  ASSERT_FALSE(ref.empty());
  EXPECT_TRUE(ref[0].audio) << "a prompt ending in <|audio_start|> starts with speech";
  const auto eoa = std::find_if(ref.begin(), ref.end(), [](const Item& it) { return it.end_of_audio; });
  ASSERT_NE(eoa, ref.end()) << "no end-of-audio frame: the end-of-speech path is not exercised";
  EXPECT_NE(eoa + 1, ref.end());
  if (eoa + 1 != ref.end()) {
    EXPECT_FALSE(eoa[1].audio) << "after the end of audio, text";
  }
  EXPECT_TRUE(api.items == ref) << "the Conversation's items differ from Lfm3Generator's";
  EXPECT_EQ(api.summary.text_tokens + api.summary.audio_frames, static_cast<int>(api.items.size()));
  const std::vector<float> pcm = DecodeAlone(ref);
  EXPECT_GT(pcm.size(), 0u);
  EXPECT_EQ(api.summary.pcm_samples, api.pcm.size());
  EXPECT_TRUE(SamePcm(api.pcm, pcm)) << api.pcm.size() << " samples vs the codec's " << pcm.size();
  // Where the time went (StageTimings, the counts exact): the prompt in prefill passes, then one
  // one-position pass per item after the first (the last item is never fed), a depth-decoder call per
  // audio item, codec time for the PCM, and no encoder (LFM3-Audio takes no speech in).
  const StageTimings& t = api.summary.timings;
  EXPECT_GT(t.prefill_positions, 0);
  EXPECT_EQ(t.backbone_steps, static_cast<int>(api.items.size()) - 1);
  EXPECT_EQ(t.depth_frames, api.summary.audio_frames);
  EXPECT_GT(t.prefill_ms, 0);
  EXPECT_GT(t.backbone_step_ms, 0);
  EXPECT_GT(t.depth_ms, 0);
  EXPECT_GT(t.detokenizer_ms, 0);
  EXPECT_EQ(t.encoder_ms, 0);
}

TEST(Lfm3Api, InterleavedTurnEqualsTheGeneratorAndFollowsTheSchedule) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  const Output api = Generate(m, Prompt::kInterleaved, kText, 9, 30);
  const std::vector<Item> ref = RunGenerator(Prompt::kInterleaved, kText, 9, 30);
  std::printf("[mixed] api %s\n[mixed] gen %s\n", Describe(api.items).c_str(), Describe(ref).c_str());
  EXPECT_TRUE(api.items == ref) << "the Conversation's items differ from Lfm3Generator's";
  // 6 text slots, then 12 audio ones, until a token or an end-of-audio frame leaves the schedule.
  ASSERT_GE(ref.size(), 7u) << "the random model ended the turn within its first text slots";
  for (size_t i = 0; i < std::min<size_t>(ref.size(), 18); ++i) {
    if (ref[i].end_of_audio) break;
    EXPECT_EQ(ref[i].audio, i >= 6) << "slot " << i;
  }
  EXPECT_TRUE(SamePcm(api.pcm, DecodeAlone(ref)));
}

TEST(Lfm3Api, ThreeConversationsBatchedEqualEachAlone) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  struct Case {
    Prompt p;
    std::string text;
    uint64_t seed;
    int max_new;
  };
  const Case cases[3] = {
      {Prompt::kTts, kText, 1, 30},
      {Prompt::kInterleaved, "Tell me something short.", 2, 26},
      {Prompt::kTts, "A much longer sentence, so that this prompt is the longest of the three.", 3, 22}};
  Result<std::shared_ptr<Engine>> e = Engine::Create({.threads = 2, .max_batch = 3, .prefill_rows = 16});
  ASSERT_TRUE(e.ok());
  std::vector<std::unique_ptr<Conversation>> convs;
  Output batched[3];
  for (int i = 0; i < 3; ++i) {
    Result<std::unique_ptr<Conversation>> c = Conversation::Create(m, {.seed = cases[i].seed, .engine = *e});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE(BuildPrompt(**c, cases[i].p, cases[i].text).ok());
    ASSERT_TRUE((*c)->BeginGenerate(Options(*m, cases[i].p, cases[i].max_new), Collect(&batched[i])).ok());
    convs.push_back(std::move(c).value());
  }
  Conversation* all[3] = {convs[0].get(), convs[1].get(), convs[2].get()};
  for (int guard = 0; guard < 1000; ++guard) {
    Result<size_t> left = (*e)->Step(all);
    ASSERT_TRUE(left.ok()) << left.status().ToString();
    if (*left == 0) break;
  }
  for (int i = 0; i < 3; ++i) {
    Result<GenerateSummary> r = convs[i]->FinishGenerate();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Output alone = Generate(m, cases[i].p, cases[i].text, cases[i].seed, cases[i].max_new);
    std::printf("[batch %d] %s\n", i, Describe(batched[i].items).c_str());
    EXPECT_FALSE(alone.items.empty());
    EXPECT_TRUE(batched[i].items == alone.items) << "conversation " << i;
    EXPECT_TRUE(SamePcm(batched[i].pcm, alone.pcm)) << "conversation " << i;
    EXPECT_EQ(r->pcm_samples, alone.summary.pcm_samples);
  }
}

TEST(Lfm3Api, TheSeedDecidesTheSampledCodes) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  const Output a = Generate(m, Prompt::kTts, kText, 11, 8), b = Generate(m, Prompt::kTts, kText, 11, 8),
               c = Generate(m, Prompt::kTts, kText, 12, 8);
  EXPECT_TRUE(a.items == b.items);
  EXPECT_TRUE(SamePcm(a.pcm, b.pcm));
  ASSERT_FALSE(a.items.empty());
  ASSERT_TRUE(a.items[0].audio && c.items[0].audio);
  size_t differ = 0;
  for (size_t k = 0; k < 12; ++k) differ += a.items[0].codes[k] != c.items[0].codes[k];
  EXPECT_GT(differ, 6u) << "seeds 11 and 12 drew nearly the same first frame (T 1, top-k 128 of 2017 codes)";
  // Reset() starts the conversation over, streams reseeded: the same prompt gives seed 11's output again.
  Result<std::unique_ptr<Conversation>> conv = Conversation::Create(m, {.seed = 11});
  ASSERT_TRUE(conv.ok());
  Output first, again;
  ASSERT_TRUE(BuildPrompt(**conv, Prompt::kTts, kText).ok());
  ASSERT_TRUE((*conv)->Generate(Options(*m, Prompt::kTts, 8), Collect(&first)).ok());
  (*conv)->Reset();
  ASSERT_TRUE(BuildPrompt(**conv, Prompt::kTts, kText).ok());
  ASSERT_TRUE((*conv)->Generate(Options(*m, Prompt::kTts, 8), Collect(&again)).ok());
  EXPECT_TRUE(first.items == a.items);
  EXPECT_TRUE(again.items == a.items) << "after Reset()";
  EXPECT_TRUE(SamePcm(again.pcm, a.pcm));
}

// Speech of nothing: an empty or all-whitespace text is refused (by the API, for every family) before any
// position is added; the model would otherwise speak whatever it liked, up to the whole budget. The
// conversation stays usable for a real sentence.
TEST(Lfm3Api, EmptyTextToSpeakIsRefused) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  Result<std::unique_ptr<Conversation>> c = Conversation::Create(m, {.seed = 4});
  ASSERT_TRUE(c.ok());
  for (const char* text : {"", " ", "\t\n  \r"}) {
    const Status s = (*c)->StartSpeech(m->default_voice(), text);
    ASSERT_FALSE(s.ok()) << "\"" << text << "\"";
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("the text to speak is empty"), std::string::npos) << s.message();
    EXPECT_EQ((*c)->context_stats().positions, 0u);
  }
  ASSERT_TRUE((*c)->StartSpeech(m->default_voice(), kText).ok());
  EXPECT_GT((*c)->context_stats().positions, 0u);
}

// Conversation::Prefill on LFM3-Audio: the interleaved prompt's positions run ahead (all but the last),
// and the turn is the same items and PCM bit for bit as without (Generate above); refused while generating.
TEST(Lfm3Api, PrefillAheadGivesTheSameTurn) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  const Output cold = Generate(m, Prompt::kInterleaved, kText, 9, 40);
  ASSERT_FALSE(cold.items.empty());
  Result<std::unique_ptr<Conversation>> c = Conversation::Create(m, {.threads = 2, .seed = 9});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(BuildPrompt(**c, Prompt::kInterleaved, kText).ok());
  const size_t positions = (*c)->context_stats().positions;
  ASSERT_GT(positions, 2u);
  EXPECT_EQ((*c)->context_stats().cached_positions, 0u);
  ASSERT_TRUE((*c)->Prefill().ok());
  EXPECT_EQ((*c)->context_stats().cached_positions, positions - 1);
  Output warm;
  ASSERT_TRUE((*c)->BeginGenerate(Options(*m, Prompt::kInterleaved, 40), Collect(&warm)).ok());
  EXPECT_EQ((*c)->Prefill().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*c)->FinishGenerate().ok());  // stopped before its first item
  EXPECT_TRUE(warm.items.empty());
  Result<GenerateSummary> r = (*c)->Generate(Options(*m, Prompt::kInterleaved, 40), Collect(&warm));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(warm.items, cold.items);
  EXPECT_TRUE(SamePcm(warm.pcm, cold.pcm));
}

TEST(Lfm3Api, CancelStopsBeforeTheNextItem) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  Result<std::unique_ptr<Conversation>> c = Conversation::Create(m, {.seed = 4});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->StartSpeech(m->default_voice(), kText).ok());
  Conversation* conv = c->get();
  int items = 0;
  auto count = [&] {
    if (++items == 3) conv->Cancel();  // from inside the step that produced the third item
    return Status::Ok();
  };
  OutputCallbacks cb;
  cb.on_audio_frame = [&](std::span<const int32_t>, bool) { return count(); };
  cb.on_text = [&](int32_t, std::string_view) { return count(); };
  Result<GenerateSummary> r = conv->Generate(Options(*m, Prompt::kTts, 40), cb);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->ended);
  EXPECT_EQ(items, 3);
  EXPECT_EQ(r->audio_frames + r->text_tokens, 3);
  // The conversation goes on after a cancelled turn: the next generation produces items again.
  Result<GenerateSummary> again = conv->Generate(Options(*m, Prompt::kTts, 2), cb);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->cancelled);
  EXPECT_EQ(again->audio_frames + again->text_tokens, 2);
}

// A model (EOS rows as drawn) whose config.json's `generation` section turns the repetition penalty off
// and fixes the reveal order, so that greedy frames depend on the backbone state alone (no RNG, no history).
const std::string& NoPenaltyDir() {
  static const std::string dir = [] {
    const std::string d = WriteModel("lfm3_api_model_no_penalty", 1.0f);
    std::ifstream in(d + "/config.json");
    nlohmann::json cfg = nlohmann::json::parse(in);
    cfg["generation"] = {{"audio_repetition_penalty", 1.0}, {"maskgit_order", "fixed"}};
    std::ofstream(d + "/config.json") << cfg.dump(1);
    return d;
  }();
  return dir;
}

// Barge-in: TruncateSpeech keeps the frames heard (rounded up) and drops the rest; the caches are rebuilt
// from the kept history, so greedy speech resumed after 3 kept frames is the first turn's 4th frame on.
TEST(Lfm3Api, TruncateSpeechKeepsWhatWasHeard) {
  Result<std::shared_ptr<const AudioModel>> m = AudioModel::Load(NoPenaltyDir());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Result<std::unique_ptr<Conversation>> c = Conversation::Create(*m, {.threads = 2});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->StartSpeech((*m)->default_voice(), kText).ok());
  GenerateOptions o = GenerateOptions::ForTts(**m);
  o.audio = {0.0f, 0};  // greedy frames
  o.max_new_tokens = 8;
  Output first, resumed;
  ASSERT_TRUE((*c)->Generate(o, Collect(&first)).ok());
  ASSERT_EQ(Describe(first.items), "aaaaaaaa") << "the greedy turn should be 8 speech frames";
  const size_t spf = static_cast<size_t>((*m)->samples_per_frame());
  EXPECT_EQ((*c)->TruncateSpeech(9 * spf).code(), StatusCode::kOutOfRange);  // more than was produced
  ASSERT_TRUE((*c)->TruncateSpeech(2 * spf + 1).ok());                       // 3 frames, the last in part
  o.max_new_tokens = 5;
  ASSERT_TRUE((*c)->Generate(o, Collect(&resumed)).ok());
  ASSERT_EQ(resumed.items.size(), 5u);
  EXPECT_TRUE(std::equal(resumed.items.begin(), resumed.items.end(), first.items.begin() + 3))
      << "the speech resumed after the kept frames differs from the first turn's";
}

TEST(Lfm3Api, SpeechInputIsUnimplementedAndSpeechOutputFoldersSayWhy) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  Result<std::unique_ptr<Conversation>> c = Conversation::Create(m);
  ASSERT_TRUE(c.ok());
  std::vector<float> clip(16000, 0.0f);
  Status s = (*c)->AddAudio(clip, 16000);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("encoder"), std::string::npos) << s.ToString();
  EXPECT_EQ((*c)->StartAsr().code(), StatusCode::kUnimplemented);
  s = (*c)->StartSpeech("Klingon", kText);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("female"), std::string::npos) << s.ToString();
  Result<std::shared_ptr<const AudioModel>> tiny = AudioModel::Load(testing::DataPath("lfm3_tiny"));
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("\"lfm\" backbone section"), std::string::npos)
      << tiny.status().ToString();
}

int CollectPcm(void* user, const float* pcm, size_t n) {
  static_cast<std::vector<float>*>(user)->insert(static_cast<std::vector<float>*>(user)->end(), pcm, pcm + n);
  return 0;
}

// For LFM3 sessions too, the conversation's bytes are planned from the config before anything is allocated.
// The plan equals what Lfm3State::Create then allocates (state_bytes(), the buffers as allocated), and the
// demo backbone (conv, full attention, conv, sliding attention of 8; 2 KV heads of 8) at 4096 positions holds
// 2 * 4096 * 16 floats = 512 KiB of full-attention K/V plus 4096 * (8 + 12 * 4) bytes of history, so under
// LFMVOX_MEMORY_LIMIT=512K it is refused with its sizes and a context of 256 fits.
TEST(Lfm3Api, ConversationBeyondTheMemoryLimitIsRefusedWithItsSizes) {
  Result<std::unique_ptr<Lfm3AudioModel>> mr = Lfm3AudioModel::Load(ModelDir());
  ASSERT_TRUE(mr.ok()) << mr.status().ToString();
  const Lfm3Stack& stack = (*mr)->backbone().stack();
  for (auto [rows, ctx] : {std::pair<size_t, size_t>{1, 16}, {64, 256}, {512, 4096}}) {
    Result<Lfm3State> st = Lfm3State::Create(stack, rows, ctx);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(Lfm3State::PlannedBytes(stack, rows, ctx), static_cast<double>(st->state_bytes()))
        << rows << " rows, " << ctx << " positions";
  }
  auto m = LoadModel();
  ASSERT_TRUE(m);
  setenv("LFMVOX_MEMORY_LIMIT", "512K", 1);
  auto big = Conversation::Create(m, {.context = 4096});
  auto small = Conversation::Create(m, {.context = 256});
  unsetenv("LFMVOX_MEMORY_LIMIT");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
  const std::string& msg = big.status().message();
  EXPECT_NE(msg.find("a conversation of 4096 positions needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("history 229376 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("memory limit of 524288 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--context"), std::string::npos) << msg;
  EXPECT_TRUE(small.ok()) << small.status().ToString();
}

TEST(Lfm3Api, TheCApiAndTheCliGiveTheSamePcm) {
  std::shared_ptr<const AudioModel> m = LoadModel();
  ASSERT_NE(m, nullptr);
  const Output api = Generate(m, Prompt::kTts, kText, 7, 24);
  ASSERT_GT(api.pcm.size(), 0u);

  lfmvox_model* cm = nullptr;
  ASSERT_EQ(lfmvox_model_load(ModelDir().c_str(), &cm), LFMVOX_OK) << lfmvox_last_error();
  lfmvox_conversation_options co;
  lfmvox_conversation_options_init(&co);
  co.threads = 2;
  co.seed = 7;
  lfmvox_conversation* conv = nullptr;
  ASSERT_EQ(lfmvox_conversation_create(cm, &co, &conv), LFMVOX_OK) << lfmvox_last_error();
  const char* const* voices = nullptr;
  size_t nv = 0;
  ASSERT_EQ(lfmvox_model_voices(cm, &voices, &nv), LFMVOX_OK);
  ASSERT_GE(nv, 1u);
  EXPECT_STREQ(voices[0], "American English female");
  ASSERT_EQ(lfmvox_conversation_start_speech(conv, voices[0], kText), LFMVOX_OK) << lfmvox_last_error();
  lfmvox_generate_options go;
  ASSERT_EQ(lfmvox_generate_options_preset(cm, LFMVOX_PRESET_TTS, &go), LFMVOX_OK);
  go.max_new_tokens = 24;
  std::vector<float> c_pcm;
  lfmvox_callbacks cb{};
  cb.user = &c_pcm;
  cb.on_pcm = &CollectPcm;
  lfmvox_generate_summary sum;
  ASSERT_EQ(lfmvox_conversation_generate(conv, &go, &cb, &sum), LFMVOX_OK) << lfmvox_last_error();
  lfmvox_conversation_free(conv);
  lfmvox_model_free(cm);
  EXPECT_EQ(sum.pcm_samples, c_pcm.size());
  EXPECT_TRUE(SamePcm(c_pcm, api.pcm)) << c_pcm.size() << " vs " << api.pcm.size();

  const std::string err = testing::ScratchPath("lfm3_cli_err.txt");
  const std::string cmd = std::string(LFMVOX_CLI) + " tts --model " + ModelDir() +
                          " --seed 7 --max-new 24 --threads 2 --pcm f32 -o - \"" + kText + "\" 2>" + err;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string bytes;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) bytes.append(buf, n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  ASSERT_EQ(bytes.size(), api.pcm.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(bytes.data(), api.pcm.data(), bytes.size()), 0) << "`lfmvox tts` PCM differs";
}

}  // namespace
}  // namespace lfmvox
