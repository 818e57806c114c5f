// Liquid's four-file GGUF layout of LFM2.5-Audio (spec GGUF_AND_MIMI.md part
// 1), written from the oracle snapshots by lfmvox's writer and read back:
// file inventory, names, per-tensor types, values, the configuration rebuilt
// from metadata, the merged-vocoder variant and bad release folders. The
// oracle traces themselves run on the GGUF path in the model suites
// (tests/model_files.h, the gguf-f32 / gguf-f16 ctest variants).
#include "models/lfm25_audio/gguf_release.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "models/lfm25_audio/detokenizer.h"
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
    if (conv_module || t.n_dims == 1) {
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
  // Without its vocoder the set is refused by name.
  fs::remove(f4.vocoder);
  Result<Lfm25GgufFiles> half = FindLfm25GgufRelease(f4.backbone);
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("vocoder"), std::string::npos) << half.status().message();
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

}  // namespace
}  // namespace lfmvox
