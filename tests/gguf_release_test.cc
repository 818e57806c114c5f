// Liquid's four-file GGUF layout of LFM2.5-Audio (spec GGUF_AND_MIMI.md part
// 1), written from the oracle snapshots by lfmvox's writer and read back:
// file inventory, names, per-tensor types, values, the configuration rebuilt
// from metadata, the merged-vocoder variant and bad release folders. The
// oracle traces themselves run on the GGUF path in the model suites
// (tests/model_files.h, the gguf-f32 / gguf-f16 ctest variants).
#include "models/lfm25_audio/gguf_release.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "lfmvox/lfmvox.h"
#include "models/lfm25_audio/detokenizer.h"
#include "models/lfm25_audio/log_mel.h"
#include "models/lfm25_audio/session.h"
#include "pipeline_util.h"
#include "tensor/quant.h"
#include "threading/thread_team.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

namespace fs = std::filesystem;
using testing::DataPath;

std::string Fresh(const std::string& name) {
  const std::string d =
      ::testing::TempDir() + "/gguf_release_test_" + name + "_" + std::to_string(::getpid());
  fs::remove_all(d);
  return d;
}

Lfm25GgufFiles Write(const std::string& snapshot, const std::string& out, WeightFormat type,
                     bool embed = true) {
  Lfm25GgufWriteOptions o;
  o.type = type;
  o.embed_configs = embed;
  Result<Lfm25GgufFiles> f = WriteLfm25GgufRelease(DataPath(snapshot), out, o);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : Lfm25GgufFiles{};
}

