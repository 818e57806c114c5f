// The FastConformer encoder and audio adapter against the oracle traces of
// both cases (tests/data/lfm25_{tiny,small}/traces), fed the stored mels:
//   audio__mel.npy [128, 131]        → conformer__*, adapter__out
//   audio_speech__mel.npy [128, 491] → conformer_speech__*, adapter_speech__out
// Tolerance measured by the oracle (its README, not derived): per tensor, max|port − oracle| ≤
// k·max|oracle| with k = 5e-5 for the conformer and adapter groups (about 10×
// the float32-vs-float64 gap the oracle measured, 3.6e-6 and 2.3e-6).
// Also: results independent of the team size (bit for bit), of the scratch
// size, config validation and load errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "io/json_config.h"
#include "model_files.h"
#include "models/lfm25_audio/config.h"
#include "models/lfm25_audio/conformer.h"
#include "models/lfm25_audio/lfm2_config.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

using nlohmann::json;
using testing::CollectingSink;
using testing::Compare;
using testing::Diff;
using testing::LoadTrace;

constexpr double kTol = 5e-5;

struct Case {
  std::string dir;
  json config;                     // the file, for the config edits below
  ConformerConfig encoder_config;  // its `encoder` section as the model loads it
  int hidden = 0;
  std::optional<Checkpoint> ckpt;
  std::optional<AudioEncoder> encoder;
};

Case& Load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Case>> cache;
  auto& c = cache[name];
  if (!c) {
    c = std::make_unique<Case>();
    testing::ModelFiles files = testing::OpenModelFiles(name);
    c->dir = files.where;
    c->config = files.config;
    auto parsed = Lfm25AudioConfig::FromJson(c->config, c->dir);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    c->encoder_config = parsed->encoder;
    c->hidden = parsed->lfm.hidden_size;
    c->ckpt.emplace(std::move(*files.weights));
    auto enc = AudioEncoder::Load(*c->ckpt, c->encoder_config, c->hidden);
    EXPECT_TRUE(enc.ok()) << enc.status().ToString();
    c->encoder.emplace(std::move(enc).value());
  }
  return *c;
}

std::string TracePath(const std::string& c, const std::string& name) {
  return c + "/traces/" + name + ".npy";
}

// The stored mel [128, F] and F.
std::vector<float> Mel(const std::string& c, const std::string& group, size_t* frames) {
  NpyArray mel = LoadTrace(TracePath(c, group + "__mel"));
  EXPECT_EQ(mel.shape.size(), 2u);
  *frames = mel.shape.size() == 2 ? static_cast<size_t>(mel.shape[1]) : 0;
  return mel.ToFloat();
}

struct Encoded {
  std::vector<float> out;  // [T', H]
  CollectingSink sink;
};

Encoded Encode(const Case& c, const std::vector<float>& mel, size_t frames, size_t max_frames, int threads) {
  Encoded r;
  auto scratch = EncoderScratch::Create(*c.encoder, max_frames, threads);
  EXPECT_TRUE(scratch.ok()) << scratch.status().ToString();
  if (!scratch.ok()) return r;
  ThreadTeam team(threads);
  r.out.assign(ConformerConfig::SubsampledFrames(frames) * static_cast<size_t>(c.hidden), -1.0f);
  const Status st = c.encoder->Encode(mel.data(), frames, r.out.data(), **scratch, team, &r.sink);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

void Expect(const std::string& what, const std::vector<float>& port, const std::vector<float>& ref) {
  ASSERT_EQ(port.size(), ref.size()) << what;
  const Diff d = Compare(port.data(), ref);
  std::printf("  %-40s max abs %.3g  scale %.3g  rel %.3g\n", what.c_str(), d.max_abs, d.scale, d.rel());
  EXPECT_LE(d.rel(), kTol) << what << ": max abs " << d.max_abs << " scale " << d.scale;
}

// [rows, cols] → [cols, rows]
std::vector<float> Transpose(const std::vector<float>& x, size_t rows, size_t cols) {
  std::vector<float> y(x.size());
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) y[c * rows + r] = x[r * cols + c];
  }
  return y;
}

