// Internal to src/text: the tables a loaded Tokenizer holds, shared by the tokenizer.json reader
// (tokenizer.cc) and the GGUF vocabulary reader and writer (tokenizer_vocab.cc).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json_parse.h"
#include "base/status.h"
#include "text/bpe.h"
#include "text/regex.h"

namespace lfmvox::text {

// Ids index a dense table; real vocabularies stay below 2^18, and the cap keeps a corrupt id from asking for
// gigabytes.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 21) - 1;
// The largest tokenizer.json read, and the most token and merge text a GGUF vocabulary may hold: the id
// table's 32-bit arena offsets rely on it. Real files are far smaller (LFM2's 4.7 MB; 262k-token
// vocabularies with their merges ~35 MB).
inline constexpr uint64_t kMaxFileBytes = uint64_t{64} << 20;
// A tokenizer.json nests a handful of levels (normalizer/pre_tokenizer sequences); its values are
// about three per vocabulary entry and merge.
inline constexpr JsonLimits kJsonLimits = {.max_depth = 32, .max_values = size_t{1} << 23};

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;  // tokenizers' defaults for fields a file leaves out
  bool special = false;
};

// Finds added tokens in text with aho-corasick's MatchKind::LeftmostLongest semantics, which is what
// tokenizers builds: the leftmost start wins, then the longest token starting there.
class AddedTokenTrie {
 public:
  AddedTokenTrie() { root_.fill(-1); }
  void Add(std::string_view content, int32_t token_index) {
    int32_t node = -1;
    for (const char ch : content) {
      const uint8_t b = static_cast<uint8_t>(ch);
      int32_t next = node < 0 ? root_[b] : Child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        if (node < 0) {
          root_[b] = next;
        } else {
          nodes_[node].children.emplace_back(b, next);
        }
      }
      node = next;
    }
    if (node >= 0) nodes_[node].token = token_index;
  }
  bool empty() const { return nodes_.empty(); }

  // Index of the longest token starting at text[pos] (its end in *end), or -1.
  int32_t LongestAt(std::string_view text, size_t pos, size_t* end) const {
    int32_t found = -1;
    int32_t node = root_[static_cast<uint8_t>(text[pos])];
    for (size_t i = pos + 1; node >= 0; ++i) {
      if (nodes_[node].token >= 0) {
        found = nodes_[node].token;
        *end = i;
      }
      if (i == text.size()) break;
      node = Child(node, static_cast<uint8_t>(text[i]));
    }
    return found;
  }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // few per node below the first byte
    int32_t token = -1;
  };
  int32_t Child(int32_t node, uint8_t b) const {
    for (const auto& [byte, index] : nodes_[node].children) {
      if (byte == b) return index;
    }
    return -1;
  }
  std::array<int32_t, 256> root_;  // first byte -> node
  std::vector<Node> nodes_;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  std::optional<Regex> regex;  // kSplit: the pattern; kByteLevel: GPT-2's, when use_regex
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // kByteLevel
};

struct TokenizerData {
  struct IdEntry {
    // 32-bit offsets suffice: both arenas are smaller than the file, or the GGUF vocabulary's text, which
    // are at most kMaxFileBytes.
    uint32_t text_begin = 0, text_len = 0;    // in text_arena: the token as the file spells it
    uint32_t bytes_begin = 0, bytes_len = 0;  // in bytes_arena: what the decoder turns it into
    bool defined = false;
    bool special = false;  // skipped by skip_special_tokens
  };
  std::vector<IdEntry> ids;  // [max id + 1]
  std::string text_arena;
  std::string bytes_arena;

  std::vector<AddedToken> added;   // file order
  TokenMap added_ids;              // content -> id
  AddedTokenTrie raw_trie;         // normalized:false tokens, matched on the raw text
  AddedTokenTrie normalized_trie;  // normalized:true tokens, matched after the (null) normalizer
  std::optional<Regex> word_char;  // only when some added token is single_word

  std::vector<PreTokenizerStep> pre_tokenizer;
  nlohmann::json pre_tokenizer_json;  // as the file gives it, for naming it in a GGUF vocabulary
  BpeModel model;
  std::vector<int32_t> template_prefix;  // single-sequence template: ids before and after $A
  std::vector<int32_t> template_suffix;

  const IdEntry* Entry(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= ids.size() || !ids[id].defined) return nullptr;
    return &ids[id];
  }
  std::string_view Bytes(const IdEntry& e) const { return {bytes_arena.data() + e.bytes_begin, e.bytes_len}; }
};

// Validates a parsed tokenizer.json object and builds its tables (Tokenizer::LoadJson after the parse).
Result<std::shared_ptr<TokenizerData>> BuildTokenizerData(const nlohmann::json& root);

}  // namespace lfmvox::text