std::unique_ptr<GgufFile> OpenFile(const std::string& path) {
  Result<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

// Values of a tensor view widened to f32 (any dtype the loader hands out).
std::vector<float> Values(const TensorView& t) {
  const int64_t cols = t.shape.rank == 0 ? 1 : t.shape[t.shape.rank - 1];
  const size_t rows = static_cast<size_t>(t.elements() / cols);
  WeightFormat f = WeightFormat::kF32;
  EXPECT_TRUE(WeightFormatForDType(t.dtype, &f)) << DTypeName(t.dtype);
  const size_t rb = FormatRowBytes(f, static_cast<size_t>(cols));
  std::vector<float> out(static_cast<size_t>(t.elements()));
  for (size_t r = 0; r < rows; ++r) {
    DequantizeRow(f, static_cast<const uint8_t*>(t.data) + r * rb, static_cast<size_t>(cols),
                  out.data() + r * static_cast<size_t>(cols));
  }
  return out;
}

// The real backbone layout for the tiny oracle: 6 layers, attention at 2 and
// 4: 2 globals + 8 per conv layer + 11 per attention layer [spec §1.2 count].
TEST(GgufRelease, BackboneInventoryAndTypes) {
  const std::string dir = Fresh("inventory");
  const Lfm25GgufFiles f = Write("lfm25_tiny", dir, WeightFormat::kQ4_0);
  auto bb = OpenFile(f.backbone);
  ASSERT_NE(bb, nullptr);
  EXPECT_EQ(bb->tensors().size(), 2u + 8u * 4 + 11u * 2);
  EXPECT_EQ(*bb->metadata().GetString("general.architecture"), "lfm2");
  EXPECT_EQ(*bb->metadata().GetU32("general.file_type"), 2u);
  EXPECT_EQ(*bb->metadata().GetIntArray("lfm2.attention.head_count_kv"),
            (std::vector<int64_t>{0, 0, 2, 0, 2, 0}));
  auto type = [&](const char* n) {
    const GgufTensor* t = bb->FindTensor(n);
    EXPECT_NE(t, nullptr) << n;
    return t == nullptr ? ~0u : t->type;
  };
  // The tied head takes llama-quantize's output rule only where a row is whole
  // 256-blocks (hidden 128 is not: Q8_0); norms and conv taps stay F32.
  EXPECT_EQ(type("token_embd.weight"), static_cast<uint32_t>(GgmlType::Q8_0));
  EXPECT_EQ(type("token_embd_norm.weight"), static_cast<uint32_t>(GgmlType::F32));
  EXPECT_EQ(type("blk.0.shortconv.conv.weight"), static_cast<uint32_t>(GgmlType::F32));
  EXPECT_EQ(type("blk.0.ffn_gate.weight"), static_cast<uint32_t>(GgmlType::Q4_0));
  EXPECT_EQ(type("blk.2.attn_k.weight"), static_cast<uint32_t>(GgmlType::Q4_0));
  EXPECT_EQ(type("blk.2.attn_q_norm.weight"), static_cast<uint32_t>(GgmlType::F32));
  const GgufTensor* conv = bb->FindTensor("blk.0.shortconv.conv.weight");
  ASSERT_NE(conv, nullptr);  // squeezed: {3, 128}
  EXPECT_EQ(conv->n_dims, 2);
  EXPECT_EQ(conv->ne[0], 3u);
  EXPECT_EQ(conv->ne[1], 128u);
  // The encoder: its convolution module and subsampling stay F32, linears quantize.
  auto mm = OpenFile(f.mmproj);
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(*mm->metadata().GetString("clip.projector_type"), "lfm2a");
  for (const GgufTensor& t : mm->tensors()) {
    const bool conv_module = t.name.find("conv") != std::string::npos;
    const bool pointwise = t.name.find("conv_pw") != std::string::npos && t.name.ends_with(".weight");
    if ((conv_module && !pointwise) || t.n_dims == 1) {
      EXPECT_EQ(t.type, static_cast<uint32_t>(GgmlType::F32)) << t.name;
    }
  }
  EXPECT_EQ(mm->FindTensor("conformer.layers.0.conv.batch_norm.running_mean"), nullptr);
  EXPECT_EQ(mm->FindTensor("a.blk.0.ffn_up.weight")->type, static_cast<uint32_t>(GgmlType::Q4_0));
  // The vocoder keeps Hugging Face names but for the shortened attention.
  auto voc = OpenFile(f.vocoder);
  ASSERT_NE(voc, nullptr);
  EXPECT_NE(voc->FindTensor("depthformer.layers.0.operator.attention.q_layernorm.weight"), nullptr);
  EXPECT_EQ(*voc->metadata().GetU32("depthformer_n_layer"), 2u);
  EXPECT_NE(voc->FindTensor("emb.emb.weight"), nullptr);
  EXPECT_EQ(voc->FindTensor("lfm.layers.0.conv.in_proj.weight"), nullptr);  // split release
  auto dt = OpenFile(f.detokenizer);
  ASSERT_NE(dt, nullptr);
  EXPECT_EQ(*dt->metadata().GetString("tokenizer.ggml.model"), "none");
  EXPECT_EQ(*dt->metadata().GetU32("lfm2.attention.sliding_window"), 30u);
  EXPECT_EQ(*dt->metadata().GetU32("lfm2.embedding_length_out"), 1282u);
  fs::remove_all(dir);
}

// F32: every tensor the model reads comes back under its Hugging Face name
// and shape with the snapshot's values exactly (bf16 widens exactly); the
// folded BatchNorm is the converter's formula.
TEST(GgufRelease, F32ValuesComeBackExactly) {
  for (const char* snapshot : {"lfm25_tiny", "lfm25_small"}) {
    const std::string dir = Fresh(std::string("f32_") + snapshot);
    const Lfm25GgufFiles f = Write(snapshot, dir, WeightFormat::kF32);
    Result<Lfm25GgufModel> g = OpenLfm25GgufRelease(f);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    Result<Checkpoint> ck = Checkpoint::Open(DataPath(snapshot));
    ASSERT_TRUE(ck.ok());
    size_t compared = 0;
    for (const std::string& name : ck->Names()) {
      if (!g->weights->Has(name)) continue;
      const TensorView a = *ck->Get(name), b = *g->weights->Get(name);
      ASSERT_EQ(a.shape, b.shape) << name;
      const bool bn = name.find("batch_norm") != std::string::npos;
      if (bn) continue;
      EXPECT_EQ(Values(a), Values(b)) << name;
      ++compared;
    }
    // Everything but the dropped training tensors and the four BN statistics per layer.
    EXPECT_GE(compared + 2 + 5 * 2, ck->Names().size() - 0) << snapshot;
    // BatchNorm: scale = γ/√(var + eps), shift = β − mean·scale.
    const std::string p = "conformer.layers.0.conv.batch_norm.";
    const std::vector<float> gamma = Values(*ck->Get(p + "weight")), beta = Values(*ck->Get(p + "bias")),
                             mean = Values(*ck->Get(p + "running_mean")),
                             var = Values(*ck->Get(p + "running_var"));
    const std::vector<float> scale = Values(*g->weights->Get(p + "weight")),
                             shift = Values(*g->weights->Get(p + "bias"));
    ASSERT_EQ(scale.size(), gamma.size());
    for (size_t i = 0; i < scale.size(); ++i) {
      const float s = gamma[i] / std::sqrt(var[i] + 1e-5f);
      EXPECT_EQ(scale[i], s) << i;
      EXPECT_EQ(shift[i], beta[i] - mean[i] * s) << i;
    }
    // The detokenizer's tensors, split over the vocoder and the tokenizer file.
    Result<Checkpoint> dck = Checkpoint::Open(DataPath(std::string(snapshot) + "/audio_detokenizer"));
    ASSERT_TRUE(dck.ok());
    ASSERT_TRUE(g->detokenizer.has_value());
    for (const std::string& name : dck->Names()) {
      Result<TensorView> b = g->detokenizer->Get(name);
      ASSERT_TRUE(b.ok()) << name;
      EXPECT_EQ(dck->Get(name)->shape, b->shape) << name;
      EXPECT_EQ(Values(*dck->Get(name)), Values(*b)) << name;
    }
    fs::remove_all(dir);
  }
}

// The configuration rebuilt from the files equals config.json in every field
// the stages use; without lfmvox's keys (Liquid's exact files) the values the
// files cannot hold come from the published model.
TEST(GgufRelease, ConfigFromMetadata) {
  for (bool embed : {true, false}) {
    const std::string dir = Fresh(embed ? "cfg_embed" : "cfg_plain");
    const Lfm25GgufFiles f = Write("lfm25_small", dir, WeightFormat::kF16, embed);
    Result<Lfm25GgufModel> g = OpenLfm25GgufRelease(f);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    Result<Lfm25AudioConfig> got = Lfm25AudioConfig::FromJson(g->config, "gguf");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    Result<Lfm25AudioConfig> want = Lfm25AudioConfig::Load(DataPath("lfm25_small/config.json"));
    ASSERT_TRUE(want.ok());
    const Lfm2Config &a = got->lfm, &b = want->lfm;
    EXPECT_EQ(a.hidden_size, b.hidden_size);
    EXPECT_EQ(a.num_layers, b.num_layers);
    EXPECT_EQ(a.num_heads, b.num_heads);
    EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
    EXPECT_EQ(a.head_dim, b.head_dim);
    EXPECT_EQ(a.ffn_dim, b.ffn_dim);
    EXPECT_EQ(a.conv_kernel, b.conv_kernel);
    EXPECT_EQ(a.max_positions, b.max_positions);
    EXPECT_EQ(a.norm_eps, b.norm_eps);
    EXPECT_EQ(a.rope_theta, b.rope_theta);
    EXPECT_EQ(a.layers, b.layers);
    EXPECT_EQ(got->codebooks, want->codebooks);
    EXPECT_EQ(got->depthformer.layers, want->depthformer.layers);
    EXPECT_EQ(got->depthformer.dim, want->depthformer.dim);
    EXPECT_EQ(got->depthformer.heads, want->depthformer.heads);
    EXPECT_EQ(got->depthformer.kv_heads, want->depthformer.kv_heads);
    EXPECT_EQ(got->encoder.feat_in, want->encoder.feat_in);
    EXPECT_EQ(got->encoder.n_layers, want->encoder.n_layers);
    EXPECT_EQ(got->encoder.d_model, want->encoder.d_model);
    EXPECT_EQ(got->encoder.n_heads, want->encoder.n_heads);
    EXPECT_EQ(got->encoder.subsampling_channels, want->encoder.subsampling_channels);
    EXPECT_EQ(got->encoder.ff_expansion_factor, want->encoder.ff_expansion_factor);
    EXPECT_EQ(got->encoder.conv_kernel_size, want->encoder.conv_kernel_size);
    EXPECT_EQ(got->preprocessor.n_mels, want->preprocessor.n_mels);
    EXPECT_EQ(got->preprocessor.hop_length, want->preprocessor.hop_length);
    if (embed) {
      EXPECT_EQ(got->interleaved_n_text, want->interleaved_n_text);
      EXPECT_EQ(got->interleaved_n_audio, want->interleaved_n_audio);
    } else {  // the published LFM2.5-Audio-1.5B schedule
      EXPECT_EQ(got->interleaved_n_text, 6);
      EXPECT_EQ(got->interleaved_n_audio, 12);
    }
    Result<Lfm25DetokenizerConfig> dg = Lfm25DetokenizerConfig::FromJson(g->detokenizer_config, "gguf");
    ASSERT_TRUE(dg.ok()) << dg.status().ToString();
    Result<Lfm25DetokenizerConfig> dw =
        Lfm25DetokenizerConfig::Load(DataPath("lfm25_small/audio_detokenizer/config.json"));
    ASSERT_TRUE(dw.ok());
    EXPECT_EQ(dg->lfm.layers, dw->lfm.layers);
    EXPECT_EQ(dg->lfm.sliding_window, dw->lfm.sliding_window);
    EXPECT_EQ(dg->lfm.ffn_dim, dw->lfm.ffn_dim);
    EXPECT_EQ(dg->num_codebooks, dw->num_codebooks);
    EXPECT_EQ(dg->upsample, dw->upsample);
    EXPECT_EQ(dg->hop, dw->hop);
    EXPECT_EQ(dg->n_fft, dw->n_fft);
    EXPECT_EQ(dg->output_size, dw->output_size);
    // The text tokenizer from tokenizer.ggml.*: the same ids for text and specials.
    auto m = Lfm25AudioModel::Load(dir, {.load_detokenizer = false});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto ref = Lfm25AudioModel::Load(DataPath("lfm25_small"), {.load_detokenizer = false});
    ASSERT_TRUE(ref.ok());
    for (const char* text :
         {"Hello, world!", "  two  spaces\nand a line", "<|im_start|>user\nhi<|im_end|>"}) {
      EXPECT_EQ(*(*m)->tokenizer().Encode(text), *(*ref)->tokenizer().Encode(text)) << text;
    }
    EXPECT_EQ((*m)->special().im_start, (*ref)->special().im_start);
    EXPECT_EQ((*m)->special().audio_start, (*ref)->special().audio_start);
    fs::remove_all(dir);
  }
}

// The older "merged" vocoder carries the detokenizer's layers under their
// Hugging Face names (lfm.*, lin.*) and no tokenizer-*.gguf exists: the same
// detokenizer, the same PCM, bit for bit.
TEST(GgufRelease, MergedVocoderLayout) {
  const std::string dir = Fresh("merged");
  const Lfm25GgufFiles f = Write("lfm25_tiny", dir, WeightFormat::kF32, /*embed=*/false);
  auto voc = OpenFile(f.vocoder);
  auto dt = OpenFile(f.detokenizer);
  ASSERT_TRUE(voc && dt);
  GgufWriter w;
  ASSERT_TRUE(w.AddString("general.architecture", *voc->metadata().GetString("general.architecture")).ok());
  ASSERT_TRUE(w.AddU32("depthformer_n_layer", *voc->metadata().GetU32("depthformer_n_layer")).ok());
  ASSERT_TRUE(w.AddU32("depthformer_n_embd", *voc->metadata().GetU32("depthformer_n_embd")).ok());
  auto bytes = [](const GgufTensor& t) {
    return std::string_view(reinterpret_cast<const char*>(t.data), t.bytes);
  };
  auto ne = [](const GgufTensor& t) { return std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims); };
  for (const GgufTensor& t : voc->tensors()) ASSERT_TRUE(w.AddTensor(t.name, t.type, ne(t), bytes(t)).ok());
  // The detokenizer's layers as the older converter wrote them: Hugging Face names, shortconv taps 3-D.
  const std::map<std::string, std::string> hf = {{"token_embd.weight", "lfm.embed_tokens.weight"},
                                                 {"token_embd_norm.weight", "lfm.embedding_norm.weight"},
                                                 {"dense_2.weight", "lin.weight"},
                                                 {"dense_2.bias", "lin.bias"}};
  Result<Checkpoint> dck = Checkpoint::Open(DataPath("lfm25_tiny/audio_detokenizer"));
  ASSERT_TRUE(dck.ok());
  std::vector<std::vector<float>> keep;
  for (const std::string& name : dck->Names()) {
    if (name == "emb.emb.weight" || name == "istft.window") continue;
    const TensorView t = *dck->Get(name);
    keep.push_back(Values(t));
    std::vector<uint64_t> dims;
    for (int i = t.shape.rank - 1; i >= 0; --i) dims.push_back(static_cast<uint64_t>(t.shape[i]));
    ASSERT_TRUE(w.AddTensor(name, static_cast<uint32_t>(GgmlType::F32), dims,
                            std::string_view(reinterpret_cast<const char*>(keep.back().data()),
                                             keep.back().size() * 4))
                    .ok())
        << name;
  }
  (void)hf;
  const std::string merged_dir = Fresh("merged_set");
  fs::create_directories(merged_dir);
  ASSERT_TRUE(w.Write(merged_dir + "/vocoder-LFM2.5-Audio-1.5B-F32.gguf").ok());
  fs::copy_file(f.backbone, merged_dir + "/LFM2.5-Audio-1.5B-F32.gguf");
  Result<std::unique_ptr<Lfm25Detokenizer>> a = Lfm25Detokenizer::Load(merged_dir);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Result<std::unique_ptr<Lfm25Detokenizer>> b = Lfm25Detokenizer::Load(DataPath("lfm25_tiny"));
  ASSERT_TRUE(b.ok());
  // Published defaults for what the merged file does not say; the tensors for the rest.
  EXPECT_EQ((*a)->config().lfm.layers, (*b)->config().lfm.layers);
  EXPECT_EQ((*a)->config().lfm.num_kv_heads, (*b)->config().lfm.num_kv_heads);
  EXPECT_EQ((*a)->config().lfm.ffn_dim, (*b)->config().lfm.ffn_dim);
  ThreadTeam team(1);
  const std::vector<int32_t> codes = {1, 2, 3, 4, 5, 6, 7, 8, 100, 200, 300, 400, 500, 600, 700, 800};
  auto run = [&](const Lfm25Detokenizer& m) {
    auto s = Lfm25DetokenizerSession::Create(m, 2);
    EXPECT_TRUE(s.ok());
    std::vector<float> pcm(2 * 1920);
    auto n = (*s)->Step(codes, pcm, team);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    pcm.resize(n.ok() ? *n : 0);
    return pcm;
  };
  const std::vector<float> pa = run(**a), pb = run(**b);
  ASSERT_FALSE(pb.empty());
  EXPECT_EQ(pa, pb);
  fs::remove_all(dir);
  fs::remove_all(merged_dir);
}

