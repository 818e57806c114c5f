// Lfm2Config parsing: both key generations, the FFN auto-adjust rule, and
// clear errors for impossible values. Expected widths are those stated in the
// oracle README's configuration table (tests/data/README.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "models/lfm25_audio/lfm2_config.h"

namespace lfmvox {
namespace {

Result<Lfm2Config> Parse(const char* text) { return ParseLfm2Config(nlohmann::json::parse(text), "test"); }

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

}  // namespace
}  // namespace lfmvox
