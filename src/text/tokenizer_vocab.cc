// GGUF vocabularies (tokenizer.ggml.*): Tokenizer::FromVocab and Tokenizer::ExportVocab.
//
// FromVocab writes the tokenizer.json object the vocabulary stands for and loads it through the same code as
// Tokenizer::LoadJson, so the two paths cannot drift apart; it validates the vocabulary first, so that errors
// name the GGUF keys rather than the JSON built from them.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/tokenizer.h"
#include "text/tokenizer_data.h"
#include "text/utf8.h"

namespace lfmvox {
namespace text {
namespace {

using json = nlohmann::json;

// LFM2's Split pattern, as its tokenizer.json spells it. llama.cpp's LLAMA3 pattern spells the contractions
// as (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]) and is otherwise the same text.
constexpr char kLfm2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The GGUF pre-tokenizer names that mean LFM2's pre-tokenizer. llama.cpp maps all three to
// LLAMA_VOCAB_PRE_TYPE_LLAMA3; "llama-bpe" is what older conversions of LFM2 wrote.
constexpr const char* kLfm2PreNames[] = {"lfm2", "llama-bpe", "llama3"};

// LFM2's pre_tokenizer object, as in its tokenizer.json.
json Lfm2PreTokenizer() {
  json split = {{"type", "Split"}, {"behavior", "Isolated"}, {"invert", false}};
  split["pattern"] = {{"Regex", kLfm2Pattern}};
  json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  json steps = json::array();
  steps.push_back(std::move(split));
  steps.push_back(std::move(byte_level));
  return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
}

// Whether a tokenizer.json pre_tokenizer is LFM2's. trim_offsets only moves reported offsets, so it may
// differ.
bool IsLfm2PreTokenizer(const json& j) {
  auto without_trim = [](json p) {
    if (p.is_object()) {
      if (auto steps = p.find("pretokenizers"); steps != p.end() && steps->is_array()) {
        for (json& step : *steps) {
          if (step.is_object()) step.erase("trim_offsets");
        }
      }
    }
    return p;
  };
  return without_trim(j) == without_trim(Lfm2PreTokenizer());
}

// A token for an error message: at most 64 bytes, cut at a character boundary.
std::string Shown(std::string_view s) {
  constexpr size_t kMax = 64;
  if (s.size() <= kMax) return std::string(s);
  size_t end = kMax;
  while (end > 0 && (static_cast<uint8_t>(s[end]) & 0xC0) == 0x80) --end;
  return std::string(s.substr(0, end)) + "...";
}

// convert_hf_to_gguf.py's does_token_look_special: added tokens that some models fail to mark special.
bool LooksSpecial(std::string_view t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (t.starts_with("<|") && t.ends_with("|>")) return true;
  if (t.starts_with("<\xEF\xBD\x9C") && t.ends_with("\xEF\xBD\x9C>")) return true;  // <｜...｜> (U+FF5C)
  return t.starts_with("<unused") && t.ends_with(">");
}

// The converter writes user-defined tokens with SentencePiece's U+2581 as a plain space.
std::string WithSpaces(std::string_view t) {
  std::string out;
  constexpr std::string_view kLowLine = "\xE2\x96\x81";
  for (size_t i = 0; i < t.size();) {
    if (t.substr(i).starts_with(kLowLine)) {
      out.push_back(' ');
      i += kLowLine.size();
    } else {
      out.push_back(t[i++]);
    }
  }
  return out;
}

bool IsAddedTokenType(int32_t type) {
  return type == TokenizerVocab::kControl || type == TokenizerVocab::kUserDefined;
}

// Checks the vocabulary and returns text -> id for its defined (non-unused) tokens.
Result<TokenMap> ValidateVocab(const TokenizerVocab& v) {
  if (v.model != "gpt2") {
    return Unimplemented("tokenizer.ggml.model is \"" + Shown(v.model) +
                         "\"; lfmvox reads \"gpt2\" (byte-level BPE) vocabularies only");
  }
  if (std::find(std::begin(kLfm2PreNames), std::end(kLfm2PreNames), v.pre) == std::end(kLfm2PreNames)) {
    return Unimplemented(
        "tokenizer.ggml.pre is \"" + Shown(v.pre) +
        "\"; lfmvox knows LFM2's pre-tokenizer, named \"lfm2\", \"llama-bpe\" or \"llama3\"");
  }
  const size_t n = v.tokens.size();
  if (n > static_cast<size_t>(kMaxTokenId) + 1) {
    return OutOfRange(StrFormat("tokenizer.ggml.tokens has %zu entries; lfmvox reads at most %lld", n,
                                static_cast<long long>(kMaxTokenId) + 1));
  }
  if (v.token_types.size() != n) {
    return DataLoss(
        StrFormat("tokenizer.ggml.token_type has %zu entries for %zu tokens", v.token_types.size(), n));
  }
  uint64_t text_bytes = 0;
  for (const std::string& t : v.tokens) text_bytes += t.size();
  for (const std::string& m : v.merges) text_bytes += m.size();
  if (text_bytes > kMaxFileBytes) {
    return OutOfRange(
        StrFormat("the vocabulary's tokens and merges hold %llu bytes; lfmvox reads at most 1 GiB",
                  static_cast<unsigned long long>(text_bytes)));
  }

  TokenMap ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = v.token_types[i];
    switch (type) {
      case TokenizerVocab::kNormal:
      case TokenizerVocab::kControl:
      case TokenizerVocab::kUserDefined:
        break;
      case TokenizerVocab::kUnused:
        continue;  // an undefined id: its text ("[PAD<id>]") is never matched or decoded
      case TokenizerVocab::kUnknown:
      case TokenizerVocab::kByte:
        return Unimplemented(
            StrFormat("tokenizer.ggml.token_type[%zu] is %d (%s); a gpt2 vocabulary holds "
                      "types 1, 3, 4 and 5 only",
                      i, type, type == TokenizerVocab::kUnknown ? "unknown" : "byte"));
      default:
        return DataLoss(
            StrFormat("tokenizer.ggml.token_type[%zu] is %d, which is no token type (1 to 6)", i, type));
    }
    if (v.tokens[i].empty()) return DataLoss(StrFormat("tokenizer.ggml.tokens[%zu] is empty", i));
    // GGUF strings are UTF-8, and the tables built from them (as from tokenizer.json, which a JSON parser has
    // checked) rely on it.
    if (const size_t bad = FindInvalidUtf8(v.tokens[i]); bad != std::string::npos) {
      return DataLoss(StrFormat("tokenizer.ggml.tokens[%zu] is not valid UTF-8 (byte %zu of %zu is 0x%02X)",
                                i, bad, v.tokens[i].size(),
                                static_cast<unsigned>(static_cast<uint8_t>(v.tokens[i][bad]))));
    }
    const auto [it, inserted] = ids.emplace(v.tokens[i], static_cast<int32_t>(i));
    if (!inserted) {
      return DataLoss(StrFormat("tokenizer.ggml.tokens[%d] and [%zu] are both \"%s\"", it->second, i,
                                Shown(v.tokens[i]).c_str()));
    }
  }

