#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "text/utf8.h"

namespace lfmvox {
namespace {

using json = nlohmann::json;

// The LFM2 surrogate tokenizer.json (real structure, small vocabulary) and the goldens made from it by
// Hugging Face tokenizers 0.22.2; see tests/data/tokenizer/README.md.
const std::string kTokenizerJson = std::string(LFMVOX_TEST_DATA_DIR) + "/tokenizer/tokenizer.json";
const std::string kGoldensJson = std::string(LFMVOX_TEST_DATA_DIR) + "/tokenizer/goldens.json";

// The LFM2 pre-tokenizer's Split pattern, as in tokenizer.json.
constexpr char kLfm2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const Tokenizer& Surrogate() {
  static const Tokenizer* tokenizer = [] {
    Result<Tokenizer> r = Tokenizer::LoadFile(kTokenizerJson);
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      std::abort();
    }
    return new Tokenizer(std::move(r).value());
  }();
  return *tokenizer;
}

std::vector<int32_t> Ids(const json& j) { return j.get<std::vector<int32_t>>(); }

std::vector<std::string> TokenTexts(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (const int32_t id : ids) out.emplace_back(t.TokenText(id));
  return out;
}

std::string StreamDecode(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
  Tokenizer::StreamDecoder decoder(t, skip_special);
  std::string out;
  for (const int32_t id : ids) out += decoder.Push(id);
  return out + decoder.Finish();
}

// ---------------------------------------------------------------------------------------------------------
// Goldens: goldens.json `encode[]` (226 cases) and `decode_only[]` (26 cases); its `fields` key says what
// each field holds.

// Compares and reports like EXPECT_EQ, and also counts: *ok turns false on any mismatch.
template <typename A, typename B>
void Check(const A& got, const B& want, const char* what, bool* ok) {
  EXPECT_EQ(got, want) << what;
  if (!(got == want)) *ok = false;
}

TEST(TokenizerGoldenTest, EveryEncodeCase) {
  const Tokenizer& t = Surrogate();
  const json goldens = json::parse(ReadText(kGoldensJson));
  ASSERT_EQ(goldens["encode"].size(), 226u);
  int passed = 0;
  for (const json& c : goldens["encode"]) {
    const std::string input = c["input"].get<std::string>();
    SCOPED_TRACE("category " + c["category"].get<std::string>() + ", input " + c["input"].dump());
    const std::vector<int32_t> ids = Ids(c["ids"]);
    const std::vector<int32_t> ids_with_bos = Ids(c["ids_with_bos"]);
    const std::string decode = c["decode"].get<std::string>();
    const std::string decode_skip = c["decode_skip_special"].get<std::string>();
    Result<std::vector<int32_t>> got = t.Encode(input);
    Result<std::vector<int32_t>> got_bos = t.EncodeWithSpecialTokens(input);
    ASSERT_TRUE(got.ok() && got_bos.ok()) << got.status().ToString() << got_bos.status().ToString();
    bool ok = true;
    Check(*got, ids, "ids", &ok);
    Check(*got_bos, ids_with_bos, "ids_with_bos", &ok);
    Check(TokenTexts(t, ids), c["tokens"].get<std::vector<std::string>>(), "tokens", &ok);
    Check(t.Decode(ids), decode, "decode", &ok);
    Check(t.Decode(ids, /*skip_special_tokens=*/true), decode_skip, "decode_skip_special", &ok);
    Check(t.Decode(ids_with_bos), c["decode_with_bos"].get<std::string>(), "decode_with_bos", &ok);
    // Every golden input round-trips in the library (roundtrip: true), and so must it here.
    Check(c["roundtrip"].get<bool>(), true, "roundtrip flag", &ok);
    Check(t.Decode(*got), input, "decode(encode(input))", &ok);
    Check(StreamDecode(t, ids, false), decode, "stream decode", &ok);
    Check(StreamDecode(t, ids, true), decode_skip, "stream decode, skipping special tokens", &ok);
    passed += ok;
  }
  RecordProperty("encode_goldens_passed", passed);
  std::printf("encode goldens passed: %d of %zu\n", passed, goldens["encode"].size());
  EXPECT_EQ(passed, 226);
}

TEST(TokenizerGoldenTest, EveryDecodeOnlyCase) {
  const Tokenizer& t = Surrogate();
  const json goldens = json::parse(ReadText(kGoldensJson));
  ASSERT_EQ(goldens["decode_only"].size(), 26u);
  int passed = 0;
  for (const json& c : goldens["decode_only"]) {
    SCOPED_TRACE(c["note"].get<std::string>());
    const std::vector<int32_t> ids = Ids(c["ids"]);
    const std::string decode = c["decode"].get<std::string>();
    const std::string decode_skip = c["decode_skip_special"].get<std::string>();
    bool ok = true;
    std::vector<std::string> tokens;  // null in the goldens: id_to_token knows nothing of the id
    for (const json& token : c["tokens"]) tokens.push_back(token.is_null() ? "" : token.get<std::string>());
    Check(TokenTexts(t, ids), tokens, "tokens", &ok);
    Check(t.Decode(ids), decode, "decode", &ok);
    Check(t.Decode(ids, /*skip_special_tokens=*/true), decode_skip, "decode_skip_special", &ok);
    Check(StreamDecode(t, ids, false), decode, "stream decode", &ok);
    Check(StreamDecode(t, ids, true), decode_skip, "stream decode, skipping special tokens", &ok);
    passed += ok;
  }
  RecordProperty("decode_only_goldens_passed", passed);
  std::printf("decode-only goldens passed: %d of %zu\n", passed, goldens["decode_only"].size());
  EXPECT_EQ(passed, 26);
}

// ---------------------------------------------------------------------------------------------------------
// The surrogate's fixed facts (ids from /work/shared/tokenizer/README.md, identical in the real file).

TEST(TokenizerTest, SpecialTokensByName) {
  const Tokenizer& t = Surrogate();
  const std::pair<const char*, int32_t> kExpected[] = {
      {"<|pad|>", 0},           {"<|startoftext|>", 1},  {"<|im_start|>", 6},    {"<|im_end|>", 7},
      {"<|audio_start|>", 128}, {"<|text_start|>", 129}, {"<|text_end|>", 130},  {"<|reserved_123|>", 133},
      {"Mathias", 64011},       {"python", 64014},       {"<|file_end|>", 64399}};
  for (const auto& [name, id] : kExpected) {
    EXPECT_EQ(t.TokenId(name), id) << name;
    EXPECT_EQ(t.TokenText(id), name);
  }
  EXPECT_TRUE(t.IsSpecialToken(1));
  EXPECT_TRUE(t.IsSpecialToken(130));
  EXPECT_FALSE(t.IsSpecialToken(64014));  // python: added but not special
  EXPECT_FALSE(t.IsSpecialToken(14));     // placeholder in model.vocab only
  EXPECT_FALSE(t.IsSpecialToken(30000));  // a hole
  EXPECT_EQ(t.TokenId("<|reserved_491|>"), std::nullopt);
  EXPECT_EQ(t.TokenId("Ġ"), t.Encode(" ")->at(0));  // byte-level vocabulary entries are found too
  EXPECT_EQ(t.vocab_size(), 64400);  // max id + 1, although the surrogate defines only 6,408 + 2 + 6 ids
  EXPECT_EQ(t.TokenText(-1), "");
  EXPECT_EQ(t.TokenText(64400), "");
}

TEST(TokenizerTest, ChatPromptEncodesWithSpecialTokensAsSingleIds) {
  const Tokenizer& t = Surrogate();
  Result<std::vector<int32_t>> ids = t.Encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), 6);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 6), 2);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 7), 1);
  Result<std::vector<int32_t>> with_bos = t.EncodeWithSpecialTokens("");
  ASSERT_TRUE(with_bos.ok());
  EXPECT_EQ(*with_bos, std::vector<int32_t>{1});
}

