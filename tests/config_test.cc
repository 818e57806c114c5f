// Config parsing. Lfm2Config: both key generations, the FFN auto-adjust rule,
// and clear errors for impossible values. Lfm25AudioConfig: the single load of
// config.json (every section parsed once into typed structs) against the
// oracle configs in tests/data, and an error naming the section and the key
// for a bad value in each section; likewise audio_detokenizer/config.json.
// Expected widths are those stated in the oracle README's configuration table
// (tests/data/README.md) or read off the config files.
#include "models/lfm25_audio/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "io/json_config.h"
#include "models/lfm25_audio/lfm2_config.h"
#include "trace_util.h"

namespace lfmvox {
namespace {

Result<Lfm2Config> Parse(const char* text) {
  return Lfm2Config::FromJson(nlohmann::json::parse(text), "test");
}

TEST(Lfm2Config, LegacyKeysAndAutoAdjustedFfn) {
  // lfm25_tiny's `lfm` section: block_ff_dim 512, multiple_of 64 → 384.
  auto c = Parse(R"({"hidden_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4,
      "num_key_value_heads": 2, "block_ff_dim": 512, "block_multiple_of": 64, "block_ffn_dim_multiplier": 1.0,
      "block_auto_adjust_ff_dim": true, "full_attn_idxs": [2, 4], "rope_theta": 1000000.0})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ffn_dim, 384);
  EXPECT_EQ(c->head_dim, 32);
  ASSERT_EQ(c->layers.size(), 6u);
  EXPECT_EQ(c->layers[2], LayerKind::kFullAttention);
  EXPECT_EQ(c->layers[3], LayerKind::kConv);
  EXPECT_EQ(c->num_attention_layers(), 2);
  // The real backbone: 12288 with multiple_of 256 → 8192; small: 384/128 → 256.
  auto real = Parse(R"({"hidden_size": 2048, "num_hidden_layers": 1, "num_attention_heads": 32,
      "block_ff_dim": 12288, "block_multiple_of": 256, "block_auto_adjust_ff_dim": true})");
  ASSERT_TRUE(real.ok());
  EXPECT_EQ(real->ffn_dim, 8192);
  auto small = Parse(R"({"hidden_size": 256, "num_hidden_layers": 1, "num_attention_heads": 4,
      "block_ff_dim": 384, "block_multiple_of": 128})");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->ffn_dim, 256);
}

TEST(Lfm2Config, NewKeys) {
  auto c = Parse(
      R"({"hidden_size": 512, "num_hidden_layers": 3, "num_attention_heads": 16, "num_key_value_heads": 8,
      "intermediate_size": 2304, "block_auto_adjust_ff_dim": false, "sliding_window": 30,
      "layer_types": ["conv", "sliding_attention", "full_attention"],
      "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ffn_dim, 2304);
  EXPECT_EQ(c->sliding_window, 30);
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->layers[1], LayerKind::kSlidingAttention);
}

TEST(Lfm2Config, ImpossibleValuesAreClearErrors) {
  struct Case {
    const char* json;
    const char* expect;
  };
  const Case cases[] = {
      {R"({"num_hidden_layers": 1, "num_attention_heads": 4})", "hidden_size"},
      {R"({"hidden_size": 100, "num_hidden_layers": 1, "num_attention_heads": 3})", "does not divide"},
      {R"({"hidden_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3})",
       "does not divide"},
      {R"({"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "layer_types": ["conv"]})",
       "lists 1 layers"},
      {R"({"hidden_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "layer_types": ["mamba"]})",
       "unknown layer type"},
      {R"({"hidden_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
           "layer_types": ["sliding_attention"]})",
       "sliding_window"},
      {R"({"hidden_size": -5, "num_hidden_layers": 1, "num_attention_heads": 4})", "outside"},
      {R"({"hidden_size": "big", "num_hidden_layers": 1, "num_attention_heads": 4})", "integer"},
      {R"({"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "full_attn_idxs": [7]})",
       "full_attn_idxs"},
  };
  for (const Case& k : cases) {
    auto c = Parse(k.json);
    ASSERT_FALSE(c.ok()) << k.json;
    EXPECT_NE(c.status().message().find(k.expect), std::string::npos) << c.status().message();
  }
}