  const std::pair<const char*, int32_t> specials[] = {{"bos", v.bos}, {"eos", v.eos}, {"padding", v.pad}};
  for (const auto& [name, id] : specials) {
    if (id == -1) continue;
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return OutOfRange(
          StrFormat("tokenizer.ggml.%s_token_id is %d; the vocabulary has %zu tokens", name, id, n));
    }
    if (v.token_types[id] == TokenizerVocab::kUnused) {
      return DataLoss(StrFormat("tokenizer.ggml.%s_token_id %d names an unused entry (\"%s\")", name, id,
                                Shown(v.tokens[id]).c_str()));
    }
  }
  if (v.add_bos && v.bos < 0) {
    return DataLoss("tokenizer.ggml.add_bos_token is set, but there is no tokenizer.ggml.bos_token_id");
  }
  if (v.add_eos && v.eos < 0) {
    return DataLoss("tokenizer.ggml.add_eos_token is set, but there is no tokenizer.ggml.eos_token_id");
  }

  // The same checks as the tokenizer.json reader's (BpeModel::FromJson), with the GGUF key in the message.
  std::string merged;
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string_view m = v.merges[i];
    const size_t space = m.find(' ');
    if (space == std::string_view::npos || m.find(' ', space + 1) != std::string_view::npos) {
      return DataLoss(
          StrFormat("tokenizer.ggml.merges[%zu] is \"%s\"; expected \"left right\" with one space", i,
                    Shown(m).c_str()));
    }
    const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
    for (const std::string_view part : {left, right}) {
      if (!ids.contains(part)) {
        return DataLoss(
            StrFormat("tokenizer.ggml.merges[%zu] uses \"%s\", which is not in tokenizer.ggml.tokens", i,
                      Shown(part).c_str()));
      }
    }
    merged.assign(left);
    merged.append(right);
    if (!ids.contains(merged)) {
      return DataLoss(
          StrFormat("tokenizer.ggml.merges[%zu] makes \"%s\", which is not in tokenizer.ggml.tokens", i,
                    Shown(merged).c_str()));
    }
  }
  return ids;
}