TEST(TokenizerTest, RejectsInvalidUtf8NamingTheByte) {
  const Tokenizer& t = Surrogate();
  for (const std::string_view bad : {std::string_view("ab\xC3", 3), std::string_view("ab\xED\xA0\x80", 5),
                                     std::string_view("ab\xC0\x80", 4), std::string_view("ab\xFF", 3)}) {
    Result<std::vector<int32_t>> r = t.Encode(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("byte 2"), std::string::npos) << r.status().message();
  }
  // U+0000 and U+10FFFF are valid text.
  EXPECT_TRUE(t.Encode(std::string_view("a\0b\xF4\x8F\xBF\xBF", 7)).ok());
}

TEST(TokenizerTest, RoundTripsMixedText) {
  const Tokenizer& t = Surrogate();
  const std::string texts[] = {
      "Hello, world! It's 2025-07-14; we're at 12345678 tokens/s.\r\n\tTabs\u00a0nbsp\u2028sep",
      "日本語のテキスト、中文文本，한국어 텍스트. Привет, мир! مرحبا بالعالم שלום",
      "emoji 👨‍👩‍👧‍👦 and e\u0301 combining, ſ'S and 'LL, \u180e mongolian, \ufeffbom",
      "<|im_start|>user\n<|audio_start|>  <|im_end|>   python Mathias\n\n\n", "control \x01\x02\x7f chars"};
  for (const std::string& s : texts) {
    Result<std::vector<int32_t>> ids = t.Encode(s);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(t.Decode(*ids), s);
    EXPECT_EQ(StreamDecode(t, *ids, false), s);
  }
}