using nlohmann::json;

std::string DataPath(const std::string& rel) { return std::string(LFMVOX_TEST_DATA_DIR) + "/" + rel; }

json ReadJson(const std::string& path) {
  Result<json> j = ReadJsonFile(path);
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : json::object();
}

// Writes j as <TempDir>/<name>/config.json and returns the path.
std::string WriteConfig(const std::string& name, const json& j) {
  const std::string dir = testing::ScratchPath("config_test_" + name);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/config.json";
  std::ofstream(path) << j.dump(2);
  return path;
}

TEST(Lfm25AudioConfig, TinyOracleConfigParsesEverySection) {
  auto c = Lfm25AudioConfig::Load(DataPath("lfm25_tiny/config.json"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->codebooks, 8);
  EXPECT_EQ(c->interleaved_n_text, 3);
  EXPECT_EQ(c->interleaved_n_audio, 4);
  // lfm: block_ff_dim 512, multiple_of 64 → 384; attention at 2 and 4.
  EXPECT_EQ(c->lfm.hidden_size, 128);
  EXPECT_EQ(c->lfm.num_layers, 6);
  EXPECT_EQ(c->lfm.num_heads, 4);
  EXPECT_EQ(c->lfm.num_kv_heads, 2);
  EXPECT_EQ(c->lfm.head_dim, 32);
  EXPECT_EQ(c->lfm.ffn_dim, 384);
  EXPECT_EQ(c->lfm.num_attention_layers(), 2);
  EXPECT_EQ(c->lfm.max_positions, 128000);
  EXPECT_EQ(c->lfm.conv_kernel, 3);
  EXPECT_EQ(c->lfm.rope_theta, 1e6);
  EXPECT_EQ(c->lfm.norm_eps, 1e-5f);
  // depthformer: the file gives layers, dim, tie; heads 32 / kv 8 are
  // liquid-audio's library defaults; num_codebooks is the top-level key.
  EXPECT_EQ(c->depthformer.layers, 2);
  EXPECT_EQ(c->depthformer.dim, 128);
  EXPECT_EQ(c->depthformer.heads, 32);
  EXPECT_EQ(c->depthformer.kv_heads, 8);
  EXPECT_EQ(c->depthformer.head_dim, 4);
  EXPECT_EQ(c->depthformer.num_codebooks, 8);
  EXPECT_TRUE(c->depthformer.tie);
  EXPECT_EQ(c->depthformer.rope_theta, 1e6);
  EXPECT_EQ(c->depthformer.eps, 1e-5f);
  EXPECT_EQ(c->depthformer.ffn, 0) << "read from the checkpoint by Depthformer::Load";
  // encoder.
  EXPECT_EQ(c->encoder.feat_in, 128);
  EXPECT_EQ(c->encoder.n_layers, 2);
  EXPECT_EQ(c->encoder.d_model, 64);
  EXPECT_EQ(c->encoder.n_heads, 4);
  EXPECT_EQ(c->encoder.head_dim(), 16);
  EXPECT_EQ(c->encoder.subsampling_channels, 32);
  EXPECT_EQ(c->encoder.ff_dim(), 256);
  EXPECT_EQ(c->encoder.conv_kernel_size, 9);
  EXPECT_FALSE(c->encoder.xscaling);
  EXPECT_EQ(c->encoder.subsampled_bins(), 16);  // 128 → 64 → 32 → 16
  // preprocessor: int(0.025·16000) = 400, int(0.01·16000) = 160.
  EXPECT_EQ(c->preprocessor.sample_rate, 16000);
  EXPECT_EQ(c->preprocessor.win_length, 400);
  EXPECT_EQ(c->preprocessor.hop_length, 160);
  EXPECT_EQ(c->preprocessor.n_fft, 512);
  EXPECT_EQ(c->preprocessor.n_mels, 128);
  EXPECT_EQ(c->preprocessor.pad_value, 0.0f);
}

TEST(Lfm25AudioConfig, SmallOracleConfigParses) {
  auto c = Lfm25AudioConfig::Load(DataPath("lfm25_small/config.json"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->lfm.hidden_size, 256);
  EXPECT_EQ(c->lfm.ffn_dim, 256);  // block_ff_dim 384, multiple_of 128: int(256) → 256
  EXPECT_EQ(c->lfm.num_attention_layers(), 1);
  EXPECT_EQ(c->depthformer.dim, 128);
  EXPECT_EQ(c->encoder.d_model, 128);
  EXPECT_EQ(c->encoder.n_heads, 2);
  EXPECT_EQ(c->preprocessor.n_mels, 128);
}

TEST(Lfm25DetokenizerConfig, OracleConfigAndDefaults) {
  // The file states output_size but not codebooks, upsample_factor,
  // hop_length or sample_rate: liquid-audio's constants apply.
  auto c = Lfm25DetokenizerConfig::Load(DataPath("lfm25_detok/config.json"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->lfm.hidden_size, 512);
  EXPECT_EQ(c->lfm.num_layers, 8);
  EXPECT_EQ(c->lfm.ffn_dim, 128);  // intermediate_size, no auto-adjust
  EXPECT_EQ(c->lfm.sliding_window, 30);
  EXPECT_EQ(c->lfm.num_attention_layers(), 3);
  EXPECT_EQ(c->num_codebooks, 8);
  EXPECT_EQ(c->upsample, 6);
  EXPECT_EQ(c->hop, 320);
  EXPECT_EQ(c->sample_rate, 24000);
  EXPECT_EQ(c->output_size, 1282);
  EXPECT_EQ(c->n_fft, 1280);
  EXPECT_EQ(c->samples_per_frame(), 1920);
}

// A bad value in each section of config.json, loaded through the single load
// path: the error names the file, the section and the key.
TEST(Lfm25AudioConfig, BadValueInEachSectionNamesSectionAndKey) {
  const json good = ReadJson(DataPath("lfm25_tiny/config.json"));
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    StatusCode code;
    const char* section;  // "" for the top level
    const char* key;
  };
  const Case cases[] = {
      {"lfm", [](json& j) { j["lfm"]["num_attention_heads"] = "four"; }, StatusCode::kInvalidArgument,
       "[lfm]", "num_attention_heads"},
      {"lfm_missing", [](json& j) { j["lfm"].erase("hidden_size"); }, StatusCode::kNotFound, "[lfm]",
       "hidden_size"},
      {"depthformer", [](json& j) { j["depthformer"]["layers"] = 0; }, StatusCode::kOutOfRange,
       "[depthformer]", "layers"},
      {"depthformer_tie", [](json& j) { j["depthformer"]["tie"] = "yes"; }, StatusCode::kInvalidArgument,
       "[depthformer]", "tie"},
      {"encoder", [](json& j) { j["encoder"]["n_heads"] = -1; }, StatusCode::kOutOfRange, "[encoder]",
       "n_heads"},
      {"encoder_unsupported", [](json& j) { j["encoder"]["self_attention_model"] = "abs_pos"; },
       StatusCode::kUnimplemented, "[encoder]", "self_attention_model"},
      {"encoder_untie", [](json& j) { j["encoder"]["untie_biases"] = 1; }, StatusCode::kInvalidArgument,
       "[encoder]", "untie_biases"},
      {"encoder_pos_emb", [](json& j) { j["encoder"]["pos_emb_max_len"] = 0; }, StatusCode::kOutOfRange,
       "[encoder]", "pos_emb_max_len"},
      {"preprocessor", [](json& j) { j["preprocessor"]["window"] = "hamming"; }, StatusCode::kUnimplemented,
       "[preprocessor]", "window"},
      {"preprocessor_rate", [](json& j) { j["preprocessor"]["sample_rate"] = 16000.5; },
       StatusCode::kInvalidArgument, "[preprocessor]", "sample_rate"},
      {"top", [](json& j) { j["codebooks"] = 0; }, StatusCode::kOutOfRange, "", "codebooks"},
      {"no_encoder", [](json& j) { j.erase("encoder"); }, StatusCode::kNotFound, "", "\"encoder\" section"},
      {"mels", [](json& j) { j["encoder"]["feat_in"] = 80; }, StatusCode::kInvalidArgument, "[encoder]",
       "feat_in"},
      // A size that asks for gigabytes: n_fft 2^20 with 4096 features would be an 8.6 GB filterbank.
      {"n_fft_huge",
       [](json& j) {
         j["preprocessor"]["n_fft"] = 1 << 20;
         j["preprocessor"]["features"] = j["encoder"]["feat_in"] = 4096;
       },
       StatusCode::kOutOfRange, "[preprocessor]", "n_fft"},
      // More mel filters than FFT bins (512 → 257 bins).
      {"mels_over_bins", [](json& j) { j["preprocessor"]["features"] = j["encoder"]["feat_in"] = 4096; },
       StatusCode::kOutOfRange, "[preprocessor]", "257 FFT bins"},
  };
  for (const Case& k : cases) {
    json j = good;
    k.edit(j);
    const std::string path = WriteConfig(k.name, j);
    auto c = Lfm25AudioConfig::Load(path);
    ASSERT_FALSE(c.ok()) << k.name;
    const std::string& m = c.status().message();
    EXPECT_EQ(c.status().code(), k.code) << k.name << ": " << c.status().ToString();
    EXPECT_NE(m.find(path), std::string::npos) << k.name << ": " << m;
    EXPECT_NE(m.find(k.section), std::string::npos) << k.name << ": " << m;
    EXPECT_NE(m.find(k.key), std::string::npos) << k.name << ": " << m;
  }
  // The unedited file through the same path.
  EXPECT_TRUE(Lfm25AudioConfig::Load(WriteConfig("good", good)).ok());
  // Whole-valued floats are integers (a Python writer may emit 16000.0).
  json f = good;
  f["preprocessor"]["sample_rate"] = 16000.0;
  f["depthformer"]["layers"] = 2.0;
  auto c = Lfm25AudioConfig::FromJson(f, "float config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->preprocessor.sample_rate, 16000);
  EXPECT_EQ(c->depthformer.layers, 2);
}

// A sliding window beyond the model's positions (hostile configs' 500 000 and 8 000 000, which took 3 GB and
// asked for 48 GB) is refused at parse time, naming both keys.
TEST(Lfm25DetokenizerConfig, WindowBeyondPositionsIsRefused) {
  json j = ReadJson(DataPath("lfm25_detok/config.json"));
  for (int window : {500000, 8000000}) {
    j["sliding_window"] = window;
    const std::string path = WriteConfig("detok_window_" + std::to_string(window), j);
    auto c = Lfm25DetokenizerConfig::Load(path);
    ASSERT_FALSE(c.ok()) << window;
    EXPECT_EQ(c.status().code(), StatusCode::kOutOfRange) << c.status().ToString();
    const std::string& m = c.status().message();
    EXPECT_NE(m.find("\"sliding_window\" = " + std::to_string(window)), std::string::npos) << m;
    EXPECT_NE(m.find("\"max_position_embeddings\" = 128000"), std::string::npos) << m;
  }
}

TEST(Lfm25DetokenizerConfig, BadValuesNameFileAndKey) {
  const json good = ReadJson(DataPath("lfm25_detok/config.json"));
  struct Case {
    const char* key;
    json value;
    StatusCode code;
  };
  const Case cases[] = {
      {"hop_length", "320", StatusCode::kInvalidArgument},
      {"upsample_factor", 0, StatusCode::kOutOfRange},
      {"codebooks", 65, StatusCode::kOutOfRange},
      {"sliding_window", -1, StatusCode::kOutOfRange},
      {"num_key_value_heads", 1.5, StatusCode::kInvalidArgument},
  };
  for (const Case& k : cases) {
    json j = good;
    j[k.key] = k.value;
    const std::string path = WriteConfig(std::string("detok_") + k.key, j);
    auto c = Lfm25DetokenizerConfig::Load(path);
    ASSERT_FALSE(c.ok()) << k.key;
    EXPECT_EQ(c.status().code(), k.code) << c.status().ToString();
    EXPECT_NE(c.status().message().find(path), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(k.key), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace lfmvox
