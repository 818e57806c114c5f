// The BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE", ...}): a vocabulary and ranked
// merges, applied to one pre-token at a time exactly as tokenizers' Word::merge_all does.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace lfmvox::text {

// Pair of token ids -> (rank, merged id), open addressing: the merge loop does one lookup per candidate pair,
// and a flat table keeps that to one or two cache lines (63,683 merges in LFM2).
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  void Reserve(size_t n);
  // A later entry for the same pair replaces the earlier one, as a Rust HashMap collected from the list does.
  void Insert(int32_t left, int32_t right, Merge merge);
  // Calls fn(left, right, merge) for every entry, in no particular order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] != kEmpty) {
        fn(static_cast<int32_t>(keys_[i] >> 32), static_cast<int32_t>(keys_[i] & 0xFFFFFFFFu), values_[i]);
      }
    }
  }
  const Merge* Find(int32_t left, int32_t right) const {
    if (keys_.empty()) return nullptr;
    const uint64_t key = Key(left, right);
    for (size_t i = Slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative, so no real key has all bits set
  static uint64_t Key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  size_t Slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void Grow();

  std::vector<uint64_t> keys_;  // [capacity], kEmpty where free
  std::vector<Merge> values_;   // [capacity]
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Per-call working memory for BpeModel::Tokenize, so that encoding a long text reuses its buffers.
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    bool live;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
  };
  std::vector<Symbol> symbols;  // [chars of the word]
  std::vector<Candidate> heap;  // min-heap on (rank, pos)
};

class BpeModel {
 public:
  // Reads the "model" object; `type` was already checked to be BPE (or absent).
  static Result<BpeModel> FromJson(const nlohmann::json& model);

  // Appends the ids of one pre-token (for byte-level tokenizers, its text after the byte-to-symbol mapping).
  void Tokenize(std::string_view word, BpeScratch* scratch, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const {
    const auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  const TokenMap& vocab() const { return vocab_; }

  // The merges as (left id, right id), lowest rank first. A pair the file lists twice appears once, at its
  // later rank, which is the one encoding uses.
  std::vector<std::pair<int32_t, int32_t>> MergesByRank() const;

  // The options a GGUF "gpt2" vocabulary cannot carry, and has at their defaults: no unk_token, no subword
  // prefix or suffix, no byte_fallback, ignore_merges false.
  bool HasOnlyDefaultOptions() const {
    return !unk_id_ && continuing_subword_prefix_.empty() && end_of_word_suffix_.empty() && !byte_fallback_ &&
           !ignore_merges_;
  }

 private:
  void AddInitialSymbols(std::string_view word, BpeScratch* scratch) const;
  void MergeAll(BpeScratch* scratch) const;
  std::optional<int32_t> CharId(std::string_view ch, bool first, bool last) const;

  TokenMap vocab_;
  MergeTable merges_;
  // Ids of single code points below kSmallChars with no prefix/suffix involved, -1 when absent: the common
  // case (every byte-level symbol is below U+0144) skips the string hash.
  static constexpr char32_t kSmallChars = 0x200;
  std::vector<int32_t> small_char_ids_;  // [kSmallChars]
  std::optional<int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
};

}  // namespace lfmvox::text