// The tokenizer.json object a valid vocabulary stands for.
json VocabJson(const TokenizerVocab& v) {
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const int32_t type = v.token_types[i];
    if (type == TokenizerVocab::kUnused) continue;
    vocab[v.tokens[i]] = static_cast<int64_t>(i);
    if (IsAddedTokenType(type)) {
      const bool special = type == TokenizerVocab::kControl;
      added.push_back({{"id", static_cast<int64_t>(i)},
                       {"content", v.tokens[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", !special},
                       {"special", special}});
    }
  }
  json model = {{"type", "BPE"},     {"dropout", nullptr},     {"unk_token", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false}};
  model["vocab"] = std::move(vocab);
  model["merges"] = v.merges;

  json post_processor = nullptr;
  if (v.add_bos || v.add_eos) {
    json single = json::array();
    json special_tokens = json::object();
    auto add_special = [&](int32_t id) {
      const std::string& name = v.tokens[id];
      single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
      special_tokens[name] = {{"id", name}, {"ids", json::array({id})}, {"tokens", json::array({name})}};
    };
    if (v.add_bos) add_special(v.bos);
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (v.add_eos) add_special(v.eos);
    post_processor = {{"type", "TemplateProcessing"}, {"single", std::move(single)}};
    post_processor["special_tokens"] = std::move(special_tokens);
  }

  json root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"normalizer", nullptr}};
  root["added_tokens"] = std::move(added);
  root["pre_tokenizer"] = Lfm2PreTokenizer();
  root["post_processor"] = std::move(post_processor);
  root["decoder"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  root["model"] = std::move(model);
  return root;
}

}  // namespace
}  // namespace text

Result<Tokenizer> Tokenizer::FromVocab(const TokenizerVocab& vocab) {
  LFM_RETURN_IF_ERROR(text::ValidateVocab(vocab).status());
  Result<std::shared_ptr<text::TokenizerData>> data = text::BuildTokenizerData(text::VocabJson(vocab));
  if (!data.ok()) return data.status().WithContext("GGUF vocabulary");
  return Tokenizer(std::move(data).value());
}

