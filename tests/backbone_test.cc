// The LFM2 backbone against the oracle traces of both cases
// (tests/data/lfm25_{tiny,small}/traces): tts/ (our own embeddings of the
// text-only prompt), prefill/ and prefill_speech/ (fed the stored input
// embeddings, including the caches), decode/ (cached steps after the
// synthetic prefill, and the uncached forward) and prefill2/ (audio-out
// history embeddings). Tolerances measured by the oracle (its README, not derived), per tensor
// max|port − oracle| ≤ k·max|oracle|: k = 1e-4 for prefill/tts/prefill2,
// 5e-5 for decode.
#include "models/lfm25_audio/backbone.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "model_files.h"
#include "models/lfm25_audio/config.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using testing::CollectingSink;
using testing::Compare;
using testing::Diff;
using testing::LoadTrace;

struct Case {
  std::string dir;
  Lfm25AudioConfig config;
  std::optional<Checkpoint> ckpt;
  std::optional<Lfm2Backbone> backbone;
};

Case& Load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Case>> cache;
  auto& c = cache[name];
  if (!c) {
    c = std::make_unique<Case>();
    testing::ModelFiles files = testing::OpenModelFiles(name);
    c->dir = files.where;
    auto cfg = Lfm25AudioConfig::FromJson(files.config, files.where);
    EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
    c->config = *cfg;
    c->ckpt.emplace(std::move(*files.weights));
    auto bb = Lfm2Backbone::Load(*c->ckpt, c->config.lfm, c->config.codebooks);
    EXPECT_TRUE(bb.ok()) << bb.status().ToString();
    c->backbone.emplace(std::move(bb).value());
  }
  return *c;
}

std::string Trace(const std::string& c, const std::string& name) { return c + "/traces/" + name + ".npy"; }

void Expect(const std::string& what, const float* port, const std::vector<float>& ref, double tol) {
  const Diff d = Compare(port, ref);
  EXPECT_LE(d.rel(), tol) << what << ": max abs " << d.max_abs << " scale " << d.scale;
  if (std::getenv("LFMVOX_TEST_VERBOSE")) std::printf("  %-28s %.3g of scale\n", what.c_str(), d.rel());
}

// One sequence through the stack with a scratch sized for this call.
Status Forward(const Lfm2Stack& stack, Lfm2State& st, float* x, size_t n, ThreadTeam& team, TraceSink* sink) {
  LFM_ASSIGN_OR_RETURN(Lfm2Scratch scratch, Lfm2Scratch::Create(stack, n, st.max_keys(), team.size()));
  return Lfm2Forward(stack, st, x, n, scratch, team, sink);
}

// Runs rows through a fresh state (one call), checking every layer output,
// the final norm of every row and the last row's text logits against
// `group`'s traces.
void CheckForward(Case& c, const std::string& name, const std::string& group, std::vector<float> x, size_t L,
                  double tol, Lfm2State* state_out = nullptr) {
  const size_t H = static_cast<size_t>(c.config.lfm.hidden_size);
  ThreadTeam team(2);
  auto st = Lfm2State::Create(c.backbone->stack(), L, 512);
  ASSERT_TRUE(st.ok());
  CollectingSink sink;
  ASSERT_TRUE(Forward(c.backbone->stack(), *st, x.data(), L, team, &sink).ok());
  for (int i = 0; i < c.config.lfm.num_layers; ++i) {
    const std::string n = "layer" + std::to_string(i) + "_out";
    Expect(group + "/" + n, sink.tensors[n].data(), LoadTrace(Trace(name, group + "__" + n)).ToFloat(), tol);
  }
  Lfm2FinalNorm(c.backbone->stack(), x.data(), L, x.data());
  Expect(group + "/last_hidden", x.data(), LoadTrace(Trace(name, group + "__last_hidden")).ToFloat(), tol);
  std::vector<float> logits(static_cast<size_t>(c.backbone->vocab()));
  c.backbone->TextLogits(x.data() + (L - 1) * H, logits.data(), team);
  Expect(group + "/text_logits_last", logits.data(),
         LoadTrace(Trace(name, group + "__text_logits_last")).ToFloat(), tol);
  if (state_out) *state_out = std::move(st).value();
}