TEST(TokenizerTest, LongInputsEncodeInFull) {
  const Tokenizer& t = Surrogate();
  // A megabyte of spaces before a word makes `\s*[\r\n]+` backtrack once per space; the match limit scales
  // with the text, so this completes instead of failing.
  const std::string spaces = std::string(1 << 20, ' ') + "x";
  Result<std::vector<int32_t>> ids = t.Encode(spaces);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(t.Decode(*ids), spaces);

  std::string prose;
  const std::string line = "The quick brown fox, number 1234567, jumps over the lazy dog's back.\n";
  while (prose.size() < 200000) prose += line;
  Result<std::vector<int32_t>> prose_ids = t.Encode(prose);
  ASSERT_TRUE(prose_ids.ok());
  EXPECT_EQ(t.Decode(*prose_ids), prose);
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  const Tokenizer& t = Surrogate();
  const std::string text = "<|im_start|>user\nConcurrent encoders share one tokenizer.<|im_end|>\n";
  const std::vector<int32_t> expected = t.Encode(text).value();
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i) mismatches[k] += t.Encode(text).value() != expected;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// ---------------------------------------------------------------------------------------------------------
// Streaming decode.

TEST(StreamDecoderTest, HoldsBackSplitCharacters) {
  const Tokenizer& t = Surrogate();
  // Byte-level symbols of U+1F600 = F0 9F 98 80 and of U+3053 = E3 81 93, one token per byte.
  const std::vector<int32_t> emoji = {*t.TokenId("ð"), *t.TokenId("Ł"), *t.TokenId("ĺ"), *t.TokenId("Ģ")};
  Tokenizer::StreamDecoder d(t);
  EXPECT_EQ(d.Push(*t.TokenId("a")), "a");
  EXPECT_EQ(d.Push(emoji[0]), "");
  EXPECT_EQ(d.Push(emoji[1]), "");
  EXPECT_EQ(d.Push(emoji[2]), "");
  EXPECT_EQ(d.Push(emoji[3]), "😀");
  EXPECT_EQ(d.Push(*t.TokenId("ã")), "");
  EXPECT_EQ(d.Push(*t.TokenId("ģ")), "");
  EXPECT_EQ(d.Push(*t.TokenId("ĵ")), "こ");
  EXPECT_EQ(d.Finish(), "");

  // A character that never completes comes out as one U+FFFD at Finish, as Decode gives it.
  EXPECT_EQ(d.Push(emoji[0]), "");
  EXPECT_EQ(d.Push(emoji[1]), "");
  EXPECT_EQ(d.Finish(), "\uFFFD");
  // A byte that cannot continue the held ones releases them as U+FFFD at once.
  EXPECT_EQ(d.Push(emoji[0]), "");
  EXPECT_EQ(d.Push(*t.TokenId("x")), "\uFFFDx");
  // A special token between the bytes breaks the character unless special tokens are skipped.
  EXPECT_EQ(StreamDecode(t, {emoji[0], emoji[1], 7, emoji[2], emoji[3]}, false),
            "\uFFFD<|im_end|>\uFFFD\uFFFD");
  EXPECT_EQ(StreamDecode(t, {emoji[0], emoji[1], 7, emoji[2], emoji[3]}, true), "😀");
}

TEST(StreamDecoderTest, MultiByteCharactersSplitAcrossMergedTokens) {
  const Tokenizer& t = Surrogate();
  // Text whose BPE tokens end inside multi-byte characters: every prefix emitted must be valid UTF-8 and
  // the whole must equal the text.
  const std::string text = "ÄÖÜ äöü ß — “quotes” 日本語 👍🏽 Ελληνικά עברית";
  const std::vector<int32_t> ids = t.Encode(text).value();
  int split_tokens = 0;
  Tokenizer::StreamDecoder d(t);
  std::string out;
  for (const int32_t id : ids) {
    const std::string piece = d.Push(id);
    EXPECT_EQ(text::FindInvalidUtf8(piece), std::string_view::npos);
    split_tokens += piece.empty();
    out += piece;
  }
  out += d.Finish();
  EXPECT_EQ(out, text);
  EXPECT_GT(split_tokens, 0);  // the surrogate has byte tokens for these rare characters
}