// Folders that are no release, or several, or half of one: errors that say what to do.
TEST(GgufRelease, BadFoldersAreClearErrors) {
  const std::string dir = Fresh("bad");
  const Lfm25GgufFiles f8 = Write("lfm25_tiny", dir, WeightFormat::kQ8_0);
  const Lfm25GgufFiles f4 = Write("lfm25_tiny", dir, WeightFormat::kQ4_0);
  Result<Lfm25GgufFiles> two = FindLfm25GgufRelease(dir);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("several GGUF sets (Q4_0, Q8_0)"), std::string::npos)
      << two.status().message();
  // One file of the set picks it.
  Result<Lfm25GgufFiles> pick = FindLfm25GgufRelease(f4.backbone);
  ASSERT_TRUE(pick.ok()) << pick.status().ToString();
  EXPECT_EQ(pick->vocoder, f4.vocoder);
  EXPECT_TRUE(Lfm25AudioModel::Load(f8.mmproj).ok());
  // Without its vocoder the set loads for what it can do, and says what speech output lacks.
  fs::remove(f4.vocoder);
  Result<Lfm25GgufFiles> half = FindLfm25GgufRelease(f4.backbone);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_TRUE(half->vocoder.empty());
  auto no_vocoder = Lfm25AudioModel::Load(f4.backbone);
  ASSERT_TRUE(no_vocoder.ok()) << no_vocoder.status().ToString();
  EXPECT_FALSE((*no_vocoder)->has_depthformer());
  EXPECT_NE((*no_vocoder)->speech_out_missing().find("vocoder-*.gguf"), std::string::npos)
      << (*no_vocoder)->speech_out_missing();
  // A tensor type lfmvox has no kernel for is named with its tensor.
  auto bb = OpenFile(f8.backbone);
  ASSERT_NE(bb, nullptr);
  GgufWriter w;
  for (const std::string& k : bb->metadata().keys()) {
    const GgufValue* v = bb->metadata().Find(k);
    if (v->type() == GgufValueType::kString) {
      ASSERT_TRUE(w.AddString(k, v->string_value()).ok());
    }
    if (k.rfind("lfm2.", 0) == 0 && !v->is_array() && v->type() == GgufValueType::kU32) {
      ASSERT_TRUE(w.AddU32(k, *bb->metadata().GetU32(k)).ok());
    }
  }
  std::vector<std::string> q41_storage;
  for (const GgufTensor& t : bb->tensors()) {
    std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    uint32_t type = t.type;
    std::string_view data(reinterpret_cast<const char*>(t.data), t.bytes);
    if (t.name == "blk.0.ffn_up.weight") {  // Q4_1 (20 bytes per 32): same shape, other type
      type = static_cast<uint32_t>(GgmlType::Q4_1);
      q41_storage.emplace_back(t.elements / 32 * 20, '\0');
      data = q41_storage.back();
    }
    ASSERT_TRUE(w.AddTensor(t.name, type, ne, data).ok());
  }
  const std::string odd = dir + "/odd.gguf";
  ASSERT_TRUE(w.Write(odd).ok());
  Result<Lfm2Gguf> g = OpenLfm2Gguf(odd);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("blk.0.ffn_up.weight is stored as Q4_1"), std::string::npos)
      << g.status().message();
  fs::remove_all(dir);
}