class Backbone : public ::testing::TestWithParam<std::string> {};

// tts/: our embeddings of tts/text_ids equal tts/in_emb exactly (a row copy),
// then the stack.
TEST_P(Backbone, TtsPrompt) {
  Case& c = Load(GetParam());
  const std::vector<int64_t> ids = LoadTrace(Trace(GetParam(), "tts__text_ids")).ToInt64();
  const size_t H = static_cast<size_t>(c.config.lfm.hidden_size), L = ids.size();
  std::vector<float> x(L * H);
  for (size_t i = 0; i < L; ++i)
    ASSERT_TRUE(c.backbone->EmbedToken(static_cast<int32_t>(ids[i]), &x[i * H]).ok());
  Expect("tts/in_emb", x.data(), LoadTrace(Trace(GetParam(), "tts__in_emb")).ToFloat(), 0.0);
  CheckForward(c, GetParam(), "tts", x, L, 1e-4);
}

// prefill/ and prefill_speech/: stored in_emb in, layers, caches and logits out.
TEST_P(Backbone, PrefillWithCaches) {
  Case& c = Load(GetParam());
  for (const std::string group : {"prefill", "prefill_speech"}) {
    const NpyArray in = LoadTrace(Trace(GetParam(), group + "__in_emb"));
    const size_t L = static_cast<size_t>(in.shape[0]), H = static_cast<size_t>(in.shape[1]);
    Lfm2State st = std::move(Lfm2State::Create(c.backbone->stack(), 1, 1)).value();
    CheckForward(c, GetParam(), group, in.ToFloat(), L, 1e-4, &st);
    const Lfm2Config& cfg = c.config.lfm;
    const size_t K = static_cast<size_t>(cfg.conv_kernel), hd = static_cast<size_t>(cfg.head_dim);
    const size_t kvh = static_cast<size_t>(cfg.num_kv_heads);
    for (size_t li = 0; li < cfg.layers.size(); ++li) {
      if (cfg.layers[li] == LayerKind::kConv) {
        // Trace: [H, K] = the last K inputs B·x; our state keeps the last K−1 rows [K−1, H].
        const std::vector<float> ref =
            LoadTrace(Trace(GetParam(), group + "__cache_conv" + std::to_string(li))).ToFloat();
        std::vector<float> want((K - 1) * H), port((K - 1) * H);
        for (size_t ch = 0; ch < H; ++ch)
          for (size_t j = 0; j + 1 < K; ++j) want[j * H + ch] = ref[ch * K + 1 + j];
        std::copy_n(st.conv_state(li), (K - 1) * H, port.data());
        Expect(group + "/cache_conv" + std::to_string(li), port.data(), want, 1e-4);
      } else {
        // Trace: [kv, L, hd]; our cache rows: [L, kv·hd].
        const KvCache& kv = st.kv_cache(li);
        ASSERT_EQ(kv.len, L);
        for (const char* which : {"k", "v"}) {
          const std::vector<float> ref =
              LoadTrace(Trace(GetParam(), group + "__cache_" + which + std::to_string(li))).ToFloat();
          const float* src = which[0] == 'k' ? kv.k.data() : kv.v.data();
          std::vector<float> port(ref.size());
          for (size_t g = 0; g < kvh; ++g)
            for (size_t p = 0; p < L; ++p)
              for (size_t d = 0; d < hd; ++d) port[(g * L + p) * hd + d] = src[p * kvh * hd + g * hd + d];
          Expect(group + "/cache_" + which + std::to_string(li), port.data(), ref, 1e-4);
        }
      }
    }
  }
}

