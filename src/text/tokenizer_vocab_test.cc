// GGUF vocabularies: Tokenizer::FromVocab and Tokenizer::ExportVocab (src/text/tokenizer_vocab.h).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/tokenizer.h"
#include "text/utf8.h"

namespace lfmvox {
namespace {

using json = nlohmann::json;

const std::string kTokenizerJson = std::string(LFMVOX_TEST_DATA_DIR) + "/tokenizer/tokenizer.json";
const std::string kGoldensJson = std::string(LFMVOX_TEST_DATA_DIR) + "/tokenizer/goldens.json";

// LFM2's chat_template.jinja (tokenizer.chat_template is a plain string to the vocabulary).
constexpr char kChatTemplate[] =
    "{{bos_token}}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

template <typename T>
T Unwrap(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) std::abort();
  return std::move(r).value();
}

const Tokenizer& Surrogate() {
  static const Tokenizer* t = new Tokenizer(Unwrap(Tokenizer::LoadFile(kTokenizerJson)));
  return *t;
}

// What the converter gets from LFM2's config.json (vocab_size, eos_token_id, pad_token_id) and
// chat_template.jinja; bos 1 and add_bos come from tokenizer.json's template.
VocabExportOptions Lfm2Options() {
  VocabExportOptions o;
  o.vocab_size = 65536;
  o.eos = 7;
  o.pad = 0;
  o.chat_template = kChatTemplate;
  return o;
}

VocabExportOptions Options(int32_t vocab_size, int32_t bos = -1, int32_t eos = -1, int32_t pad = -1) {
  VocabExportOptions o;
  o.vocab_size = vocab_size;
  o.bos = bos;
  o.eos = eos;
  o.pad = pad;
  return o;
}

const TokenizerVocab& SurrogateVocab() {
  static const TokenizerVocab* v = new TokenizerVocab(Unwrap(Surrogate().ExportVocab(Lfm2Options())));
  return *v;
}

void ExpectSameVocab(const TokenizerVocab& a, const TokenizerVocab& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.token_types, b.token_types);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.bos, b.bos);
  EXPECT_EQ(a.eos, b.eos);
  EXPECT_EQ(a.pad, b.pad);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.chat_template, b.chat_template);
}

// ---------------------------------------------------------------------------------------------------------
// The LFM2 surrogate: tokenizer.json -> ExportVocab -> FromVocab.

TEST(TokenizerVocabTest, SurrogateExportsAsTheConverterWritesIt) {
  const TokenizerVocab& v = SurrogateVocab();
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "lfm2");
  ASSERT_EQ(v.tokens.size(), 65536u);  // config.json's vocab_size, as in the real GGUF
  ASSERT_EQ(v.token_types.size(), 65536u);
  EXPECT_EQ(v.tokens[0], "<|pad|>");
  EXPECT_EQ(v.tokens[1], "<|startoftext|>");
  EXPECT_EQ(v.tokens[2], "<|endoftext|>");
  EXPECT_EQ(v.tokens[7], "<|im_end|>");
  EXPECT_EQ(v.tokens[128], "<|audio_start|>");
  EXPECT_EQ(v.token_types[1], TokenizerVocab::kControl);
  EXPECT_EQ(v.tokens[64011], "Mathias");
  EXPECT_EQ(v.token_types[64011], TokenizerVocab::kUserDefined);
  EXPECT_EQ(v.tokens[64014], "python");
  EXPECT_EQ(v.token_types[64014], TokenizerVocab::kUserDefined);
  // Ids past the file's last (64,399) are the converter's padding.
  EXPECT_EQ(v.tokens[64400], "[PAD64400]");
  EXPECT_EQ(v.token_types[64400], TokenizerVocab::kUnused);
  EXPECT_EQ(v.tokens[65535], "[PAD65535]");
  int counts[7] = {};
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    ASSERT_GE(v.token_types[i], 1);
    ASSERT_LE(v.token_types[i], 6);
    ++counts[v.token_types[i]];
    if (v.token_types[i] == TokenizerVocab::kUnused) {
      EXPECT_EQ(v.tokens[i], "[PAD" + std::to_string(i) + "]");
    } else {
      EXPECT_EQ(v.tokens[i], Surrogate().TokenText(static_cast<int32_t>(i))) << i;
    }
  }
  // The 507 added tokens of LFM2's tokenizer_config.json: 505 special, "Mathias" and "python" not.
  EXPECT_EQ(counts[TokenizerVocab::kControl], 505);
  EXPECT_EQ(counts[TokenizerVocab::kUserDefined], 2);
  EXPECT_EQ(counts[TokenizerVocab::kNormal], 6408 - 507);
  EXPECT_EQ(counts[TokenizerVocab::kUnused], 65536 - 6408);
  // Merges by rank, as "left right": the file's first is ["Ġ", "Ġ"].
  const json file = json::parse(ReadText(kTokenizerJson));
  const json& merges = file["model"]["merges"];
  ASSERT_EQ(v.merges.size(), merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    ASSERT_EQ(v.merges[i], merges[i][0].get<std::string>() + " " + merges[i][1].get<std::string>()) << i;
  }
  EXPECT_EQ(v.merges[0], "Ġ Ġ");
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 7);
  EXPECT_EQ(v.pad, 0);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_EQ(v.chat_template, kChatTemplate);
}