TEST(StreamDecoderTest, MatchesDecodeOnRandomIds) {
  const Tokenizer& t = Surrogate();
  std::mt19937 rng(1234);
  // Mostly ids of byte tokens and short merges (501..1500), which make many split and invalid sequences,
  // plus specials, holes and out-of-range ids.
  std::uniform_int_distribution<int32_t> near_bytes(501, 1500), any(-5, 65000);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(1 + trial % 40);
    for (int32_t& id : ids) id = rng() % 4 == 0 ? any(rng) : near_bytes(rng);
    for (const bool skip : {false, true}) {
      ASSERT_EQ(StreamDecode(t, ids, skip), t.Decode(ids, skip)) << "trial " << trial;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Behaviours the LFM2 file does not exercise, on a small hand-made byte-level tokenizer: ids 0..255 are the
// byte-level symbols in byte order, then one id per merge, then the added tokens.

struct MiniSpec {
  std::vector<std::pair<std::string, std::string>> merges;
  json added_tokens = json::array();
  json pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  json model_extra = json::object();
};

json MiniJson(const MiniSpec& spec) {
  const text::ByteLevelAlphabet& alphabet = text::ByteLevelAlphabet::Get();
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(alphabet.Utf8(static_cast<uint8_t>(b)))] = b;
  json merges = json::array();
  for (const auto& [l, r] : spec.merges) {
    if (!vocab.contains(l + r)) vocab[l + r] = static_cast<int>(vocab.size());
    merges.push_back({l, r});
  }
  json added = spec.added_tokens;
  for (json& a : added) {
    if (!a.contains("id")) a["id"] = static_cast<int>(vocab.size());
    vocab[a["content"].get<std::string>()] = a["id"];
  }
  json model = {{"type", "BPE"},     {"dropout", nullptr},     {"unk_token", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                {"vocab", vocab},    {"merges", merges}};
  model.update(spec.model_extra);
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", spec.pre_tokenizer},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", model}};
}

Tokenizer LoadMini(const json& j) {
  Result<Tokenizer> r = Tokenizer::LoadJson(j.dump());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) std::abort();
  return std::move(r).value();
}

std::vector<std::string> EncodeToTexts(const Tokenizer& t, std::string_view s) {
  Result<std::vector<int32_t>> ids = t.Encode(s);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? TokenTexts(t, *ids) : std::vector<std::string>{};
}

json AddedTokenJson(const std::string& content, bool lstrip, bool rstrip, bool single_word, bool normalized) {
  return {{"content", content}, {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip},   {"normalized", normalized},   {"special", !normalized}};
}

TEST(MiniTokenizerTest, MergesApplyByRankNotPosition) {
  MiniSpec spec;
  // "abc": (b,c) has the lower rank, so it merges first although (a,b) comes first in the text.
  spec.merges = {{"b", "c"}, {"a", "b"}, {"a", "bc"}, {"x", "x"}};
  const Tokenizer t = LoadMini(MiniJson(spec));
  EXPECT_EQ(EncodeToTexts(t, "abc"), (std::vector<std::string>{"abc"}));
  EXPECT_EQ(EncodeToTexts(t, "ab"), (std::vector<std::string>{"ab"}));
  // Equal ranks merge leftmost first: "xxx" -> "xx" + "x".
  EXPECT_EQ(EncodeToTexts(t, "xxx"), (std::vector<std::string>{"xx", "x"}));
  EXPECT_EQ(EncodeToTexts(t, "xxxx"), (std::vector<std::string>{"xx", "xx"}));
}

