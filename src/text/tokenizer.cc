#include "text/tokenizer.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/file_read.h"
#include "base/json_parse.h"
#include "text/bpe.h"
#include "text/json_fields.h"
#include "text/regex.h"
#include "text/tokenizer_data.h"
#include "text/utf8.h"

namespace lfmvox {
namespace text {

using json = nlohmann::json;

namespace {

// Sequences of components nest; the parsers recurse once per level, so the depth is bounded.
constexpr int kMaxNesting = 16;

// The pattern tokenizers' ByteLevel pre-tokenizer splits with when use_regex is true (GPT-2's).
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Rust regex's Unicode \w, which tokenizers uses for an added token's single_word test.
constexpr char kWordCharPattern[] = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])";

}  // namespace

namespace {

// ---------------------------------------------------------------------------------------------------------
// Loading

Status ParseAddedTokens(const json& root, TokenizerData* d) {
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return DataLoss("added_tokens must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    const std::string where = StrFormat("added_tokens[%zu]", i);
    if (!e.is_object()) return DataLoss(where + " must be an object");
    AddedToken t;
    const auto id = e.find("id");
    if (id == e.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
        id->get<int64_t>() > kMaxTokenId) {
      return DataLoss(StrFormat("%s.id must be an integer in [0, %lld]", where.c_str(),
                                static_cast<long long>(kMaxTokenId)));
    }
    t.id = static_cast<int32_t>(id->get<int64_t>());
    bool has_content = false;
    LFM_RETURN_IF_ERROR(OptionalString(e, where, "content", &t.content, &has_content));
    if (!has_content) return DataLoss(where + " has no \"content\"");
    LFM_RETURN_IF_ERROR(OptionalBool(e, where, "single_word", &t.single_word));
    LFM_RETURN_IF_ERROR(OptionalBool(e, where, "lstrip", &t.lstrip));
    LFM_RETURN_IF_ERROR(OptionalBool(e, where, "rstrip", &t.rstrip));
    LFM_RETURN_IF_ERROR(OptionalBool(e, where, "normalized", &t.normalized));
    LFM_RETURN_IF_ERROR(OptionalBool(e, where, "special", &t.special));
    if (t.content.empty()) continue;  // tokenizers ignores empty added tokens
    // tokenizers gives an added token the vocabulary's id for its text; a file where they differ is corrupt.
    if (const auto vocab_id = d->model.TokenToId(t.content); vocab_id && *vocab_id != t.id) {
      return DataLoss(StrFormat("%s \"%s\" has id %d, but model.vocab gives it id %d", where.c_str(),
                                t.content.c_str(), t.id, *vocab_id));
    }
    if (!d->added_ids.emplace(t.content, t.id).second) {
      return DataLoss(where + " \"" + t.content + "\" is listed twice");
    }
    d->added.push_back(std::move(t));
  }
  return Status::Ok();
}

// The id table: vocabulary entries, then added tokens over them (decoding looks at added tokens first).
Status BuildIdTable(TokenizerData* d) {
  int64_t max_id = -1;
  for (const auto& [token, id] : d->model.vocab()) max_id = std::max<int64_t>(max_id, id);
  for (const AddedToken& t : d->added) max_id = std::max<int64_t>(max_id, t.id);
  if (max_id > kMaxTokenId) {
    return OutOfRange(StrFormat("model.vocab has id %lld; lfmvox reads ids up to %lld",
                                static_cast<long long>(max_id), static_cast<long long>(kMaxTokenId)));
  }
  d->ids.assign(static_cast<size_t>(max_id + 1), {});
  std::vector<const std::string*> owner(d->ids.size(), nullptr);  // to name both tokens of a clash
  for (const auto& [token, id] : d->model.vocab()) {
    if (owner[id] != nullptr) {
      return DataLoss(StrFormat("model.vocab gives id %d to both \"%s\" and \"%s\"", id, owner[id]->c_str(),
                                token.c_str()));
    }
    owner[id] = &token;
  }
  TokenMap special_contents;
  for (const AddedToken& t : d->added) {
    owner[t.id] = &t.content;
    if (t.special) special_contents.emplace(t.content, t.id);
  }

  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  for (size_t id = 0; id < owner.size(); ++id) {
    if (owner[id] == nullptr) continue;
    const std::string& text = *owner[id];
    TokenizerData::IdEntry& e = d->ids[id];
    e.defined = true;
    // tokenizers matches special tokens by text when skipping them, whichever id carries the text.
    e.special = special_contents.contains(text);
    e.text_begin = static_cast<uint32_t>(d->text_arena.size());
    e.text_len = static_cast<uint32_t>(text.size());
    d->text_arena += text;
    // The ByteLevel decoder: every character back to its byte, or, if any character is outside the
    // byte-level alphabet (an added token such as "é" spelled plainly), the token's own UTF-8 bytes.
    e.bytes_begin = static_cast<uint32_t>(d->bytes_arena.size());
    std::string bytes;
    for (size_t i = 0; i < text.size();) {
      size_t len = 0;
      const int b = alphabet.Byte(DecodeUtf8At(text, i, &len));
      if (b < 0) {
        bytes = text;
        break;
      }
      bytes.push_back(static_cast<char>(b));
      i += len;
    }
    e.bytes_len = static_cast<uint32_t>(bytes.size());
    d->bytes_arena += bytes;
  }
  return Status::Ok();
}

Status CheckNesting(int depth, const std::string& where) {
  if (depth <= kMaxNesting) return Status::Ok();
  return DataLoss(StrFormat("%s: Sequences nest more than %d deep", where.c_str(), kMaxNesting));
}

Status ParseNormalizer(const json& j, const std::string& where, int depth = 0) {
  if (j.is_null()) return Status::Ok();
  LFM_RETURN_IF_ERROR(CheckNesting(depth, where));
  LFM_ASSIGN_OR_RETURN(const std::string type, ComponentType(j, where));
  if (type == "Sequence") {
    const auto list = j.find("normalizers");
    if (list == j.end() || !list->is_array()) return DataLoss(where + ".normalizers must be an array");
    for (size_t i = 0; i < list->size(); ++i) {
      LFM_RETURN_IF_ERROR(
          ParseNormalizer((*list)[i], StrFormat("%s.normalizers[%zu]", where.c_str(), i), depth + 1));
    }
    return Status::Ok();
  }
  return Unimplemented(where + " has type \"" + type +
                       "\"; lfmvox reads tokenizers without a normalizer (null), as LFM2's is");
}

Result<SplitBehavior> ParseSplitBehavior(const json& j, const std::string& where) {
  static constexpr std::pair<const char*, SplitBehavior> kNames[] = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  const auto it = j.find("behavior");
  if (it == j.end() || !it->is_string()) return DataLoss(where + ".behavior must be a string");
  for (const auto& [name, behavior] : kNames) {
    if (*it == name) return behavior;
  }
  return Unimplemented(where + ".behavior \"" + it->get<std::string>() +
                       "\" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

Status ParsePreTokenizer(const json& j, const std::string& where, std::vector<PreTokenizerStep>* steps,
                         int depth = 0) {
  if (j.is_null()) return Status::Ok();
  LFM_RETURN_IF_ERROR(CheckNesting(depth, where));
  LFM_ASSIGN_OR_RETURN(const std::string type, ComponentType(j, where));
  if (type == "Sequence") {
    const auto list = j.find("pretokenizers");
    if (list == j.end() || !list->is_array()) return DataLoss(where + ".pretokenizers must be an array");
    for (size_t i = 0; i < list->size(); ++i) {
      LFM_RETURN_IF_ERROR(ParsePreTokenizer((*list)[i], StrFormat("%s.pretokenizers[%zu]", where.c_str(), i),
                                            steps, depth + 1));
    }
    return Status::Ok();
  }
  PreTokenizerStep step;
  if (type == "Split") {
    const auto pattern = j.find("pattern");
    if (pattern == j.end() || !pattern->is_object() || pattern->size() != 1 ||
        !pattern->begin().value().is_string() ||
        (pattern->begin().key() != "Regex" && pattern->begin().key() != "String")) {
      return DataLoss(where + ".pattern must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    }
    const bool literal = pattern->begin().key() == "String";
    Result<Regex> regex = Regex::Compile(pattern->begin().value().get_ref<const std::string&>(), literal);
    if (!regex.ok()) return regex.status().WithContext(where + ".pattern");
    step.regex = std::move(regex).value();
    LFM_ASSIGN_OR_RETURN(step.behavior, ParseSplitBehavior(j, where));
    LFM_RETURN_IF_ERROR(OptionalBool(j, where, "invert", &step.invert));
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    bool use_regex = true;  // tokenizers' defaults
    step.add_prefix_space = true;
    LFM_RETURN_IF_ERROR(OptionalBool(j, where, "add_prefix_space", &step.add_prefix_space));
    LFM_RETURN_IF_ERROR(OptionalBool(j, where, "use_regex", &use_regex));
    if (use_regex) {
      Result<Regex> regex = Regex::Compile(kGpt2Pattern, /*literal=*/false);
      if (!regex.ok()) return regex.status().WithContext("the GPT-2 pattern");
      step.regex = std::move(regex).value();
    }
  } else {
    return Unimplemented(where + " has type \"" + type + "\"; lfmvox reads Split, ByteLevel and Sequence");
  }
  steps->push_back(std::move(step));
  return Status::Ok();
}

// TemplateProcessing's single-sequence template: the special tokens' ids around $A.
Status ParseTemplate(const json& j, const std::string& where, std::vector<int32_t>* prefix,
                     std::vector<int32_t>* suffix) {
  const auto single = j.find("single");
  if (single == j.end() || !single->is_array()) {
    return Unimplemented(where + ".single must be a list of pieces (the string form is not read)");
  }
  const auto specials = j.find("special_tokens");
  std::vector<int32_t> before, after;
  bool seen_a = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& piece = (*single)[i];
    const std::string here = StrFormat("%s.single[%zu]", where.c_str(), i);
    if (!piece.is_object() || piece.size() != 1 || !piece.begin().value().is_object()) {
      return DataLoss(here + " must be {\"SpecialToken\": {...}} or {\"Sequence\": {...}}");
    }
    const json& body = piece.begin().value();
    const auto id = body.find("id");
    if (id == body.end() || !id->is_string()) return DataLoss(here + " has no string \"id\"");
    if (piece.begin().key() == "Sequence") {
      if (*id != "A") return DataLoss(here + ": the single-sequence template can only hold sequence A");
      if (seen_a) return DataLoss(here + ": sequence A appears twice");
      seen_a = true;
      continue;
    }
    if (piece.begin().key() != "SpecialToken") {
      return DataLoss(here + " is neither SpecialToken nor Sequence");
    }
    const std::string& name = id->get_ref<const std::string&>();
    const json* entry = nullptr;
    if (specials != j.end() && specials->is_object()) {
      if (const auto e = specials->find(name); e != specials->end()) entry = &*e;
    }
    if (entry == nullptr) {
      return DataLoss(here + ": special token \"" + name + "\" is not in " + where + ".special_tokens");
    }
    const auto ids = entry->is_object() ? entry->find("ids") : entry->end();
    if (ids == entry->end() || !ids->is_array()) {
      return DataLoss(where + ".special_tokens[\"" + name + "\"].ids must be an array");
    }
    for (const json& v : *ids) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxTokenId) {
        return DataLoss(where + ".special_tokens[\"" + name + "\"].ids holds a value that is not a token id");
      }
      (seen_a ? after : before).push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
  }
  if (!seen_a) return DataLoss(where + ".single has no Sequence A");
  // Processors run in turn, each wrapping the result of the one before.
  prefix->insert(prefix->begin(), before.begin(), before.end());
  suffix->insert(suffix->end(), after.begin(), after.end());
  return Status::Ok();
}

Status ParsePostProcessor(const json& j, const std::string& where, TokenizerData* d, int depth = 0) {
  if (j.is_null()) return Status::Ok();
  LFM_RETURN_IF_ERROR(CheckNesting(depth, where));
  LFM_ASSIGN_OR_RETURN(const std::string type, ComponentType(j, where));
  if (type == "Sequence") {
    const auto list = j.find("processors");
    if (list == j.end() || !list->is_array()) return DataLoss(where + ".processors must be an array");
    for (size_t i = 0; i < list->size(); ++i) {
      LFM_RETURN_IF_ERROR(
          ParsePostProcessor((*list)[i], StrFormat("%s.processors[%zu]", where.c_str(), i), d, depth + 1));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") return Status::Ok();  // it only adjusts offsets, which lfmvox does not report
  if (type == "TemplateProcessing") return ParseTemplate(j, where, &d->template_prefix, &d->template_suffix);
  return Unimplemented(where + " has type \"" + type +
                       "\"; lfmvox reads TemplateProcessing, ByteLevel and Sequence");
}

Status ParseDecoder(const json& j, const std::string& where, int depth = 0) {
  if (j.is_null()) {
    return Unimplemented(where + " is null; lfmvox decodes byte-level BPE and needs the ByteLevel decoder");
  }
  LFM_RETURN_IF_ERROR(CheckNesting(depth, where));
  LFM_ASSIGN_OR_RETURN(const std::string type, ComponentType(j, where));
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    const auto list = j.find("decoders");
    if (list != j.end() && list->is_array() && list->size() == 1) {
      return ParseDecoder((*list)[0], where + ".decoders[0]", depth + 1);
    }
  }
  return Unimplemented(where + " has type \"" + type +
                       "\"; lfmvox reads the ByteLevel decoder (alone or as the only one in a Sequence)");
}

// ---------------------------------------------------------------------------------------------------------
// Encoding

// A run of text [begin, end), or an added token's id when id >= 0.
struct Segment {
  size_t begin, end;
  int32_t id;
};

size_t PrevCharStart(std::string_view s, size_t pos) {
  do {
    --pos;
  } while (pos > 0 && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80);
  return pos;
}

// tokenizers' space_leftmost_at_end(text[..pos]): where the whitespace run that ends at `pos` begins.
size_t WhiteSpaceRunStart(std::string_view s, size_t pos) {
  while (pos > 0) {
    const size_t prev = PrevCharStart(s, pos);
    size_t len = 0;
    if (!IsUnicodeWhiteSpace(DecodeUtf8At(s, prev, &len))) break;
    pos = prev;
  }
  return pos;
}

// tokenizers' space_rightmost_at_start(text[pos..]): where the whitespace run that starts at `pos` ends.
size_t WhiteSpaceRunEnd(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t len = 0;
    if (!IsUnicodeWhiteSpace(DecodeUtf8At(s, pos, &len))) break;
    pos += len;
  }
  return pos;
}

// tokenizers' AddedVocabulary::find_matches: cuts `text` into runs of text and added tokens.
void SplitOnAddedTokens(std::string_view text, const AddedTokenTrie& trie, const TokenizerData& d,
                        std::vector<Segment>* out) {
  if (trie.empty()) {
    if (!text.empty()) out->push_back({0, text.size(), -1});
    return;
  }
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t match_end = 0;
    const int32_t index = trie.LongestAt(text, pos, &match_end);
    if (index < 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = match_end;
    pos = match_end;  // the next match is searched after this one, whether or not it is used
    const AddedToken& t = d.added[index];
    if (t.single_word) {
      const bool word_before = start > 0 && d.word_char->MatchesAt(text, PrevCharStart(text, start));
      const bool word_after = stop < text.size() && d.word_char->MatchesAt(text, stop);
      if (word_before || word_after) continue;
    }
    if (t.lstrip) start = std::max(WhiteSpaceRunStart(text, start), start_offset);
    if (t.rstrip) stop = WhiteSpaceRunEnd(text, stop);
    if (start_offset < start) out->push_back({start_offset, start, -1});
    // tokenizers drops empty pieces (possible only when strips of neighbouring tokens overlap).
    if (start < stop) out->push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out->push_back({start_offset, text.size(), -1});
}

// NormalizedString::split for one piece: cut at the matches, then keep, drop or merge the pieces as the
// behavior says. Empty pieces are dropped, as PreTokenizedString does.
Status SplitPiece(std::string_view piece, const Regex& regex, SplitBehavior behavior, bool invert,
                  MatchBudget* budget, std::vector<Span>* matches, std::vector<std::string>* out) {
  matches->clear();
  LFM_RETURN_IF_ERROR(regex.FindAll(piece, matches, budget));
  struct Part {
    Span span;
    bool is_match;
  };
  std::vector<Part> parts;  // [matches and the gaps between them], covering the piece
  size_t prev = 0;
  for (const Span& m : *matches) {
    if (prev != m.first) parts.push_back({{prev, m.first}, invert});
    parts.push_back({m, !invert});
    prev = m.second;
  }
  if (prev != piece.size()) parts.push_back({{prev, piece.size()}, invert});

  std::vector<Span> kept;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Part& p : parts) kept.push_back(p.span);
      break;
    case SplitBehavior::kRemoved:
      for (const Part& p : parts) {
        if (!p.is_match) kept.push_back(p.span);
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !kept.empty()) {
          kept.back().second = p.span.second;
        } else {
          kept.push_back(p.span);
        }
        previous_match = p.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !kept.empty()) {
          kept.back().first = it->span.first;
        } else {
          kept.push_back(it->span);
        }
        previous_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    case SplitBehavior::kContiguous:
      for (size_t i = 0; i < parts.size(); ++i) {
        if (i > 0 && parts[i].is_match == previous_match) {
          kept.back().second = parts[i].span.second;
        } else {
          kept.push_back(parts[i].span);
        }
        previous_match = parts[i].is_match;
      }
      break;
  }
  for (const Span& s : kept) {
    if (s.first < s.second) out->emplace_back(piece.substr(s.first, s.second - s.first));
  }
  return Status::Ok();
}

// Runs the pre-tokenizer steps over one run of text; the resulting pieces replace *pieces.
Status PreTokenize(const std::vector<PreTokenizerStep>& steps, std::string_view text, MatchBudget* budget,
                   std::vector<std::string>* pieces) {
  pieces->assign(1, std::string(text));
  std::vector<std::string> next;
  std::vector<Span> matches;
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  for (const PreTokenizerStep& step : steps) {
    next.clear();
    if (step.kind == PreTokenizerStep::Kind::kSplit) {
      for (const std::string& p : *pieces) {
        LFM_RETURN_IF_ERROR(SplitPiece(p, *step.regex, step.behavior, step.invert, budget, &matches, &next));
      }
    } else {
      for (std::string& p : *pieces) {
        if (step.add_prefix_space && !p.empty() && p[0] != ' ') p.insert(p.begin(), ' ');
        if (step.regex) {
          LFM_RETURN_IF_ERROR(
              SplitPiece(p, *step.regex, SplitBehavior::kIsolated, false, budget, &matches, &next));
        } else {
          next.push_back(std::move(p));
        }
      }
      for (std::string& p : next) {
        std::string mapped;
        mapped.reserve(p.size() * 2);
        for (const char c : p) mapped.append(alphabet.Utf8(static_cast<uint8_t>(c)));
        p = std::move(mapped);
      }
    }
    pieces->swap(next);
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<TokenizerData>> BuildTokenizerData(const json& root) {
  if (!root.is_object()) return DataLoss("tokenizer.json must hold a JSON object");
  for (const char* key : {"truncation", "padding"}) {
    if (const auto it = root.find(key); it != root.end() && !it->is_null()) {
      return Unimplemented(std::string("tokenizer.json sets \"") + key +
                           "\"; lfmvox encodes whole texts and needs it to be null");
    }
  }

  auto d = std::make_shared<TokenizerData>();
  const auto model = root.find("model");
  if (model == root.end() || !model->is_object()) return DataLoss("tokenizer.json has no \"model\" object");
  const auto model_type = model->find("type");
  if (model_type != model->end()) {
    if (!model_type->is_string()) return DataLoss("model.type must be a string");
    if (*model_type != "BPE") {
      return Unimplemented("model.type is \"" + model_type->get<std::string>() +
                           "\"; lfmvox reads BPE tokenizers only");
    }
  }
  LFM_ASSIGN_OR_RETURN(d->model, text::BpeModel::FromJson(*model));

  LFM_RETURN_IF_ERROR(text::ParseAddedTokens(root, d.get()));
  LFM_RETURN_IF_ERROR(text::BuildIdTable(d.get()));
  for (size_t i = 0; i < d->added.size(); ++i) {
    const text::AddedToken& t = d->added[i];
    (t.normalized ? d->normalized_trie : d->raw_trie).Add(t.content, static_cast<int32_t>(i));
    if (t.single_word && !d->word_char) {
      LFM_ASSIGN_OR_RETURN(d->word_char, text::Regex::Compile(text::kWordCharPattern, /*literal=*/false));
    }
  }

  const text::json null_json;
  auto component = [&](const char* key) -> const text::json& {
    const auto it = root.find(key);
    return it == root.end() ? null_json : *it;
  };
  LFM_RETURN_IF_ERROR(text::ParseNormalizer(component("normalizer"), "normalizer"));
  LFM_RETURN_IF_ERROR(
      text::ParsePreTokenizer(component("pre_tokenizer"), "pre_tokenizer", &d->pre_tokenizer));
  LFM_RETURN_IF_ERROR(text::ParsePostProcessor(component("post_processor"), "post_processor", d.get()));
  LFM_RETURN_IF_ERROR(text::ParseDecoder(component("decoder"), "decoder"));
  d->pre_tokenizer_json = component("pre_tokenizer");
  return d;
}

}  // namespace text

using text::TokenizerData;

Result<Tokenizer> Tokenizer::LoadJson(std::string_view json_text) {
  if (json_text.size() > text::kMaxFileBytes) {
    return OutOfRange(StrFormat("tokenizer.json of %zu bytes is larger than the %llu a tokenizer needs",
                                json_text.size(), static_cast<unsigned long long>(text::kMaxFileBytes)));
  }
  LFM_ASSIGN_OR_RETURN(const text::json root, ParseJson(json_text, "tokenizer.json", text::kJsonLimits));
  LFM_ASSIGN_OR_RETURN(std::shared_ptr<TokenizerData> data, text::BuildTokenizerData(root));
  return Tokenizer(std::move(data));
}

Result<Tokenizer> Tokenizer::LoadFile(const std::string& tokenizer_json_path) {
  LFM_ASSIGN_OR_RETURN(const std::string data, ReadFileToString(tokenizer_json_path, text::kMaxFileBytes));
  Result<Tokenizer> tokenizer = LoadJson(data);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(tokenizer_json_path);
  return tokenizer;
}

Result<std::vector<int32_t>> Tokenizer::EncodeImpl(std::string_view utf8_text,
                                                   bool add_special_tokens) const {
  const TokenizerData& d = *data_;
  if (const size_t bad = text::FindInvalidUtf8(utf8_text); bad != std::string_view::npos) {
    return InvalidArgument(StrFormat("text to encode is not valid UTF-8: byte %zu (0x%02X) of %zu", bad,
                                     static_cast<unsigned>(static_cast<uint8_t>(utf8_text[bad])),
                                     utf8_text.size()));
  }
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = d.template_prefix;
  std::vector<text::Segment> raw, normalized;
  std::vector<std::string> pieces;
  text::BpeScratch scratch;
  // One regex budget for the whole text, across its pieces and pre-tokenizer passes, so a hostile
  // super-linear pattern cannot multiply its cost by the number of pieces.
  text::MatchBudget budget = text::MatchBudget::ForText(utf8_text.size(), d.pre_tokenizer.size());
  text::SplitOnAddedTokens(utf8_text, d.raw_trie, d, &raw);
  for (const text::Segment& r : raw) {
    if (r.id >= 0) {
      ids.push_back(r.id);
      continue;
    }
    // The normalizer (null for supported files) would run here, before normalized added tokens are matched.
    const std::string_view run = utf8_text.substr(r.begin, r.end - r.begin);
    normalized.clear();
    text::SplitOnAddedTokens(run, d.normalized_trie, d, &normalized);
    for (const text::Segment& s : normalized) {
      if (s.id >= 0) {
        ids.push_back(s.id);
        continue;
      }
      LFM_RETURN_IF_ERROR(
          text::PreTokenize(d.pre_tokenizer, run.substr(s.begin, s.end - s.begin), &budget, &pieces));
      for (const std::string& p : pieces) d.model.Tokenize(p, &scratch, &ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), d.template_suffix.begin(), d.template_suffix.end());
  return ids;
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view utf8_text) const {
  return EncodeImpl(utf8_text, /*add_special_tokens=*/false);
}

Result<std::vector<int32_t>> Tokenizer::EncodeWithSpecialTokens(std::string_view utf8_text) const {
  return EncodeImpl(utf8_text, /*add_special_tokens=*/true);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (const int32_t id : ids) {
    const TokenizerData::IdEntry* e = data_->Entry(id);
    if (e != nullptr && !(skip_special_tokens && e->special)) bytes.append(data_->Bytes(*e));
  }
  std::string out;
  out.reserve(bytes.size());
  text::AppendUtf8Lossy(bytes, /*hold_incomplete_tail=*/false, &out);
  return out;
}

Tokenizer::StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : data_(tokenizer.data_), skip_special_tokens_(skip_special_tokens) {}

void Tokenizer::StreamDecoder::Push(int32_t id, std::string* out) {
  const TokenizerData::IdEntry* e = data_->Entry(id);
  if (e == nullptr || (skip_special_tokens_ && e->special)) return;
  pending_.append(data_->Bytes(*e));
  const size_t consumed = text::AppendUtf8Lossy(pending_, /*hold_incomplete_tail=*/true, out);
  pending_.erase(0, consumed);
}

std::string Tokenizer::StreamDecoder::Push(int32_t id) {
  std::string out;
  Push(id, &out);
  return out;
}

std::string Tokenizer::StreamDecoder::Finish() {
  std::string out;
  text::AppendUtf8Lossy(pending_, /*hold_incomplete_tail=*/false, &out);
  pending_.clear();
  return out;
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view token) const {
  if (const auto it = data_->added_ids.find(token); it != data_->added_ids.end()) return it->second;
  return data_->model.TokenToId(token);
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  const TokenizerData::IdEntry* e = data_->Entry(id);
  if (e == nullptr) return {};
  return std::string_view(data_->text_arena).substr(e->text_begin, e->text_len);
}

bool Tokenizer::IsSpecialToken(int32_t id) const {
  const TokenizerData::IdEntry* e = data_->Entry(id);
  return e != nullptr && e->special;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(data_->ids.size()); }

}  // namespace lfmvox