TEST(TokenizerVocabTest, RoundTripEncodesAndDecodesEveryGoldenAsTheJsonTokenizer) {
  const Tokenizer& from_json = Surrogate();
  const json goldens = json::parse(ReadText(kGoldensJson));
  ASSERT_EQ(goldens["encode"].size(), 226u);
  ASSERT_EQ(goldens["decode_only"].size(), 26u);
  for (const char* pre : {"lfm2", "llama-bpe", "llama3"}) {
    SCOPED_TRACE(std::string("pre ") + pre);
    TokenizerVocab v = SurrogateVocab();
    v.pre = pre;
    const Tokenizer t = Unwrap(Tokenizer::FromVocab(v));
    int passed = 0;
    for (const json& c : goldens["encode"]) {
      const std::string input = c["input"].get<std::string>();
      SCOPED_TRACE("input " + c["input"].dump());
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      const auto ids_with_bos = c["ids_with_bos"].get<std::vector<int32_t>>();
      const std::vector<int32_t> got = Unwrap(t.Encode(input));
      const std::vector<int32_t> got_bos = Unwrap(t.EncodeWithSpecialTokens(input));
      EXPECT_EQ(got, Unwrap(from_json.Encode(input)));
      EXPECT_EQ(got, ids);
      EXPECT_EQ(got_bos, Unwrap(from_json.EncodeWithSpecialTokens(input)));
      EXPECT_EQ(got_bos, ids_with_bos);
      EXPECT_EQ(t.Decode(ids), c["decode"].get<std::string>());
      EXPECT_EQ(t.Decode(ids, /*skip_special_tokens=*/true), c["decode_skip_special"].get<std::string>());
      EXPECT_EQ(t.Decode(ids_with_bos), c["decode_with_bos"].get<std::string>());
      passed += got == ids && got_bos == ids_with_bos;
    }
    EXPECT_EQ(passed, 226);
    for (const json& c : goldens["decode_only"]) {
      SCOPED_TRACE(c["note"].get<std::string>());
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(t.Decode(ids), c["decode"].get<std::string>());
      EXPECT_EQ(t.Decode(ids, true), c["decode_skip_special"].get<std::string>());
      EXPECT_EQ(t.Decode(ids), from_json.Decode(ids));
    }
    if (std::string(pre) != "lfm2") continue;  // the rest does not depend on the name

    // Every id means the same: text, special flag, lookup by text; the undefined ones stay undefined.
    EXPECT_EQ(t.vocab_size(), from_json.vocab_size());
    EXPECT_EQ(t.vocab_size(), 64400);
    for (int32_t id = -1; id <= 65536; ++id) {
      ASSERT_EQ(t.TokenText(id), from_json.TokenText(id)) << id;
      ASSERT_EQ(t.IsSpecialToken(id), from_json.IsSpecialToken(id)) << id;
      const std::string_view text = from_json.TokenText(id);
      if (!text.empty()) {
        ASSERT_EQ(t.TokenId(text), from_json.TokenId(text)) << id;
      }
    }
    EXPECT_EQ(t.TokenId("<|startoftext|>"), 1);
    EXPECT_EQ(t.TokenId("<|im_end|>"), 7);
    EXPECT_EQ(t.TokenId("<|audio_start|>"), 128);
    EXPECT_FALSE(t.TokenId("[PAD64400]").has_value());
    // And the vocabulary it gives back is the one it was made from.
    ExpectSameVocab(Unwrap(t.ExportVocab(Lfm2Options())), v);
  }
}