// decode/: after the synthetic prefill, teacher-forced single steps; and the
// same positions in one uncached forward.
TEST_P(Backbone, CachedDecodeSteps) {
  Case& c = Load(GetParam());
  const NpyArray in = LoadTrace(Trace(GetParam(), "prefill__in_emb"));
  const size_t L = static_cast<size_t>(in.shape[0]), H = static_cast<size_t>(in.shape[1]);
  const std::vector<int64_t> ids = LoadTrace(Trace(GetParam(), "decode__step_ids")).ToInt64();
  ThreadTeam team(1);
  auto st = Lfm2State::Create(c.backbone->stack(), L + ids.size(), 512);
  ASSERT_TRUE(st.ok());
  std::vector<float> x = in.ToFloat();
  ASSERT_TRUE(Forward(c.backbone->stack(), *st, x.data(), L, team, nullptr).ok());
  std::vector<float> all = in.ToFloat();  // the uncached run: prompt + the 4 ids
  all.resize((L + ids.size()) * H);
  for (size_t j = 0; j < ids.size(); ++j) {
    std::vector<float> row(H);
    ASSERT_TRUE(c.backbone->EmbedToken(static_cast<int32_t>(ids[j]), row.data()).ok());
    std::copy(row.begin(), row.end(), all.begin() + static_cast<long>((L + j) * H));
    ASSERT_TRUE(Forward(c.backbone->stack(), *st, row.data(), 1, team, nullptr).ok());
    Lfm2FinalNorm(c.backbone->stack(), row.data(), 1, row.data());
    Expect("decode/step" + std::to_string(j) + "_hidden", row.data(),
           LoadTrace(Trace(GetParam(), "decode__step" + std::to_string(j) + "_hidden")).ToFloat(), 5e-5);
  }
  auto fresh = Lfm2State::Create(c.backbone->stack(), L + ids.size(), 512);
  ASSERT_TRUE(Forward(c.backbone->stack(), *fresh, all.data(), L + ids.size(), team, nullptr).ok());
  Lfm2FinalNorm(c.backbone->stack(), all.data() + L * H, ids.size(), all.data() + L * H);
  Expect("decode/uncached_hidden", all.data() + L * H,
         LoadTrace(Trace(GetParam(), "decode__uncached_hidden")).ToFloat(), 5e-5);
}

// prefill2/: TEXT rows are embed_tokens rows; AUDIO_OUT rows the sum of the
// frame's 8 audio-embedding rows (history includes an end-of-audio frame);
// then the stack from the stored embeddings.
TEST_P(Backbone, AudioOutHistory) {
  Case& c = Load(GetParam());
  const NpyArray in = LoadTrace(Trace(GetParam(), "prefill2__in_emb"));
  const std::vector<float> ref = in.ToFloat();
  const size_t L = static_cast<size_t>(in.shape[0]), H = static_cast<size_t>(in.shape[1]);
  const std::vector<int64_t> flags = LoadTrace(Trace(GetParam(), "prefill2__modality_flag")).ToInt64();
  const std::vector<int64_t> text = LoadTrace(Trace(GetParam(), "prefill2__text_ids")).ToInt64();
  const NpyArray ao = LoadTrace(Trace(GetParam(), "prefill2__audio_out"));  // [8, frames]
  const std::vector<int64_t> codes = ao.ToInt64();
  const size_t frames = static_cast<size_t>(ao.shape[1]);
  size_t ti = 0, ai = 0;
  std::vector<float> row(H);
  for (size_t p = 0; p < L; ++p) {
    if (flags[p] == 1) {
      ASSERT_TRUE(c.backbone->EmbedToken(static_cast<int32_t>(text[ti++]), row.data()).ok());
      EXPECT_EQ(Compare(row.data(), {ref.begin() + static_cast<long>(p * H),
                                     ref.begin() + static_cast<long>((p + 1) * H)})
                    .max_abs,
                0.0);
    } else if (flags[p] == 3) {
      std::vector<int32_t> f(8);
      for (size_t k = 0; k < 8; ++k) f[k] = static_cast<int32_t>(codes[k * frames + ai]);
      ++ai;
      ASSERT_TRUE(c.backbone->EmbedAudioFrame(f, row.data()).ok());
      const std::vector<float> want(ref.begin() + static_cast<long>(p * H),
                                    ref.begin() + static_cast<long>((p + 1) * H));
      Expect("prefill2/in_emb audio-out row " + std::to_string(p), row.data(), want, 1e-6);
    }
  }
  EXPECT_EQ(ai, frames);
  ThreadTeam team(1);
  auto st = Lfm2State::Create(c.backbone->stack(), L, 512);
  std::vector<float> x = ref;
  ASSERT_TRUE(Forward(c.backbone->stack(), *st, x.data(), L, team, nullptr).ok());
  Lfm2FinalNorm(c.backbone->stack(), x.data(), L, x.data());
  Expect("prefill2/last_hidden", x.data(), LoadTrace(Trace(GetParam(), "prefill2__last_hidden")).ToFloat(),
         1e-4);
}