// Q8_0 and Q4_0 files run end to end (TTS greedy), and their backbone error
// against F32 stays within what the block arithmetic allows. Per matmul,
// 8-bit weights (error ≤ d/2 with d = amax/127 per 32) and 8-bit activations
// give a relative error of about 2·(1/127)/√12 ≈ 0.5 % (−46 dB); along the
// tiny stack's 6 layers × 3–4 matmuls it grows at most like their count (×24:
// 12 %, −18 dB); 4-bit weights (d = amax/8) are 16× coarser (−22 dB per
// matmul). Bounds: rel. RMS ≤ 0.12 for Q8_0, ≤ 1.0 for Q4_0 (finite, and
// the model still runs), measured in the test output.
TEST(GgufRelease, QuantizedFilesRunEndToEnd) {
  Result<std::unique_ptr<Lfm25AudioModel>> ref =
      Lfm25AudioModel::Load(DataPath("lfm25_tiny"), {.load_detokenizer = false});
  ASSERT_TRUE(ref.ok());
  const std::vector<int32_t> prompt = testing::TraceIds("lfm25_tiny/traces/tts__text_ids.npy");
  ThreadTeam team(2);
  auto last_hidden = [&](const Lfm25AudioModel& m) {
    auto s = Lfm25Session::Create(m, {.threads = 2, .context = 256});
    EXPECT_TRUE(s.ok());
    EXPECT_TRUE((*s)->AppendTokens(prompt).ok());
    auto h = (*s)->Prefill(team);
    EXPECT_TRUE(h.ok());
    const size_t H = static_cast<size_t>(m.config().lfm.hidden_size);
    return std::vector<float>(*h, *h + H);
  };
  const std::vector<float> want = last_hidden(**ref);
  for (auto [type, bound] : {std::pair{WeightFormat::kQ8_0, 0.12}, {WeightFormat::kQ4_0, 1.0}}) {
    const std::string dir = Fresh(std::string("e2e_") + WeightFormatName(type));
    Write("lfm25_tiny", dir, type);
    auto m = Lfm25AudioModel::Load(dir);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const std::vector<float> got = last_hidden(**m);
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i]));
      num += (got[i] - want[i]) * (got[i] - want[i]);
      den += want[i] * want[i];
    }
    const double rel = std::sqrt(num / den);
    std::printf("[%s] backbone last hidden: relative RMS error %.4f (%.1f dB)\n", WeightFormatName(type), rel,
                -20 * std::log10(rel));
    EXPECT_LE(rel, bound) << WeightFormatName(type);
    // Quantizing the snapshot at load time applies the same rules to the same
    // values: the same model, bit for bit.
    auto at_load =
        Lfm25AudioModel::Load(DataPath("lfm25_tiny"), {.load_detokenizer = false, .weights = type});
    ASSERT_TRUE(at_load.ok()) << at_load.status().ToString();
    EXPECT_EQ(last_hidden(**at_load), got) << WeightFormatName(type);
    // Generation runs and produces frames; the detokenizer decodes them.
    auto s = Lfm25Session::Create(**m, {.threads = 2, .context = 256});
    ASSERT_TRUE(s.ok());
    std::vector<int32_t> p = prompt;
    p.push_back((*m)->special().audio_start);
    ASSERT_TRUE((*s)->AppendTokens(p).ok());
    testing::RowSink sink;
    auto r = (*s)->Generate({.mode = GenerationMode::kSequential, .max_new_tokens = 12}, sink, team);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_GT(r->audio_frames, 0);
    fs::remove_all(dir);
  }
}

// A copy of GGUF file `src` at `dst`: each key of `keys` set to its value (in place, or added at the end)
// or, mapped to nullopt, removed; the tensors the same bytes, but for `patch` written at byte `at` of
// tensor `tensor` when given.
struct GgufEdit {
  std::map<std::string, std::optional<GgufValue>> keys = {};
  std::string tensor = {};
  size_t at = 0;
  std::string patch = {};
};
void Rewrite(const std::string& src, const std::string& dst, const GgufEdit& e) {
  auto f = OpenFile(src);
  ASSERT_NE(f, nullptr);
  GgufWriter w;
  for (const std::string& k : f->metadata().keys()) {
    auto it = e.keys.find(k);
    if (it == e.keys.end()) {
      ASSERT_TRUE(w.Add(k, *f->metadata().Find(k)).ok()) << k;
    } else if (it->second) {
      ASSERT_TRUE(w.Add(k, *it->second).ok()) << k;
    }
  }
  for (const auto& [k, v] : e.keys) {
    if (v && !f->metadata().Has(k)) {
      ASSERT_TRUE(w.Add(k, *v).ok()) << k;
    }
  }
  std::string patched;
  for (const GgufTensor& t : f->tensors()) {
    std::string_view data(reinterpret_cast<const char*>(t.data), t.bytes);
    if (t.name == e.tensor) {
      patched.assign(data);
      patched.replace(e.at, e.patch.size(), e.patch);
      data = patched;
    }
    ASSERT_TRUE(
        w.AddTensor(t.name, t.type, std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), data).ok());
  }
  ASSERT_TRUE(w.Write(dst).ok());
}