// ---------------------------------------------------------------------------------------------------------
// A hand-built vocabulary: the byte-level alphabet at ids 0..255 (so a lone byte's id is the byte), then:
constexpr const char* kSmallExtra[][2] = {
    {"th", "1"},        // 256, merge "t h"
    {"the", "1"},       // 257, merge "th e"
    {"Ġc", "1"},        // 258, merge "Ġ c"
    {"at", "1"},        // 259, merge "a t"
    {"Ġcat", "1"},      // 260, merge "Ġc at"
    {"12", "1"},        // 261, merge "1 2"
    {"123", "1"},       // 262, merge "12 3"
    {"<|x|>", "3"},     // 263, control: bos
    {"hello", "4"},     // 264, user-defined
    {"'t", "1"},        // 265, merge "' t"
    {"[PAD266]", "5"},  // 266, unused
    {"<|y|>", "3"},     // 267, control: eos
};

TokenizerVocab SmallVocab() {
  TokenizerVocab v;
  v.model = "gpt2";
  v.pre = "lfm2";
  for (int b = 0; b < 256; ++b) {
    v.tokens.emplace_back(text::ByteLevelAlphabet::Get().Utf8(static_cast<uint8_t>(b)));
    v.token_types.push_back(TokenizerVocab::kNormal);
  }
  for (const auto& [token, type] : kSmallExtra) {
    v.tokens.emplace_back(token);
    v.token_types.push_back(std::stoi(type));
  }
  v.merges = {"t h", "th e", "Ġ c", "a t", "Ġc at", "1 2", "12 3", "' t"};
  v.bos = 263;
  v.eos = 267;
  v.add_bos = true;
  v.add_eos = true;
  return v;
}

TEST(TokenizerVocabTest, HandBuiltVocabularyGivesHandComputedIds) {
  const Tokenizer t = Unwrap(Tokenizer::FromVocab(SmallVocab()));
  using Ids = std::vector<int32_t>;
  // "the" merges t+h (rank 0) then th+e; " cat" is "Ġcat": Ġ+c (rank 2) and a+t (rank 3), then Ġc+at.
  EXPECT_EQ(Unwrap(t.Encode("the cat")), (Ids{257, 260}));
  // Digits go in threes: "123" + "45".
  EXPECT_EQ(Unwrap(t.Encode("12345")), (Ids{262, '4', '5'}));
  // The contraction is its own piece; "don" has no merges.
  EXPECT_EQ(Unwrap(t.Encode("don't")), (Ids{'d', 'o', 'n', 265}));
  // Added tokens are cut out first; " the" is "Ġ" + "the", there being no merge with Ġ.
  EXPECT_EQ(Unwrap(t.Encode("<|x|>hello the")), (Ids{263, 264, ' ', 257}));
  // "\n\n" is one piece of two newline bytes (byte-level "ĊĊ", no merge).
  EXPECT_EQ(Unwrap(t.Encode("a\n\nb")), (Ids{'a', '\n', '\n', 'b'}));
  // add_bos / add_eos.
  EXPECT_EQ(Unwrap(t.EncodeWithSpecialTokens("the")), (Ids{263, 257, 267}));
  const Ids ids = {263, 264, ' ', 257, 266, 267};
  EXPECT_EQ(t.Decode(ids), "<|x|>hello the<|y|>");  // the unused id decodes to nothing
  EXPECT_EQ(t.Decode(ids, /*skip_special_tokens=*/true), "hello the");
  EXPECT_TRUE(t.IsSpecialToken(263));
  EXPECT_FALSE(t.IsSpecialToken(264));
  EXPECT_EQ(t.TokenText(266), "");
  EXPECT_FALSE(t.TokenId("[PAD266]").has_value());
  EXPECT_EQ(t.TokenId("hello"), 264);
  EXPECT_EQ(t.vocab_size(), 268);

  // ExportVocab gives the same vocabulary back.
  ExpectSameVocab(Unwrap(t.ExportVocab(Options(268))), SmallVocab());
}