// The attention probe (word timing, Lfm2State::StartProbe) over prefill/'s rows: every recorded row
// sums to attention layers × heads (each head's softmax over the probed keys sums to 1; float32 sums of
// K terms, so within 1e-5 relative); the rows are the same bits whether the positions run in one call or
// one a call (the stack's prefill == decode contract) and after a Reset and rerun (rewritten, not added).
TEST_P(Backbone, AttentionProbeRows) {
  Case& c = Load(GetParam());
  const NpyArray in = LoadTrace(Trace(GetParam(), "prefill__in_emb"));
  const size_t L = static_cast<size_t>(in.shape[0]), H = static_cast<size_t>(in.shape[1]);
  ASSERT_GE(L, 6u);
  const size_t key_first = 1, key_n = L / 2 - 1, from = L / 2;
  const Lfm2Stack& stack = c.backbone->stack();
  const AttentionShape shape = stack.attention_shape();
  const double per_row = static_cast<double>(c.config.lfm.num_attention_layers() * shape.heads);
  ThreadTeam team(2);
  auto run = [&](bool one_call) {
    auto st = Lfm2State::Create(stack, L, 512);
    EXPECT_TRUE(st.ok());
    EXPECT_TRUE(st->StartProbe(key_first, key_n, from).ok());
    std::vector<float> x = in.ToFloat();
    if (one_call) {
      EXPECT_TRUE(Forward(stack, *st, x.data(), L, team, nullptr).ok());
    } else {
      for (size_t r = 0; r < L; ++r)
        EXPECT_TRUE(Forward(stack, *st, x.data() + r * H, 1, team, nullptr).ok());
    }
    std::vector<float> rows(st->probe_rows().begin(), st->probe_rows().end());
    st->Reset();  // a cache rebuild: the same positions again
    x = in.ToFloat();
    EXPECT_TRUE(Forward(stack, *st, x.data(), L, team, nullptr).ok());
    EXPECT_TRUE(std::equal(rows.begin(), rows.end(), st->probe_rows().begin(), st->probe_rows().end()))
        << "a rerun changed the probe rows";
    return rows;
  };
  const std::vector<float> a = run(true), b = run(false);
  ASSERT_EQ(a.size(), (L - from) * key_n);
  EXPECT_EQ(a, b) << "the probe rows differ between one call and one position a call";
  for (size_t r = 0; r < L - from; ++r) {
    double sum = 0;
    for (size_t j = 0; j < key_n; ++j) {
      EXPECT_GE(a[r * key_n + j], 0.0f);
      sum += a[r * key_n + j];
    }
    EXPECT_NEAR(sum, per_row, 1e-5 * per_row) << "row " << r;
  }
  auto st = Lfm2State::Create(stack, L, 512);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->StartProbe(2, 4, 5).code(), StatusCode::kInvalidArgument);  // keys [2, 6) after row 5
  EXPECT_EQ(st->StartProbe(0, 0, 5).code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Oracle, Backbone, ::testing::Values("lfm25_tiny", "lfm25_small"));

}  // namespace
}  // namespace lfmvox