// Parity for one case and one input group ("audio" → conformer__*, adapter__*;
// "audio_speech" → conformer_speech__*, adapter_speech__*).
void CheckParity(const std::string& name, const std::string& input) {
  Case& c = Load(name);
  ASSERT_TRUE(c.encoder.has_value());
  const std::string suffix = input == "audio" ? "" : "_speech";
  const std::string conf = "conformer" + suffix + "__", adap = "adapter" + suffix + "__";
  size_t frames = 0;
  const std::vector<float> mel = Mel(name, input, &frames);
  ASSERT_GT(frames, 0u);
  const size_t t = ConformerConfig::SubsampledFrames(frames);
  const size_t d = static_cast<size_t>(c.encoder->config().d_model);
  std::printf("%s %s: F=%zu T'=%zu\n", name.c_str(), input.c_str(), frames, t);

  // conformer__out_len.npy: the frame count after subsampling.
  NpyArray len = LoadTrace(TracePath(name, conf + "out_len"));
  ASSERT_EQ(len.ToInt64().size(), 1u);
  EXPECT_EQ(static_cast<size_t>(len.ToInt64()[0]), t);

  Encoded r = Encode(c, mel, frames, frames, 2);
  auto& got = r.sink.tensors;
  auto check = [&](const std::string& trace, const std::vector<float>& port) {
    Expect(name + " " + trace, port, LoadTrace(TracePath(name, trace)).ToFloat());
  };
  check(conf + "pre_encode_out", got["pre_encode_out"]);
  check(conf + "pos_emb", got["pos_emb"]);
  for (int i = 0; i < c.encoder->config().n_layers; ++i) {
    const std::string l = "layer" + std::to_string(i) + "_out";
    check(conf + l, got[l]);
  }
  check(conf + "out", Transpose(got["out"], t, d));  // the trace is channels first, [d, T']
  check(adap + "out", r.out);
  EXPECT_EQ(got["adapter_out"], r.out);

  // A scratch sized for longer inputs gives the same bits: its positional
  // table holds this input's rows as a slice.
  Encoded longer = Encode(c, mel, frames, frames + 333, 2);
  EXPECT_EQ(longer.out, r.out);
  EXPECT_EQ(longer.sink.tensors, r.sink.tensors);
}

TEST(EncoderParity, TinySynthetic) { CheckParity("lfm25_tiny", "audio"); }
TEST(EncoderParity, TinySpeech) { CheckParity("lfm25_tiny", "audio_speech"); }
TEST(EncoderParity, SmallSynthetic) { CheckParity("lfm25_small", "audio"); }
TEST(EncoderParity, SmallSpeech) { CheckParity("lfm25_small", "audio_speech"); }

// One thread or two, every traced tensor and the output bit for bit: on the
// speech mel (several subsampling bands and attention query blocks) and on a
// random 30 s mel, long enough that the row-wise steps are split too.
TEST(Encoder, TeamSizeDoesNotChangeBits) {
  for (const char* name : {"lfm25_tiny", "lfm25_small"}) {
    Case& c = Load(name);
    ASSERT_TRUE(c.encoder.has_value());
    size_t frames = 0;
    const std::vector<float> speech = Mel(name, "audio_speech", &frames);
    std::vector<float> noise(128 * 3001);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : noise) v = normal(rng);
    using Input = std::pair<const std::vector<float>*, size_t>;
    for (const auto& [mel, f] : {Input{&speech, frames}, Input{&noise, 3001}}) {
      Encoded one = Encode(c, *mel, f, f, 1);
      Encoded two = Encode(c, *mel, f, f, 2);
      EXPECT_EQ(one.out, two.out) << name << " F=" << f;
      EXPECT_EQ(one.sink.tensors, two.sink.tensors) << name << " F=" << f;
    }
  }
}

// A clip that is not a multiple of 8 frames and shorter than one band, and a
// clip of one frame, still give ⌈F/8⌉ finite rows.
TEST(Encoder, ShortInputs) {
  Case& c = Load("lfm25_tiny");
  ASSERT_TRUE(c.encoder.has_value());
  size_t frames = 0;
  const std::vector<float> mel = Mel("lfm25_tiny", "audio", &frames);
  for (size_t f : {1, 2, 7, 9, 17}) {
    // The first f columns of the [128, F] mel, as a [128, f] input.
    std::vector<float> part(128 * f);
    for (size_t b = 0; b < 128; ++b) {
      for (size_t j = 0; j < f; ++j) part[b * f + j] = mel[b * frames + j];
    }
    Encoded r = Encode(c, part, f, 64, 1);
    ASSERT_EQ(r.out.size(), ConformerConfig::SubsampledFrames(f) * static_cast<size_t>(c.hidden));
    for (float v : r.out) ASSERT_TRUE(std::isfinite(v)) << "f=" << f;
  }
}