// A folder beside `set`'s folder holding its files as links, but for the backbone: `set`'s backbone
// rewritten with `e`, under the same name.
std::string WithBackbone(const Lfm25GgufFiles& set, const std::string& name, const GgufEdit& e) {
  const std::string dir = Fresh(name);
  fs::create_directories(dir);
  for (const std::string& p : {set.mmproj, set.vocoder, set.detokenizer})
    fs::create_symlink(fs::canonical(p), fs::path(dir) / fs::path(p).filename());
  Rewrite(set.backbone, dir + "/" + fs::path(set.backbone).filename().string(), e);
  return dir;
}

// Integers a file states that do not fit where they land, or sizes that contradict its tensors, are
// errors naming the key (lfm25_tiny's release; the file rewritten unedited loads, so each error is the
// edit's).
TEST(GgufRelease, IntegersThatDoNotFitAndSizesThatDisagreeAreErrors) {
  const std::string dir = Fresh("ints");
  const Lfm25GgufFiles set = Write("lfm25_tiny", dir, WeightFormat::kF16);
  auto bb = OpenFile(set.backbone);
  ASSERT_NE(bb, nullptr);
  const size_t tokens = bb->metadata().Find("tokenizer.ggml.tokens")->size();
  const uint64_t rows = bb->FindTensor("token_embd.weight")->ne[1];
  const GgufValue* types = bb->metadata().Find("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  std::vector<uint8_t> wide(types->size() * 8);
  for (size_t i = 0; i < types->size(); ++i) {
    int64_t t = 0;
    ASSERT_TRUE(types->IntAt(i, &t));
    const int64_t v = t + (int64_t{1} << 32);
    std::memcpy(wide.data() + i * 8, &v, 8);
  }
  const std::string plain = WithBackbone(set, "ints_plain", {});
  ASSERT_TRUE(AudioModel::Load(plain).ok());
  using T = GgufValueType;
  const struct {
    const char* key;
    GgufValue value;
    std::vector<std::string> want;
  } cases[] = {
      {"tokenizer.ggml.bos_token_id",
       GgufValue::Integer(T::kU64, (uint64_t{1} << 32) + 7),
       {"tokenizer.ggml.bos_token_id", "4294967303, which does not fit i32"}},
      {"tokenizer.ggml.eos_token_id",
       GgufValue::Integer(T::kU64, uint64_t{1} << 40),
       {"tokenizer.ggml.eos_token_id", "which does not fit i32"}},
      {"tokenizer.ggml.eos_token_id",
       GgufValue::Integer(T::kU32, tokens),
       {"tokenizer.ggml.eos_token_id is " + std::to_string(tokens) + ", not one of the " +
        std::to_string(tokens) + " token ids"}},
      {"tokenizer.ggml.token_type",
       GgufValue::ScalarArray(T::kI64, wide),
       {"tokenizer.ggml.token_type[0] is", "which does not fit i32"}},
      {"lfm2.vocab_size",
       GgufValue::Integer(T::kU32, 10),
       {"lfm2.vocab_size is 10 but token_embd.weight has " + std::to_string(rows) + " rows"}},
      {"lfm2.vocab_size",
       GgufValue::Integer(T::kU32, uint64_t{1} << 31),
       {"lfm2.vocab_size is 2147483648 but token_embd.weight has " + std::to_string(rows) + " rows"}},
      {"lfm2.vocab_size",
       GgufValue::Integer(T::kU64, uint64_t{1} << 40),
       {"lfm2.vocab_size", "does not fit u32"}},
  };
  int n = 0;
  for (const auto& c : cases) {
    const std::string d = WithBackbone(set, "ints_" + std::to_string(n++), {.keys = {{c.key, c.value}}});
    Result<std::shared_ptr<const AudioModel>> m = AudioModel::Load(d);
    ASSERT_FALSE(m.ok()) << c.key << " = " << c.value.ToString();
    for (const std::string& w : c.want)
      EXPECT_NE(m.status().message().find(w), std::string::npos) << m.status().message();
    fs::remove_all(d);
  }
  fs::remove_all(plain);
  fs::remove_all(dir);
}

// Two files of one part in a folder (a second backbone of the same set) is an error naming both.
TEST(GgufRelease, TwoBackbonesInOneFolderAreAnErrorNamingBoth) {
  const std::string dir = Fresh("two_backbones");
  const Lfm25GgufFiles set = Write("lfm25_tiny", dir, WeightFormat::kF16);
  const fs::path name = fs::path(set.backbone).filename();
  const std::string second = dir + "/copy-" + name.string();
  Rewrite(set.backbone, second, {});
  Result<std::shared_ptr<const AudioModel>> m = AudioModel::Load(dir);
  ASSERT_FALSE(m.ok());
  const std::string& msg = m.status().message();
  EXPECT_NE(msg.find("two files of the same part"), std::string::npos) << msg;
  EXPECT_NE(msg.find(name.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("copy-" + name.string()), std::string::npos) << msg;
  fs::remove_all(dir);
}

// A NaN block scale in a Q8_0 matrix (lfm25_tiny's Q8_0 release, blk.0.ffn_up.weight's first block's f16
// scale set to 0x7E00): the load-time scan names it; with the scan off, generation stops with the
// non-finite logits error before any token, instead of running on NaN.
TEST(GgufRelease, NanInAQuantizedBlockStopsTheRun) {
  const std::string dir = Fresh("nan_q8");
  const Lfm25GgufFiles set = Write("lfm25_tiny", dir, WeightFormat::kQ8_0);
  auto bb = OpenFile(set.backbone);
  ASSERT_NE(bb, nullptr);
  ASSERT_EQ(bb->FindTensor("blk.0.ffn_up.weight")->type, static_cast<uint32_t>(GgmlType::Q8_0));
  const std::string d =
      WithBackbone(set, "nan_q8_poisoned",
                   {.tensor = "blk.0.ffn_up.weight", .at = 0, .patch = std::string("\x00\x7e", 2)});
  Result<std::shared_ptr<const AudioModel>> checked = AudioModel::Load(d);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(checked.status().message().find("NaN"), std::string::npos) << checked.status().message();
  auto m = AudioModel::Load(d, {.check_weights = false});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto c = Conversation::Create(*m);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->AddTokens(testing::TraceIds("lfm25_tiny/traces/tts__text_ids.npy")).ok());
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
  GenerateOptions o;
  o.max_new_tokens = 16;
  Result<GenerateSummary> r = (*c)->Generate(o, out);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("non-finite"), std::string::npos) << r.status().message();
  EXPECT_EQ(items, 0);
  fs::remove_all(d);
  fs::remove_all(dir);
}