TEST(TokenizerVocabTest, NoTemplateWithoutAddFlags) {
  TokenizerVocab v = SmallVocab();
  v.add_bos = v.add_eos = false;
  const Tokenizer t = Unwrap(Tokenizer::FromVocab(v));
  EXPECT_EQ(Unwrap(t.EncodeWithSpecialTokens("the")), (std::vector<int32_t>{257}));
  const TokenizerVocab back = Unwrap(t.ExportVocab(Options(268, 263, 267)));
  EXPECT_EQ(back.bos, 263);
  EXPECT_FALSE(back.add_bos);
  EXPECT_FALSE(back.add_eos);
}

// ---------------------------------------------------------------------------------------------------------
// Hostile vocabularies: an error naming the problem, never a crash.

void ExpectVocabError(const TokenizerVocab& v, StatusCode code, const std::string& part) {
  Result<Tokenizer> r = Tokenizer::FromVocab(v);
  ASSERT_FALSE(r.ok()) << "accepted a vocabulary that should fail with: " << part;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

TEST(TokenizerVocabTest, RejectsHostileVocabularies) {
  ASSERT_TRUE(Tokenizer::FromVocab(SmallVocab()).ok());
  auto with = [](auto change) {
    TokenizerVocab v = SmallVocab();
    change(v);
    return v;
  };
  using V = TokenizerVocab;
  ExpectVocabError(with([](V& v) { v.model = "llama"; }), StatusCode::kUnimplemented, "model is \"llama\"");
  ExpectVocabError(with([](V& v) { v.model = ""; }), StatusCode::kUnimplemented, "model is \"\"");
  ExpectVocabError(with([](V& v) { v.pre = "qwen2"; }), StatusCode::kUnimplemented, "pre is \"qwen2\"");
  ExpectVocabError(with([](V& v) { v.pre = ""; }), StatusCode::kUnimplemented, "pre is \"\"");
  // A huge name is cut short in the message.
  {
    Result<Tokenizer> r = Tokenizer::FromVocab(with([](V& v) { v.pre = std::string(100000, 'x'); }));
    ASSERT_FALSE(r.ok());
    EXPECT_LT(r.status().message().size(), 300u);
  }
  ExpectVocabError(with([](V& v) { v.token_types.pop_back(); }), StatusCode::kDataLoss,
                   "token_type has 267 entries for 268 tokens");
  ExpectVocabError(with([](V& v) { v.token_types.push_back(1); }), StatusCode::kDataLoss,
                   "token_type has 269 entries for 268 tokens");
  ExpectVocabError(with([](V& v) { v.token_types[5] = TokenizerVocab::kUnknown; }),
                   StatusCode::kUnimplemented, "token_type[5] is 2 (unknown)");
  ExpectVocabError(with([](V& v) { v.token_types[5] = TokenizerVocab::kByte; }), StatusCode::kUnimplemented,
                   "token_type[5] is 6 (byte)");
  for (const int32_t bad : {0, 7, -1, 1 << 30}) {
    ExpectVocabError(with([bad](V& v) { v.token_types[9] = bad; }), StatusCode::kDataLoss,
                     "token_type[9] is " + std::to_string(bad) + ", which is no token type");
  }
  ExpectVocabError(with([](V& v) { v.tokens[70] = ""; }), StatusCode::kDataLoss, "tokens[70] is empty");
  ExpectVocabError(with([](V& v) { v.tokens[264] = "the"; }), StatusCode::kDataLoss,
                   "tokens[257] and [264] are both \"the\"");
  // Unused entries are holes: their text is never looked at, so repeats and empty ones are fine.
  EXPECT_TRUE(Tokenizer::FromVocab(with([](V& v) { v.tokens[266] = ""; })).ok());
  EXPECT_TRUE(Tokenizer::FromVocab(with([](V& v) {
                v.tokens.push_back("[PAD266]");
                v.token_types.push_back(TokenizerVocab::kUnused);
              })).ok());

  // Special ids.
  ExpectVocabError(with([](V& v) { v.bos = 268; }), StatusCode::kOutOfRange,
                   "bos_token_id is 268; the vocabulary has 268 tokens");
  ExpectVocabError(with([](V& v) { v.eos = -2; }), StatusCode::kOutOfRange, "eos_token_id is -2");
  ExpectVocabError(with([](V& v) { v.pad = 1 << 30; }), StatusCode::kOutOfRange, "padding_token_id is");
  ExpectVocabError(with([](V& v) { v.pad = 266; }), StatusCode::kDataLoss,
                   "padding_token_id 266 names an unused entry");
  ExpectVocabError(with([](V& v) { v.bos = -1; }), StatusCode::kDataLoss,
                   "add_bos_token is set, but there is no tokenizer.ggml.bos_token_id");
  ExpectVocabError(with([](V& v) { v.eos = -1; }), StatusCode::kDataLoss,
                   "add_eos_token is set, but there is no tokenizer.ggml.eos_token_id");

  // Merges.
  ExpectVocabError(with([](V& v) { v.merges.push_back("th"); }), StatusCode::kDataLoss,
                   "merges[8] is \"th\"; expected \"left right\" with one space");
  ExpectVocabError(with([](V& v) { v.merges.push_back("t h e"); }), StatusCode::kDataLoss,
                   "merges[8] is \"t h e\"");
  ExpectVocabError(with([](V& v) { v.merges.push_back(""); }), StatusCode::kDataLoss, "merges[8] is \"\"");
  ExpectVocabError(with([](V& v) { v.merges.insert(v.merges.begin(), "t zz"); }), StatusCode::kDataLoss,
                   "merges[0] uses \"zz\", which is not in tokenizer.ggml.tokens");
  ExpectVocabError(with([](V& v) { v.merges.push_back(" t"); }), StatusCode::kDataLoss,
                   "merges[8] uses \"\"");
  ExpectVocabError(with([](V& v) { v.merges.push_back("[PAD266] t"); }), StatusCode::kDataLoss,
                   "uses \"[PAD266]\"");  // an unused entry is no token
  ExpectVocabError(with([](V& v) { v.merges.push_back("h t"); }), StatusCode::kDataLoss,
                   "merges[8] makes \"ht\", which is not in tokenizer.ggml.tokens");

  // More tokens than ids go up to.
  {
    TokenizerVocab v = SmallVocab();
    v.tokens.resize(size_t{1} << 22);
    v.token_types.resize(v.tokens.size(), TokenizerVocab::kUnused);
    ExpectVocabError(v, StatusCode::kOutOfRange, "tokens has 4194304 entries; lfmvox reads at most 2097152");
  }
  // GGUF strings are UTF-8; a token that is not is refused (the tables assume it, as the JSON parser
  // guarantees it for tokenizer.json).
  ExpectVocabError(with([](V& v) { v.tokens[264] = "ab\xFF"; }), StatusCode::kDataLoss,
                   "tokens[264] is not valid UTF-8 (byte 2 of 3 is 0xFF)");
  ExpectVocabError(with([](V& v) { v.tokens[264] = "\xC3"; }), StatusCode::kDataLoss,
                   "tokens[264] is not valid UTF-8 (byte 0 of 1 is 0xC3)");
  // An unused entry's text is never read.
  EXPECT_TRUE(Tokenizer::FromVocab(with([](V& v) { v.tokens[266] = "\xFF"; })).ok());
}

// ---------------------------------------------------------------------------------------------------------
// What ExportVocab refuses: tokenizers the GGUF metadata cannot describe.

void ExpectExportError(const json& file, const VocabExportOptions& o, StatusCode code,
                       const std::string& part) {
  const Tokenizer t = Unwrap(Tokenizer::LoadJson(file.dump()));
  Result<TokenizerVocab> r = t.ExportVocab(o);
  ASSERT_FALSE(r.ok()) << "exported a tokenizer that should fail with: " << part;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

TEST(TokenizerVocabTest, ExportRefusesWhatGgufCannotDescribe) {
  const json good = json::parse(ReadText(kTokenizerJson));
  ASSERT_TRUE(Unwrap(Tokenizer::LoadJson(good.dump())).ExportVocab().ok());

  json j = good;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  ExpectExportError(j, {}, StatusCode::kUnimplemented, "the pre-tokenizer is not LFM2's");
  j = good;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+";
  ExpectExportError(j, {}, StatusCode::kUnimplemented, "the pre-tokenizer is not LFM2's");
  j = good;
  j["pre_tokenizer"]["pretokenizers"][1]["trim_offsets"] = false;  // offsets only: still LFM2's
  EXPECT_TRUE(Unwrap(Tokenizer::LoadJson(j.dump())).ExportVocab().ok());
  j = good;
  j["model"]["ignore_merges"] = true;
  ExpectExportError(j, {}, StatusCode::kUnimplemented, "cannot carry");
  j = good;
  j["post_processor"]["processors"][1]["special_tokens"]["<|startoftext|>"]["ids"] = {1, 2};
  ExpectExportError(j, {}, StatusCode::kUnimplemented, "adds 2 tokens before the text");

  ExpectExportError(good, Options(1000), StatusCode::kInvalidArgument,
                    "options.vocab_size is 1000; this tokenizer needs at least 64400");
  ExpectExportError(good, Options(-5), StatusCode::kInvalidArgument, "options.vocab_size is -5");
  ExpectExportError(good, Options(0, 2), StatusCode::kInvalidArgument,
                    "options.bos is 2, but the post-processor template adds 1");
  ExpectExportError(good, Options(0, -1, -1, 64400), StatusCode::kInvalidArgument,
                    "pad id 64400 is not a token");
  ExpectExportError(good, Options(65536, -1, 64500), StatusCode::kInvalidArgument,
                    "eos id 64500 is not a token");
}

TEST(TokenizerVocabTest, ExportTypesAddedTokensAsTheConverterDoes) {
  json j = json::parse(ReadText(kTokenizerJson));
  // Not marked special, but spelled like a control token: the converter writes it as control.
  for (json& a : j["added_tokens"]) {
    if (a["content"] == "<|im_end|>") a["special"] = false;
    if (a["content"] == "python") a["content"] = "py\u2581thon";  // U+2581 in a user-defined token
  }
  j["model"]["vocab"].erase("python");
  j["model"]["vocab"]["py\u2581thon"] = 64014;
  const Tokenizer t = Unwrap(Tokenizer::LoadJson(j.dump()));
  EXPECT_FALSE(t.IsSpecialToken(7));
  const TokenizerVocab v = Unwrap(t.ExportVocab());
  EXPECT_EQ(v.token_types[7], TokenizerVocab::kControl);
  EXPECT_EQ(v.tokens[64014], "py thon");
  EXPECT_EQ(v.token_types[64014], TokenizerVocab::kUserDefined);
  EXPECT_EQ(v.tokens.size(), 64400u);  // no vocab_size given: one past the largest id
}

}  // namespace
}  // namespace lfmvox