TEST(Encoder, RejectsTooLongInputAndLargeTeam) {
  Case& c = Load("lfm25_tiny");
  ASSERT_TRUE(c.encoder.has_value());
  auto scratch = EncoderScratch::Create(*c.encoder, 100, 1);
  ASSERT_TRUE(scratch.ok());
  std::vector<float> mel(128 * 101, 0.0f), out(13 * static_cast<size_t>(c.hidden));
  ThreadTeam one(1), two(2);
  Status st = c.encoder->Encode(mel.data(), 101, out.data(), **scratch, one, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("101"), std::string::npos) << st.ToString();
  st = c.encoder->Encode(mel.data(), 100, out.data(), **scratch, two, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_TRUE(c.encoder->Encode(mel.data(), 0, out.data(), **scratch, one, nullptr).ok());
  EXPECT_FALSE(EncoderScratch::Create(*c.encoder, 0, 1).ok());
  EXPECT_FALSE(EncoderScratch::Create(*c.encoder, 10, 0).ok());
}

// Each unsupported or malformed value is refused, and the message names the key.
TEST(ConformerConfig, RejectsUnsupportedValues) {
  Case& c = Load("lfm25_tiny");
  const json good = c.config["encoder"];
  const std::string where = "config.json [encoder]";
  ASSERT_TRUE(ConformerConfig::FromJson(good, where).ok());
  struct Bad {
    const char* key;
    json value;
    StatusCode code;
  };
  const Bad bad[] = {
      {"subsampling", "striding", StatusCode::kUnimplemented},
      {"subsampling_factor", 4, StatusCode::kUnimplemented},
      {"self_attention_model", "abs_pos", StatusCode::kUnimplemented},
      {"att_context_size", json::array({70, 1}), StatusCode::kUnimplemented},
      {"conv_norm_type", "layer_norm", StatusCode::kUnimplemented},
      {"causal_downsampling", true, StatusCode::kUnimplemented},
      {"feat_out", 256, StatusCode::kUnimplemented},
      {"reduction", "pooling", StatusCode::kUnimplemented},
      {"reduction_factor", 2, StatusCode::kUnimplemented},
      {"conv_context_size", "causal", StatusCode::kUnimplemented},
      {"conv_kernel_size", 8, StatusCode::kInvalidArgument},
      {"n_heads", 3, StatusCode::kInvalidArgument},
      {"d_model", "64", StatusCode::kInvalidArgument},
      {"xscaling", 1, StatusCode::kInvalidArgument},
      {"n_layers", 0, StatusCode::kOutOfRange},
      {"use_bias", false, StatusCode::kUnimplemented},  // NeMo keys liquid-audio runs at their default
      {"global_tokens", 4, StatusCode::kUnimplemented},
  };
  for (const Bad& b : bad) {
    json j = good;
    j[b.key] = b.value;
    auto r = ConformerConfig::FromJson(j, where);
    ASSERT_FALSE(r.ok()) << b.key;
    EXPECT_EQ(r.status().code(), b.code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(b.key), std::string::npos) << r.status().ToString();
  }
  for (const char* key : {"xscaling", "d_model", "subsampling"}) {  // required keys
    json j = good;
    j.erase(key);
    auto r = ConformerConfig::FromJson(j, where);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().ToString();
  }
  // The documented defaults of optional keys.
  json j = good;
  j.erase("att_context_size");
  j.erase("conv_context_size");
  j["subsampling_conv_channels"] = -1;  // NeMo: as many as d_model
  auto r = ConformerConfig::FromJson(j, where);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->subsampling_channels, r->d_model);
  EXPECT_FALSE(r->xscaling);
  EXPECT_EQ(r->subsampled_bins(), 16);
  // Keys the engine does not use (training-only, library metadata) are ignored, not refused.
  j["stochastic_depth_drop_prob"] = 0.1;
  j["torch_dtype"] = "bfloat16";
  j["use_bias"] = true;
  EXPECT_TRUE(ConformerConfig::FromJson(j, where).ok());
  EXPECT_FALSE(AudioEncoder::Load(*c.ckpt, ConformerConfig{}, c.hidden).ok());
}

// A checkpoint without one encoder tensor: Load fails with NotFound naming it.
TEST(AudioEncoder, MissingTensorIsNamed) {
  if (!testing::WeightsVariant().empty()) GTEST_SKIP() << "edits the safetensors snapshot";
  Case& c = Load("lfm25_tiny");
  const std::string missing = "conformer.layers.1.conv.batch_norm.running_var";
  std::vector<TensorToWrite> tensors;
  for (const std::string& n : c.ckpt->Names()) {
    if (n == missing) continue;
    auto t = c.ckpt->Get(n);
    ASSERT_TRUE(t.ok());
    TensorToWrite w;
    w.name = n;
    w.dtype = t->dtype;
    w.shape.assign(t->shape.dim.begin(), t->shape.dim.begin() + t->shape.rank);
    w.data = t->data;
    w.size = t->bytes();
    tensors.push_back(w);
  }
  const std::string path = testing::ScratchPath("encoder_missing_tensor.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  auto enc = AudioEncoder::Load(*ck, c.encoder_config, c.hidden);
  ASSERT_FALSE(enc.ok());
  EXPECT_EQ(enc.status().code(), StatusCode::kNotFound) << enc.status().ToString();
  EXPECT_NE(enc.status().message().find(missing), std::string::npos) << enc.status().ToString();
  // A wrong backbone width is a shape error on the adapter's last Linear.
  auto wrong = AudioEncoder::Load(*c.ckpt, c.encoder_config, c.hidden + 1);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("audio_adapter.model.3.weight"), std::string::npos)
      << wrong.status().ToString();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace lfmvox