// Every tensor of every file takes the type of llama.cpp's tools for that release type (the README's
// table): the converter's F32 tensors (norms, biases, 1-D tensors, the short-conv taps, the encoder's
// conv module and subsampling, its positional biases, the mmproj's audio-code table) stay F32 but for
// the pointwise convolutions, which llama-quantize's 8- and 4-bit types quantize; the tied embedding
// takes the output rule (Q6_K at Q4_0 where rows are whole 256-blocks, else Q8_0); a row of partial
// blocks is F16; everything else is the type.
TEST(GgufRelease, EveryTensorTakesLlamaCppsType) {
  for (WeightFormat type : {WeightFormat::kF16, WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    const std::string dir = Fresh(std::string("types_") + WeightFormatName(type));
    const Lfm25GgufFiles f = Write("lfm25_small", dir, type);
    const uint32_t want_type = static_cast<uint32_t>(type == WeightFormat::kF16    ? GgmlType::F16
                                                     : type == WeightFormat::kQ8_0 ? GgmlType::Q8_0
                                                                                   : GgmlType::Q4_0);
    const bool quant = type != WeightFormat::kF16;
    size_t checked = 0;
    for (const std::string& path : {f.backbone, f.mmproj, f.vocoder, f.detokenizer}) {
      auto g = OpenFile(path);
      ASSERT_NE(g, nullptr);
      for (const GgufTensor& t : g->tensors()) {
        const std::string& n = t.name;
        uint32_t want = want_type;
        const bool encoder = n.starts_with("a.") || n.starts_with("mm.");
        const bool f32 = t.n_dims == 1 || n.ends_with(".bias") || n.find("norm") != std::string::npos ||
                         n.ends_with("shortconv.conv.weight") || n == "istft.window" ||
                         n == "a.position_embd.weight" ||
                         (encoder && (n.starts_with("a.conv1d.") || n.find("conv_dw") != std::string::npos ||
                                      n.find("pos_bias") != std::string::npos ||
                                      (!quant && n.find("conv_pw") != std::string::npos)));
        if (f32) {
          want = static_cast<uint32_t>(GgmlType::F32);
        } else if (n == "token_embd.weight" && type == WeightFormat::kQ4_0) {
          want = static_cast<uint32_t>(t.ne[0] % 256 == 0 ? GgmlType::Q6_K : GgmlType::Q8_0);
        } else if (quant && t.ne[0] % 32 != 0) {
          want = static_cast<uint32_t>(GgmlType::F16);
        }
        EXPECT_EQ(t.type, want) << path << ": " << n;
        ++checked;
      }
    }
    EXPECT_GT(checked, 200u);
    // --keep-f32: a glob keeps its tensors in F32; one that names nothing is an error.
    if (type == WeightFormat::kQ4_0) {
      Lfm25GgufWriteOptions o;
      o.type = type;
      o.keep_f32 = {"a.blk.*.conv_pw*", "token_embd.weight"};
      const std::string kdir = Fresh("keep_f32");
      Result<Lfm25GgufFiles> k = WriteLfm25GgufRelease(DataPath("lfm25_small"), kdir, o);
      ASSERT_TRUE(k.ok()) << k.status().ToString();
      auto mm = OpenFile(k->mmproj);
      auto bb = OpenFile(k->backbone);
      ASSERT_TRUE(mm && bb);
      EXPECT_EQ(mm->FindTensor("a.blk.0.conv_pw1.weight")->type, static_cast<uint32_t>(GgmlType::F32));
      EXPECT_EQ(bb->FindTensor("token_embd.weight")->type, static_cast<uint32_t>(GgmlType::F32));
      EXPECT_EQ(mm->FindTensor("a.blk.0.ffn_up.weight")->type, static_cast<uint32_t>(GgmlType::Q4_0));
      o.keep_f32 = {"a.blk.*.conv_pointwise*"};
      Result<Lfm25GgufFiles> typo = WriteLfm25GgufRelease(DataPath("lfm25_small"), kdir, o);
      ASSERT_FALSE(typo.ok());
      EXPECT_NE(typo.status().message().find("conv_pointwise"), std::string::npos) << typo.status().message();
      fs::remove_all(kdir);
    }
    fs::remove_all(dir);
  }
}

// What a model folder's turn produced through the public API.
struct Turn {
  Status status;
  std::vector<int32_t> text, codes;
  std::vector<float> pcm;
};

// `n` greedy items of the conversation into `t` (text ids, frames, PCM).
void Generate(Conversation& c, int n, Turn& t) {
  GenerateOptions g;
  g.max_new_tokens = n;
  OutputCallbacks cb;
  cb.on_text = [&](int32_t id, std::string_view) {
    t.text.push_back(id);
    return Status::Ok();
  };
  cb.on_audio_frame = [&](std::span<const int32_t> f, bool) {
    t.codes.insert(t.codes.end(), f.begin(), f.end());
    return Status::Ok();
  };
  cb.on_pcm = [&](std::span<const float> p) {
    t.pcm.insert(t.pcm.end(), p.begin(), p.end());
    return Status::Ok();
  };
  t.status = c.Generate(g, cb).status();
}

// A conversation on the model in `dir`, or null with the load error in t.status.
std::unique_ptr<Conversation> Open(const std::string& dir, Turn& t) {
  auto m = AudioModel::Load(dir);
  if (!m.ok()) {
    t.status = m.status();
    return nullptr;
  }
  auto c = Conversation::Create(*m);
  EXPECT_TRUE(c.ok());
  return c.ok() ? std::move(c).value() : nullptr;
}

// The oracle's TTS turn (tts__text_ids, 24 greedy items: tts__sequential) of the model in `dir`.
Turn SpeakTurn(const std::string& dir) {
  Turn t;
  std::unique_ptr<Conversation> c = Open(dir, t);
  if (!c) return t;
  t.status = c->AddTokens(testing::TraceIds("lfm25_tiny/traces/tts__text_ids.npy"));
  if (t.status.ok()) Generate(*c, 24, t);
  return t;
}

// The oracle's speech prompt (prefill_speech__text_ids around question.wav), 16 greedy items.
Turn HearTurn(const std::string& dir) {
  Turn t;
  std::unique_ptr<Conversation> c = Open(dir, t);
  if (!c) return t;
  const std::vector<int64_t> ids =
      testing::LoadTrace("lfm25_tiny/traces/prefill_speech__text_ids.npy").ToInt64();
  const std::vector<int64_t> flags =
      testing::LoadTrace("lfm25_tiny/traces/prefill_speech__modality_flag.npy").ToInt64();
  std::vector<int32_t> before, after;
  size_t ti = 0;
  bool heard = false;
  for (int64_t fl : flags) {
    if (fl == 2) {
      heard = true;
      continue;
    }
    (heard ? after : before).push_back(static_cast<int32_t>(ids[ti++]));
  }
  t.status = c->AddTokens(before);
  if (t.status.ok()) t.status = c->AddAudioFile(DataPath("inputs/question.wav"));
  if (t.status.ok()) t.status = c->AddTokens(after);
  if (t.status.ok()) Generate(*c, 16, t);
  return t;
}

// The files users hold, laid out as published: the Hugging Face snapshot (config.json in the published
// key set, tokenizer_config.json, audio_detokenizer/, and the weights single or sharded), Liquid's four
// GGUF files, the same beside config.json, and the partial sets llama.cpp users have (backbone + mmproj
// for ASR) or that speak only (no mmproj). Each reproduces the oracle's TTS trace (tts__sequential) or
// the full snapshot's answer to speech, or fails only the task it lacks a file for, naming the file.
TEST(GgufRelease, PublishedLayoutsAndPartialSets) {
  const std::string root = Fresh("published");
  const fs::path snap = fs::path(root) / "LFM2.5-Audio-1.5B";
  fs::create_directories(snap);
  const fs::path src = DataPath("lfm25_tiny");
  for (const char* n : {"config.json", "tokenizer.json"}) fs::copy_file(src / n, snap / n);
  fs::copy(src / "audio_detokenizer", snap / "audio_detokenizer", fs::copy_options::recursive);
  for (const char* n : {"tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"})
    fs::copy_file(fs::path(DataPath("tokenizer/lfm2")) / n, snap / n);
  // Two shards and their index, as the Hub writes a large checkpoint.
  {
    Result<Checkpoint> ck = Checkpoint::Open((src / "model.safetensors").string());
    ASSERT_TRUE(ck.ok());
    std::vector<TensorToWrite> shard[2];
    nlohmann::json map = nlohmann::json::object();
    size_t i = 0;
    for (const std::string& n : ck->Names()) {
      const TensorView t = *ck->Get(n);
      const int k = i++ % 2;
      shard[k].push_back({n, t.dtype,
                          std::vector<int64_t>(t.shape.dim.begin(), t.shape.dim.begin() + t.shape.rank),
                          t.data, t.bytes()});
      map[n] = k == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    ASSERT_TRUE(WriteSafetensors((snap / "model-00001-of-00002.safetensors").string(), shard[0]).ok());
    ASSERT_TRUE(WriteSafetensors((snap / "model-00002-of-00002.safetensors").string(), shard[1]).ok());
    std::ofstream(snap / "model.safetensors.index.json")
        << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump(2);
  }
  const Turn want = SpeakTurn(src.string());
  ASSERT_TRUE(want.status.ok()) << want.status.ToString();
  ASSERT_FALSE(want.codes.empty());
  ASSERT_FALSE(want.pcm.empty());
  // The trace itself: the items of tts__sequential.
  const std::vector<int64_t> rows = testing::LoadTrace("lfm25_tiny/traces/tts__sequential.npy").ToInt64();
  std::vector<int32_t> trace_codes;
  for (size_t r = 0; r < rows.size() / 9; ++r)
    if (rows[r * 9] == 1)
      trace_codes.insert(trace_codes.end(), rows.begin() + r * 9 + 1, rows.begin() + r * 9 + 9);
  EXPECT_EQ(want.codes, trace_codes);
  const Turn sharded = SpeakTurn(snap.string());
  ASSERT_TRUE(sharded.status.ok()) << sharded.status.ToString();
  EXPECT_EQ(sharded.codes, want.codes);
  EXPECT_EQ(sharded.pcm, want.pcm);

  // Liquid's four files (F32: the same numbers), alone and converted beside the snapshot's config.json.
  const fs::path gguf = fs::path(root) / "LFM2.5-Audio-1.5B-GGUF";
  const Lfm25GgufFiles f = Write("lfm25_tiny", gguf.string(), WeightFormat::kF32, /*embed=*/true);
  const Turn four = SpeakTurn(gguf.string());
  ASSERT_TRUE(four.status.ok()) << four.status.ToString();
  EXPECT_EQ(four.codes, want.codes);
  EXPECT_EQ(four.pcm, want.pcm);
  const fs::path beside = fs::path(root) / "converted";
  fs::create_directories(beside);
  fs::copy_file(src / "config.json", beside / "config.json");
  for (const std::string& p : {f.backbone, f.mmproj, f.vocoder, f.detokenizer})
    fs::copy_file(p, beside / fs::path(p).filename());
  const Turn conv = SpeakTurn(beside.string());
  ASSERT_TRUE(conv.status.ok()) << conv.status.ToString();
  EXPECT_EQ(conv.codes, want.codes);

  // Backbone + mmproj (what llama.cpp transcribes with): hears as the snapshot does, cannot speak.
  const Turn heard = HearTurn(src.string());
  ASSERT_TRUE(heard.status.ok()) << heard.status.ToString();
  const fs::path asr = fs::path(root) / "asr";
  fs::create_directories(asr);
  for (const std::string& p : {f.backbone, f.mmproj}) fs::copy_file(p, asr / fs::path(p).filename());
  {
    auto m = AudioModel::Load(asr.string());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_TRUE((*m)->CanListen().ok());
    EXPECT_NE((*m)->CanSpeak().message().find("vocoder-*.gguf"), std::string::npos)
        << (*m)->CanSpeak().ToString();
  }
  const Turn asr_turn = HearTurn(asr.string());
  if (heard.codes.empty()) {
    ASSERT_TRUE(asr_turn.status.ok()) << asr_turn.status.ToString();
    EXPECT_EQ(asr_turn.text, heard.text);
  } else {  // the random oracle switched to speech: the same text up to it, then the missing file named
    EXPECT_EQ(asr_turn.status.code(), StatusCode::kNotFound);
    EXPECT_NE(asr_turn.status.message().find("vocoder-*.gguf"), std::string::npos)
        << asr_turn.status.ToString();
    ASSERT_LE(asr_turn.text.size(), heard.text.size());
    EXPECT_TRUE(std::equal(asr_turn.text.begin(), asr_turn.text.end(), heard.text.begin()));
  }
  const Turn asr_tts = SpeakTurn(asr.string());
  EXPECT_EQ(asr_tts.status.code(), StatusCode::kNotFound);
  EXPECT_NE(asr_tts.status.message().find("vocoder-*.gguf"), std::string::npos) << asr_tts.status.ToString();

  // Without the mmproj: speaks exactly as the whole set, names the mmproj when asked to listen.
  const fs::path tts = fs::path(root) / "tts";
  fs::create_directories(tts);
  for (const std::string& p : {f.backbone, f.vocoder, f.detokenizer})
    fs::copy_file(p, tts / fs::path(p).filename());
  const Turn spoken = SpeakTurn(tts.string());
  ASSERT_TRUE(spoken.status.ok()) << spoken.status.ToString();
  EXPECT_EQ(spoken.codes, want.codes);
  EXPECT_EQ(spoken.pcm, want.pcm);
  const Turn deaf = HearTurn(tts.string());
  EXPECT_EQ(deaf.status.code(), StatusCode::kNotFound);
  EXPECT_NE(deaf.status.message().find("mmproj-*.gguf"), std::string::npos) << deaf.status.ToString();
  // Backbone, vocoder, no detokenizer: codes come, speech is refused naming the file.
  fs::remove(tts / fs::path(f.detokenizer).filename());
  const Turn mute = SpeakTurn(tts.string());
  EXPECT_EQ(mute.status.code(), StatusCode::kNotFound);
  EXPECT_NE(mute.status.message().find("tokenizer-*.gguf"), std::string::npos) << mute.status.ToString();
  fs::remove_all(root);
}

// Newer llama.cpp projector files: an unfolded BatchNorm (conv_norm.weight/bias = γ/β beside
// conv_norm_mean/var) is folded at load, and a stored filterbank and window are used once checked
// against the config's; the encoder's output matches the oracle trace (adapter__out, k = 5e-5 as in
// the audio pipeline suite). A window of another shape (periodic Hann) is refused by name.
TEST(GgufRelease, UnfoldedBatchNormAndStoredMelTables) {
  const std::string dir = Fresh("newer_mmproj");
  const Lfm25GgufFiles f = Write("lfm25_tiny", dir, WeightFormat::kF32);
  Result<Checkpoint> ck = Checkpoint::Open(DataPath("lfm25_tiny"));
  ASSERT_TRUE(ck.ok());
  Result<Lfm25AudioConfig> cfg = Lfm25AudioConfig::Load(DataPath("lfm25_tiny/config.json"));
  ASSERT_TRUE(cfg.ok());
  Result<LogMelFrontEnd> mel = LogMelFrontEnd::Create(cfg->preprocessor);
  ASSERT_TRUE(mel.ok());
  auto rewrite = [&](bool periodic_window) {
    auto mm = OpenFile(f.mmproj);
    EXPECT_NE(mm, nullptr);
    GgufWriter w;
    for (const std::string& k : mm->metadata().keys()) {
      const GgufValue* v = mm->metadata().Find(k);
      uint64_t u = 0;
      double d = 0;
      if (v->type() == GgufValueType::kString) {
        EXPECT_TRUE(w.AddString(k, v->string_value()).ok());
      } else if (v->type() == GgufValueType::kBool) {
        EXPECT_TRUE(w.AddBool(k, *mm->metadata().GetBool(k)).ok());
      } else if (v->type() == GgufValueType::kF32 && v->ToDouble(&d)) {
        EXPECT_TRUE(w.AddF32(k, static_cast<float>(d)).ok());
      } else if (v->ToUint64(&u)) {
        EXPECT_TRUE(w.AddU32(k, static_cast<uint32_t>(u)).ok());
      }
    }
    std::vector<std::vector<float>> keep;
    auto add_f32 = [&](const std::string& name, std::vector<float> v, std::vector<uint64_t> ne) {
      keep.push_back(std::move(v));
      const Status st = w.AddTensor(
          name, static_cast<uint32_t>(GgmlType::F32), ne,
          std::string_view(reinterpret_cast<const char*>(keep.back().data()), keep.back().size() * 4));
      EXPECT_TRUE(st.ok()) << st.ToString();
    };
    for (const GgufTensor& t : mm->tensors()) {
      // What an earlier rewrite added is added anew below.
      if (t.name.find("conv_norm_") != std::string::npos || t.name == "a.mel_filters" || t.name == "a.window")
        continue;
      if (t.name.starts_with("a.blk.") && t.name.find(".conv_norm.") != std::string::npos) {
        const std::string layer = t.name.substr(6, t.name.find('.', 6) - 6);
        const std::string hf = "conformer.layers." + layer + ".conv.batch_norm.";
        const bool weight = t.name.ends_with(".weight");
        add_f32(t.name, Values(*ck->Get(hf + (weight ? "weight" : "bias"))), {t.ne[0]});
        if (weight) {
          add_f32("a.blk." + layer + ".conv_norm_mean", Values(*ck->Get(hf + "running_mean")), {t.ne[0]});
          add_f32("a.blk." + layer + ".conv_norm_var", Values(*ck->Get(hf + "running_var")), {t.ne[0]});
        }
        continue;
      }
      std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
      const Status st =
          w.AddTensor(t.name, t.type, ne, std::string_view(reinterpret_cast<const char*>(t.data), t.bytes));
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    std::vector<float> window(mel->window().begin(), mel->window().end());
    if (periodic_window) {
      const size_t n = window.size();
      for (size_t i = 0; i < n; ++i)
        window[i] =
            static_cast<float>(0.5 - 0.5 * std::cos(2 * std::numbers::pi * static_cast<double>(i) / n));
    }
    add_f32("a.mel_filters", std::vector<float>(mel->filterbank().begin(), mel->filterbank().end()),
            {mel->bins(), static_cast<uint64_t>(cfg->preprocessor.n_mels)});
    add_f32("a.window", window, {window.size()});
    fs::remove(f.mmproj);
    EXPECT_TRUE(w.Write(f.mmproj).ok());
  };
  rewrite(false);
  auto m = Lfm25AudioModel::Load(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->stored_mel_tables().window.size(), static_cast<size_t>(cfg->preprocessor.win_length));
  ThreadTeam team(1);
  auto s = Lfm25Session::Create(**m, {.threads = 1, .context = 256, .max_clip_seconds = 10});
  ASSERT_TRUE(s.ok());
  testing::CollectingSink sink;
  auto audio = ReadAudioFile(DataPath("inputs/synthetic_16k.wav"));
  ASSERT_TRUE(audio.ok());
  ASSERT_TRUE((*s)->AppendAudio(*audio, team, &sink).ok());
  const std::vector<float> want = testing::LoadTrace("lfm25_tiny/traces/adapter__out.npy").ToFloat();
  ASSERT_EQ(sink.tensors["adapter_out"].size(), want.size());
  const testing::Diff d = testing::Compare(sink.tensors["adapter_out"].data(), want);
  EXPECT_LE(d.rel(), 5e-5) << "max abs " << d.max_abs << " scale " << d.scale;
  rewrite(true);
  auto bad = Lfm25AudioModel::Load(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("window"), std::string::npos) << bad.status().ToString();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lfmvox