Result<TokenizerVocab> Tokenizer::ExportVocab(const VocabExportOptions& options) const {
  const text::TokenizerData& d = *data_;
  if (!text::IsLfm2PreTokenizer(d.pre_tokenizer_json)) {
    return Unimplemented(
        "the pre-tokenizer is not LFM2's (Split on the Llama-3 pattern, then ByteLevel without prefix space "
        "or regex); a GGUF vocabulary names its pre-tokenizer, and lfmvox knows only \"lfm2\"");
  }
  if (!d.model.HasOnlyDefaultOptions()) {
    return Unimplemented(
        "model sets unk_token, byte_fallback, ignore_merges, continuing_subword_prefix or "
        "end_of_word_suffix, "
        "which a GGUF \"gpt2\" vocabulary cannot carry");
  }
  const int32_t defined = vocab_size();
  if (options.vocab_size < 0 || (options.vocab_size > 0 && options.vocab_size < defined) ||
      options.vocab_size > text::kMaxTokenId + 1) {
    return InvalidArgument(
        StrFormat("options.vocab_size is %d; this tokenizer needs at least %d (at most %lld)",
                  options.vocab_size, defined, static_cast<long long>(text::kMaxTokenId) + 1));
  }
  const int32_t n = options.vocab_size > 0 ? options.vocab_size : defined;

  std::vector<const std::string*> model_text(defined, nullptr);  // the BPE vocabulary by id
  for (const auto& [token, id] : d.model.vocab()) model_text[id] = &token;
  std::vector<const text::AddedToken*> added_at(defined, nullptr);
  for (const text::AddedToken& t : d.added) {
    if (model_text[t.id] != nullptr && *model_text[t.id] != t.content) {
      return Unimplemented(
          StrFormat("id %d is both the vocabulary entry \"%s\" and the added token \"%s\"; a "
                    "GGUF vocabulary has one token per id",
                    t.id, text::Shown(*model_text[t.id]).c_str(), text::Shown(t.content).c_str()));
    }
    added_at[t.id] = &t;
  }

  TokenizerVocab v;
  v.model = "gpt2";
  v.pre = "lfm2";
  v.tokens.reserve(n);
  v.token_types.reserve(n);
  for (int32_t id = 0; id < n; ++id) {
    if (id < defined && added_at[id] != nullptr) {
      const text::AddedToken& t = *added_at[id];
      const bool control = t.special || text::LooksSpecial(t.content);
      v.tokens.push_back(control ? t.content : text::WithSpaces(t.content));
      v.token_types.push_back(control ? TokenizerVocab::kControl : TokenizerVocab::kUserDefined);
    } else if (id < defined && model_text[id] != nullptr) {
      v.tokens.push_back(*model_text[id]);
      v.token_types.push_back(TokenizerVocab::kNormal);
    } else {
      v.tokens.push_back(StrFormat("[PAD%d]", id));
      v.token_types.push_back(TokenizerVocab::kUnused);
    }
  }

  const std::vector<std::pair<int32_t, int32_t>> merges = d.model.MergesByRank();
  v.merges.reserve(merges.size());
  for (const auto& [left, right] : merges) {
    const std::string& l = *model_text[left];
    const std::string& r = *model_text[right];
    if (l.find(' ') != std::string::npos || r.find(' ') != std::string::npos) {
      return Unimplemented("the merge \"" + text::Shown(l) + "\" + \"" + text::Shown(r) +
                           "\" has a space in a part, which a GGUF \"left right\" merge cannot hold");
    }
    v.merges.push_back(l + " " + r);
  }

  if (d.template_prefix.size() > 1 || d.template_suffix.size() > 1) {
    return Unimplemented(
        StrFormat("the post-processor adds %zu tokens before the text and %zu after; a GGUF "
                  "vocabulary has one bos and one eos",
                  d.template_prefix.size(), d.template_suffix.size()));
  }
  auto special_id = [&](const char* name, int32_t given, const std::vector<int32_t>& from_template,
                        int32_t* out) -> Status {
    const int32_t templated = from_template.empty() ? -1 : from_template[0];
    if (given != -1 && templated != -1 && given != templated) {
      return InvalidArgument(
          StrFormat("options.%s is %d, but the post-processor template adds %d", name, given, templated));
    }
    *out = given != -1 ? given : templated;
    if (*out != -1 && (*out < 0 || *out >= n || v.token_types[*out] == TokenizerVocab::kUnused)) {
      return InvalidArgument(StrFormat("%s id %d is not a token of this tokenizer", name, *out));
    }
    return Status::Ok();
  };
  LFM_RETURN_IF_ERROR(special_id("bos", options.bos, d.template_prefix, &v.bos));
  LFM_RETURN_IF_ERROR(special_id("eos", options.eos, d.template_suffix, &v.eos));
  LFM_RETURN_IF_ERROR(special_id("pad", options.pad, {}, &v.pad));
  v.add_bos = !d.template_prefix.empty();
  v.add_eos = !d.template_suffix.empty();
  v.chat_template = options.chat_template;
  return v;
}

}  // namespace lfmvox