TEST(MiniTokenizerTest, SplitBehaviours) {
  // tokenizers' documented example: splitting "the-final--countdown" on "-". Merges make each piece
  // boundary visible in the tokens ("e-", "-f", "--" exist only if a piece holds them).
  const std::pair<const char*, std::vector<std::string>> kCases[] = {
      {"Removed", {"t", "h", "e", "f", "i", "n", "a", "l", "c", "o", "u", "n", "t", "d", "o", "w", "n"}},
      {"Isolated",
       {"t", "h", "e", "-", "f", "i", "n", "a", "l", "-", "-", "c", "o", "u", "n", "t", "d", "o", "w", "n"}},
      {"MergedWithPrevious",
       {"t", "h", "e-", "f", "i", "n", "a", "l-", "-", "c", "o", "u", "n", "t", "d", "o", "w", "n"}},
      {"MergedWithNext",
       {"t", "h", "e", "-f", "i", "n", "a", "l", "-", "-c", "o", "u", "n", "t", "d", "o", "w", "n"}},
      {"Contiguous",
       {"t", "h", "e", "-", "f", "i", "n", "a", "l", "--", "c", "o", "u", "n", "t", "d", "o", "w", "n"}},
  };
  for (const auto& [behavior, expected] : kCases) {
    MiniSpec spec;
    spec.merges = {{"e", "-"}, {"l", "-"}, {"-", "f"}, {"-", "c"}, {"-", "-"}};
    spec.pre_tokenizer = json::parse(R"({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "-"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
    spec.pre_tokenizer["pretokenizers"][0]["behavior"] = behavior;
    EXPECT_EQ(EncodeToTexts(LoadMini(MiniJson(spec)), "the-final--countdown"), expected) << behavior;
  }
  // invert: the pattern marks what to keep; Removed then drops the dashes' complement.
  MiniSpec spec;
  spec.pre_tokenizer =
      json::parse(R"({"type": "Split", "pattern": {"Regex": "-+"}, "behavior": "Removed", "invert": true})");
  // Without a ByteLevel step the BPE sees raw text; "-" is byte-level symbol 0x2D as itself.
  EXPECT_EQ(EncodeToTexts(LoadMini(MiniJson(spec)), "ab--c-"), (std::vector<std::string>{"-", "-", "-"}));
}

// A hostile pre-tokenizer regex: `a(?=.*.*.*!)` backtracks ~n^3 steps per start position on a run of a's with
// no '!' (1600 of them took > 60 s with PCRE2's per-call limit). The budget is per text, 10M + 1024 steps per
// byte and pass, so it fails with the budget in the message; the same pattern on a text that satisfies the
// lookahead encodes, as does a 1 MiB run of spaces under the LFM2 pattern (LongInputsEncodeInFull).
TEST(MiniTokenizerTest, SuperLinearRegexStopsOnThePerTextBudget) {
  MiniSpec spec;
  spec.pre_tokenizer = {{"type", "Split"},
                        {"pattern", {{"Regex", "a(?=.*.*.*!)"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  const Tokenizer t = LoadMini(MiniJson(spec));
  Result<std::vector<int32_t>> ids = t.Encode(std::string(1600, 'a'));
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(ids.status().message().find("budget of 11638400 match steps for a 1600-byte text"),
            std::string::npos)
      << ids.status().message();
  EXPECT_EQ(EncodeToTexts(t, "aaa!"), (std::vector<std::string>{"a", "a", "a", "!"}));
}

TEST(MiniTokenizerTest, ByteLevelPrefixSpaceAndGpt2Regex) {
  MiniSpec spec;
  spec.merges = {{"Ġ", "a"}, {"Ġa", "b"}};
  spec.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  const Tokenizer t = LoadMini(MiniJson(spec));
  // The prefix space makes the first word look like the others; the GPT-2 regex splits "ab ab's".
  EXPECT_EQ(EncodeToTexts(t, "ab ab's"), (std::vector<std::string>{"Ġab", "Ġab", "'", "s"}));
  EXPECT_EQ(t.Decode(t.Encode("ab ab").value()), " ab ab");
}

TEST(MiniTokenizerTest, RegexWhitespaceIsUnicodeWhiteSpaceAsInOniguruma) {
  // tokenizers runs the pattern with Oniguruma, whose \s is White_Space; PCRE2's own \s adds U+180E
  // (MONGOLIAN VOWEL SEPARATOR, a format character). With Oniguruma's meaning "\u180e!" is one
  // ` ?[^\s\p{L}\p{N}]+` piece, so the merge (last byte of U+180E, "!") applies; had U+180E counted as \s,
  // `\s+` would cut it off from "!" and the merge could not happen. U+0085 (NEL) is White_Space in both.
  MiniSpec spec;
  const std::string last_byte(text::ByteLevelAlphabet::Get().Utf8(0x8E));
  spec.merges = {{last_byte, "!"}};
  spec.pre_tokenizer = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "behavior": "Isolated", "invert": false, "pattern": {"Regex": ""}},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
  spec.pre_tokenizer["pretokenizers"][0]["pattern"]["Regex"] = kLfm2Pattern;
  const Tokenizer t = LoadMini(MiniJson(spec));
  const std::vector<std::string> got = EncodeToTexts(t, "\u180e!");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), last_byte + "!");
  // NEL is whitespace: "\u0085!" splits into "\u0085" and "!", so "!" stays alone.
  EXPECT_EQ(EncodeToTexts(t, "\u0085!").back(), "!");
}

TEST(MiniTokenizerTest, AddedTokenStripAndSingleWord) {
  // Cases from tokenizers' own added_vocabulary tests (there with a lowercasing normalizer, here without).
  MiniSpec spec;
  spec.added_tokens.push_back(AddedTokenJson("<mask>", /*lstrip=*/false, /*rstrip=*/false,
                                             /*single_word=*/true,
                                             /*normalized=*/false));
  Tokenizer t = LoadMini(MiniJson(spec));
  // Only the <mask>s with no word character next to them are cut out.
  std::vector<std::string> expected = {"<mask>"};
  for (const char c : std::string(" My name ")) expected.emplace_back(text::ByteLevelAlphabet::Get().Utf8(c));
  expected.push_back("<mask>");
  for (const char c : std::string(" A<mask> <mask>ony ")) {
    expected.emplace_back(text::ByteLevelAlphabet::Get().Utf8(c));
  }
  expected.push_back("<mask>");
  EXPECT_EQ(EncodeToTexts(t, "<mask> My name <mask> A<mask> <mask>ony <mask>"), expected);
  // Combining marks are word characters for single_word (Rust's \w), punctuation is not.
  const std::vector<std::string> punct = EncodeToTexts(t, "<mask>,");
  EXPECT_EQ(punct.front(), "<mask>");
  EXPECT_NE(EncodeToTexts(t, "e\u0301<mask>").back(), "<mask>");

  spec.added_tokens = json::array();
  spec.added_tokens.push_back(AddedTokenJson("<mask>", true, true, true, false));
  t = LoadMini(MiniJson(spec));
  // Strips swallow Unicode whitespace (tab, U+2000) around the token.
  EXPECT_EQ(EncodeToTexts(t, "Hi <mask> there\t<mask>\t<mask>\u2000"),
            (std::vector<std::string>{"H", "i", "<mask>", "t", "h", "e", "r", "e", "<mask>", "<mask>"}));
}

TEST(MiniTokenizerTest, LongestAddedTokenWinsAndNormalizedOnesMatchAfterRawOnes) {
  MiniSpec spec;
  spec.added_tokens.push_back(AddedTokenJson("<a>", false, false, false, false));
  spec.added_tokens.push_back(AddedTokenJson("<a><b>", false, false, false, false));
  spec.added_tokens.push_back(AddedTokenJson("b>x", false, false, false, true));
  const Tokenizer t = LoadMini(MiniJson(spec));
  EXPECT_EQ(EncodeToTexts(t, "<a><b>x"), (std::vector<std::string>{"<a><b>", "x"}));
  EXPECT_EQ(EncodeToTexts(t, "<a>b>x"), (std::vector<std::string>{"<a>", "b>x"}));
}

TEST(MiniTokenizerTest, UnknownCharactersWithoutByteLevel) {
  MiniSpec spec;
  spec.pre_tokenizer = nullptr;
  spec.added_tokens.push_back(AddedTokenJson("<unk>", false, false, false, false));
  spec.model_extra = {{"unk_token", "<unk>"}};
  const Tokenizer t = LoadMini(MiniJson(spec));
  // Without the ByteLevel step BPE sees raw characters; "中" is not in the (byte-level) vocabulary.
  EXPECT_EQ(EncodeToTexts(t, "a中中b"), (std::vector<std::string>{"a", "<unk>", "<unk>", "b"}));

  spec.model_extra = {{"unk_token", "<unk>"}, {"fuse_unk", true}};
  EXPECT_EQ(EncodeToTexts(LoadMini(MiniJson(spec)), "a中中b"), (std::vector<std::string>{"a", "<unk>", "b"}));

  spec.model_extra = json::object();
  EXPECT_EQ(EncodeToTexts(LoadMini(MiniJson(spec)), "a中b"),
            (std::vector<std::string>{"a", "b"}));  // dropped

  // byte_fallback: <0xE4> <0xB8> <0xAD> for 中.
  json j = MiniJson(spec);
  for (const char* b : {"<0xE4>", "<0xB8>", "<0xAD>"}) j["model"]["vocab"][b] = j["model"]["vocab"].size();
  j["model"]["byte_fallback"] = true;
  EXPECT_EQ(EncodeToTexts(LoadMini(j), "a中b"),
            (std::vector<std::string>{"a", "<0xE4>", "<0xB8>", "<0xAD>", "b"}));
}

TEST(MiniTokenizerTest, OlderStringMergesAndSubwordPrefix) {
  MiniSpec spec;
  json j = MiniJson(spec);
  j["model"]["vocab"]["##b"] = 300;
  j["model"]["vocab"]["ab"] = 301;
  j["model"]["merges"] = json::array({"a ##b"});
  j["model"]["continuing_subword_prefix"] = "##";
  j["pre_tokenizer"] = nullptr;
  const Tokenizer t = LoadMini(j);
  EXPECT_EQ(EncodeToTexts(t, "ab"), (std::vector<std::string>{"ab"}));
}

TEST(MiniTokenizerTest, TemplateAddsPrefixAndSuffix) {
  MiniSpec spec;
  json j = MiniJson(spec);
  j["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "B", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "E", "type_id": 0}}],
      "special_tokens": {"B": {"id": "B", "ids": [40, 41]}, "E": {"id": "E", "ids": [42]}}})");
  const Tokenizer t = LoadMini(j);
  EXPECT_EQ(t.EncodeWithSpecialTokens("a").value(), (std::vector<int32_t>{40, 41, 'a' /* byte id */, 42}));
}

// ---------------------------------------------------------------------------------------------------------
// Malformed files: clear errors, never a crash.

void ExpectLoadError(const std::string& text, StatusCode code, const std::string& part) {
  Result<Tokenizer> r = Tokenizer::LoadJson(text);
  ASSERT_FALSE(r.ok()) << "accepted a file that should fail with: " << part;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

void ExpectLoadError(const json& j, StatusCode code, const std::string& part) {
  ExpectLoadError(j.dump(), code, part);
}

TEST(TokenizerLoadTest, RejectsMalformedFiles) {
  const json good = MiniJson(MiniSpec());
  ASSERT_TRUE(Tokenizer::LoadJson(good.dump()).ok());

  ExpectLoadError(std::string("{\"model\": "), StatusCode::kDataLoss, "not valid JSON");
  ExpectLoadError(std::string("[1, 2]"), StatusCode::kDataLoss, "must hold a JSON object");
  ExpectLoadError(std::string(""), StatusCode::kDataLoss, "not valid JSON");

  json j = good;
  j.erase("model");
  ExpectLoadError(j, StatusCode::kDataLoss, "no \"model\" object");
  j = good;
  j["model"]["type"] = "WordPiece";
  ExpectLoadError(j, StatusCode::kUnimplemented, "\"WordPiece\"");
  j = good;
  j["model"]["merges"] = json::parse(R"([["a", "nosuchtoken"]])");
  ExpectLoadError(j, StatusCode::kDataLoss, "model.merges[0] uses \"nosuchtoken\"");
  j = good;
  j["model"]["merges"] = json::parse(R"([["a", "b"]])");  // "ab" is not in the vocabulary
  ExpectLoadError(j, StatusCode::kDataLoss, "makes \"ab\", which is not in model.vocab");
  j = good;
  j["model"]["merges"] = json::array({"a b c"});
  ExpectLoadError(j, StatusCode::kDataLoss, "model.merges[0]");
  j = good;
  j["model"]["merges"] = json::parse(R"([["a"]])");
  ExpectLoadError(j, StatusCode::kDataLoss, "model.merges[0]");
  j = good;
  j["model"]["vocab"]["zz"] = -3;
  ExpectLoadError(j, StatusCode::kDataLoss, "model.vocab[\"zz\"]");
  j = good;
  j["model"]["vocab"]["zz"] = "7";
  ExpectLoadError(j, StatusCode::kDataLoss, "model.vocab[\"zz\"]");
  j = good;
  j["model"]["vocab"]["zz"] = 7;
  ExpectLoadError(j, StatusCode::kDataLoss, "gives id 7 to both");
  j = good;
  j["model"]["vocab"]["zz"] = 1 << 30;
  ExpectLoadError(j, StatusCode::kOutOfRange, "id 1073741824");
  j = good;
  j["model"].erase("vocab");
  ExpectLoadError(j, StatusCode::kDataLoss, "model.vocab is missing");
  j = good;
  j["model"]["unk_token"] = "<nope>";
  ExpectLoadError(j, StatusCode::kDataLoss, "unk_token \"<nope>\"");
  j = good;
  j["model"]["dropout"] = 0.1;
  ExpectLoadError(j, StatusCode::kUnimplemented, "dropout");
  j = good;
  j["model"]["byte_fallback"] = "yes";
  ExpectLoadError(j, StatusCode::kDataLoss, "model.byte_fallback must be true or false");

  j = good;
  j["added_tokens"] = json::parse(R"([{"id": 97, "content": "<x>"}])");  // id 97 is "a" in the vocabulary...
  j["model"]["vocab"]["<x>"] = 300;                                      // ...which the vocabulary has at 300
  ExpectLoadError(j, StatusCode::kDataLoss, "\"<x>\" has id 97, but model.vocab gives it id 300");
  j = good;
  j["added_tokens"] = json::parse(R"([{"content": "<x>"}])");
  ExpectLoadError(j, StatusCode::kDataLoss, "added_tokens[0].id");
  j = good;
  j["added_tokens"] = json::parse(R"([{"id": 300, "content": "<x>"}, {"id": 301, "content": "<x>"}])");
  ExpectLoadError(j, StatusCode::kDataLoss, "listed twice");
  j = good;
  j["added_tokens"] = json::parse(R"([{"id": 300, "content": "<x>", "lstrip": 1}])");
  ExpectLoadError(j, StatusCode::kDataLoss, "added_tokens[0].lstrip");

  j = good;
  j["normalizer"] = {{"type", "NFC"}};
  ExpectLoadError(j, StatusCode::kUnimplemented, "\"NFC\"");
  j = good;
  j["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [{"type": "Metaspace"}]})");
  ExpectLoadError(j, StatusCode::kUnimplemented, "pre_tokenizer.pretokenizers[0] has type \"Metaspace\"");
  j = good;
  j["pre_tokenizer"] =
      json::parse(R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"})");
  ExpectLoadError(j, StatusCode::kInvalidArgument, "does not compile");
  j = good;
  j["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})");
  ExpectLoadError(j, StatusCode::kUnimplemented, "\"Sideways\"");
  j = good;
  j["pre_tokenizer"] = json::parse(R"({"pattern": {"Regex": "a"}})");
  ExpectLoadError(j, StatusCode::kDataLoss, "no string \"type\"");
  j = good;
  j["decoder"] = {{"type", "WordPiece"}};
  ExpectLoadError(j, StatusCode::kUnimplemented, "\"WordPiece\"");
  j = good;
  j["decoder"] = nullptr;
  ExpectLoadError(j, StatusCode::kUnimplemented, "decoder is null");
  j = good;
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  ExpectLoadError(j, StatusCode::kUnimplemented, "\"RobertaProcessing\"");
  j = good;
  j["post_processor"] = json::parse(R"({"type": "TemplateProcessing", "special_tokens": {},
      "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}]})");
  ExpectLoadError(j, StatusCode::kDataLoss, "special token \"<s>\" is not in");
  j = good;
  json nested = nullptr;
  for (int i = 0; i < 100; ++i) nested = {{"type", "Sequence"}, {"pretokenizers", json::array({nested})}};
  j["pre_tokenizer"] = nested;
  // 100 nested Sequences are 201 JSON levels: refused by the parse's depth limit (base/json_parse.h)
  // before any component parser recurses.
  ExpectLoadError(j, StatusCode::kOutOfRange, "tokenizer.json nests arrays/objects deeper than 32 levels");
  // A merge nested 100,000 deep: refused the same way, before a document exists (building and
  // destroying it, or dumping it into a message, would recurse). The text is spliced by hand because
  // dumping it here would recurse as well.
  j = good;
  j["model"]["merges"] = "MERGES";
  std::string deep = j.dump();
  deep.replace(deep.find("\"MERGES\""), 8, "[" + std::string(100000, '[') + std::string(100000, ']') + "]");
  ExpectLoadError(deep, StatusCode::kOutOfRange, "tokenizer.json nests arrays/objects deeper than 32 levels");
  j = good;
  j["truncation"] = json::parse(R"({"max_length": 512})");
  ExpectLoadError(j, StatusCode::kUnimplemented, "truncation");
}

TEST(TokenizerLoadTest, FileErrors) {
  Result<Tokenizer> r = Tokenizer::LoadFile("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);
}

TEST(TokenizerLoadTest, TruncatedSurrogateFailsCleanly) {
  const std::string full = ReadText(kTokenizerJson);
  ASSERT_GT(full.size(), 500000u);
  for (const size_t cut : {size_t{1}, size_t{1000}, full.size() / 2, full.size() - 2}) {
    Result<Tokenizer> r = Tokenizer::LoadJson(std::string_view(full).substr(0, cut));
    ASSERT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace lfmvox
