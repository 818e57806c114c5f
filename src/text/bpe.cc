#include "text/bpe.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <nlohmann/json.hpp>

#include "text/json_fields.h"
#include "text/utf8.h"

namespace lfmvox::text {

using json = nlohmann::json;

void MergeTable::Reserve(size_t n) {
  while ((keys_.size() >> 1) < n + 1) Grow();
}

void MergeTable::Grow() {
  const size_t capacity = keys_.empty() ? 16 : keys_.size() * 2;
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<Merge> old_values = std::move(values_);
  keys_.assign(capacity, kEmpty);
  values_.assign(capacity, Merge{0, 0});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (size_t i = 0; i < old_keys.size(); ++i) {
    if (old_keys[i] == kEmpty) continue;
    size_t s = Slot(old_keys[i]);
    while (keys_[s] != kEmpty) s = (s + 1) & mask_;
    keys_[s] = old_keys[i];
    values_[s] = old_values[i];
  }
}

void MergeTable::Insert(int32_t left, int32_t right, Merge merge) {
  if ((size_ + 1) * 2 > keys_.size()) Grow();  // load factor <= 1/2 keeps probe runs short
  const uint64_t key = Key(left, right);
  size_t s = Slot(key);
  while (keys_[s] != kEmpty && keys_[s] != key) s = (s + 1) & mask_;
  if (keys_[s] == kEmpty) ++size_;
  keys_[s] = key;
  values_[s] = merge;
}

namespace {

// One merge as stored in tokenizer.json: ["a", "b"] (current format) or "a b" (older files).
Status ParseMergePair(const json& m, size_t index, std::string_view* left, std::string_view* right) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    *left = m[0].get_ref<const std::string&>();
    *right = m[1].get_ref<const std::string&>();
    return Status::Ok();
  }
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos) {
      *left = std::string_view(s).substr(0, space);
      *right = std::string_view(s).substr(space + 1);
      return Status::Ok();
    }
  }
  // The entry's type, not its text: dumping a deeply nested value would recurse once per level.
  const std::string what = m.is_array()    ? StrFormat("an array with %zu entries", m.size())
                           : m.is_string() ? "a string without exactly one space"
                                           : std::string("a JSON ") + m.type_name();
  return DataLoss(StrFormat("model.merges[%zu] is %s; expected a pair [\"a\", \"b\"] or a string \"a b\"",
                            index, what.c_str()));
}

}  // namespace

Result<BpeModel> BpeModel::FromJson(const json& model) {
  BpeModel bpe;
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) return DataLoss("model.vocab is missing or not an object");
  bpe.vocab_.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return DataLoss("model.vocab[\"" + token + "\"] is not an id (an integer in [0, 2^31))");
    }
    bpe.vocab_.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
  }

  LFM_RETURN_IF_ERROR(
      OptionalString(model, "model", "continuing_subword_prefix", &bpe.continuing_subword_prefix_));
  LFM_RETURN_IF_ERROR(OptionalString(model, "model", "end_of_word_suffix", &bpe.end_of_word_suffix_));
  LFM_RETURN_IF_ERROR(OptionalBool(model, "model", "fuse_unk", &bpe.fuse_unk_));
  LFM_RETURN_IF_ERROR(OptionalBool(model, "model", "byte_fallback", &bpe.byte_fallback_));
  LFM_RETURN_IF_ERROR(OptionalBool(model, "model", "ignore_merges", &bpe.ignore_merges_));
  std::string unk;
  bool has_unk = false;
  LFM_RETURN_IF_ERROR(OptionalString(model, "model", "unk_token", &unk, &has_unk));
  if (has_unk) {
    const std::optional<int32_t> id = bpe.TokenToId(unk);
    if (!id) return DataLoss("model.unk_token \"" + unk + "\" is not in model.vocab");
    bpe.unk_id_ = id;
  }
  const auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null()) {
    if (!dropout->is_number()) return DataLoss("model.dropout must be a number or null");
    if (dropout->get<double>() != 0.0) {
      return Unimplemented(
          StrFormat("model.dropout is %g; BPE dropout makes encoding random, and lfmvox only "
                    "encodes deterministically (set it to null)",
                    dropout->get<double>()));
    }
  }

  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) {
    return DataLoss("model.merges is missing or not an array");
  }
  if (merges->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return OutOfRange("model.merges has more than 2^31 entries");
  }
  bpe.merges_.Reserve(merges->size());
  const size_t prefix_len = bpe.continuing_subword_prefix_.size();
  std::string merged;
  for (size_t i = 0; i < merges->size(); ++i) {
    std::string_view left, right;
    LFM_RETURN_IF_ERROR(ParseMergePair((*merges)[i], i, &left, &right));
    const std::optional<int32_t> left_id = bpe.TokenToId(left), right_id = bpe.TokenToId(right);
    if (!left_id || !right_id) {
      const std::string_view missing = left_id ? right : left;
      return DataLoss(StrFormat("model.merges[%zu] uses \"%.*s\", which is not in model.vocab", i,
                                static_cast<int>(missing.size()), missing.data()));
    }
    // The right part carries the continuing-subword prefix, which the merged token has only once.
    if (!right.starts_with(bpe.continuing_subword_prefix_)) {
      return DataLoss(StrFormat("model.merges[%zu]: \"%.*s\" lacks the continuing_subword_prefix \"%s\"", i,
                                static_cast<int>(right.size()), right.data(),
                                bpe.continuing_subword_prefix_.c_str()));
    }
    merged.assign(left);
    merged.append(right.substr(prefix_len));
    const std::optional<int32_t> new_id = bpe.TokenToId(merged);
    if (!new_id) {
      return DataLoss(
          StrFormat("model.merges[%zu] (\"%.*s\" + \"%.*s\") makes \"%s\", which is not in "
                    "model.vocab",
                    i, static_cast<int>(left.size()), left.data(), static_cast<int>(right.size()),
                    right.data(), merged.c_str()));
    }
    bpe.merges_.Insert(*left_id, *right_id, {static_cast<int32_t>(i), *new_id});
  }

  bpe.small_char_ids_.assign(kSmallChars, -1);
  for (char32_t cp = 0; cp < kSmallChars; ++cp) {
    std::string ch;
    AppendUtf8(cp, &ch);
    if (const auto id = bpe.TokenToId(ch)) bpe.small_char_ids_[cp] = *id;
  }
  return bpe;
}

std::vector<std::pair<int32_t, int32_t>> BpeModel::MergesByRank() const {
  std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>> ranked;  // (rank, (left, right))
  merges_.ForEach([&ranked](int32_t left, int32_t right, const MergeTable::Merge& m) {
    ranked.push_back({m.rank, {left, right}});
  });
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(ranked.size());
  for (const auto& r : ranked) out.push_back(r.second);
  return out;
}

std::optional<int32_t> BpeModel::CharId(std::string_view ch, bool first, bool last) const {
  const bool decorated =
      (!first && !continuing_subword_prefix_.empty()) || (last && !end_of_word_suffix_.empty());
  if (!decorated) {
    size_t len = 0;
    const char32_t cp = DecodeUtf8At(ch, 0, &len);
    if (cp < kSmallChars) {
      const int32_t id = small_char_ids_[cp];
      return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
    }
    return TokenToId(ch);
  }
  std::string s = first ? std::string() : continuing_subword_prefix_;
  s.append(ch);
  if (last) s.append(end_of_word_suffix_);
  return TokenToId(s);
}

// tokenizers' BPE::merge_word: one symbol per character; a character missing from the vocabulary becomes
// its <0xXX> byte tokens (byte_fallback), else the unknown token (consecutive ones fused with fuse_unk), else
// it is dropped, as tokenizers does when unk_token is null.
void BpeModel::AddInitialSymbols(std::string_view word, BpeScratch* scratch) const {
  auto& symbols = scratch->symbols;
  symbols.clear();
  auto push = [&symbols](int32_t id) {
    const int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1, true});
    if (n > 0) symbols[n - 1].next = n;
  };
  bool pending_unk = false;
  size_t i = 0;
  while (i < word.size()) {
    size_t len = 0;
    DecodeUtf8At(word, i, &len);
    const std::string_view ch = word.substr(i, len);
    const bool first = i == 0, last = i + len == word.size();
    i += len;
    if (const std::optional<int32_t> id = CharId(ch, first, last)) {
      if (pending_unk) push(*unk_id_);
      pending_unk = false;
      push(*id);
      continue;
    }
    if (byte_fallback_) {
      std::string decorated = first ? std::string() : continuing_subword_prefix_;
      decorated.append(ch);
      if (last) decorated.append(end_of_word_suffix_);
      std::vector<int32_t> byte_ids;
      for (const char b : decorated) {
        const auto id = TokenToId(StrFormat("<0x%02X>", static_cast<unsigned>(static_cast<uint8_t>(b))));
        if (!id) break;
        byte_ids.push_back(*id);
      }
      if (byte_ids.size() == decorated.size()) {
        for (const int32_t id : byte_ids) push(id);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk && !fuse_unk_) push(*unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) push(*unk_id_);
}

// tokenizers' Word::merge_all: always apply the lowest-ranked merge present (leftmost among equals), using a
// heap of candidate pairs whose stale entries are skipped when popped.
void BpeModel::MergeAll(BpeScratch* scratch) const {
  auto& symbols = scratch->symbols;
  auto& heap = scratch->heap;
  const auto lower_priority = [](const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  // Appends the candidate for the pair that starts at `pos`, if that pair has a merge.
  const auto add_candidate = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return false;
    const MergeTable::Merge* m = merges_.Find(symbols[pos].id, symbols[next].id);
    if (m != nullptr) heap.push_back({m->rank, pos, m->new_id});
    return m != nullptr;
  };
  const auto push_pair = [&](int32_t pos) {
    if (add_candidate(pos)) std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  heap.clear();
  for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(symbols.size()); ++pos) add_candidate(pos);
  std::make_heap(heap.begin(), heap.end(), lower_priority);  // linear, where pushing one by one is n log n
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& left = symbols[top.pos];
    if (!left.live || left.next < 0) continue;
    const int32_t right_pos = left.next;
    const MergeTable::Merge* m = merges_.Find(left.id, symbols[right_pos].id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // the pair changed since this entry was pushed
    left.id = top.new_id;
    left.next = symbols[right_pos].next;
    symbols[right_pos].live = false;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
}

void BpeModel::Tokenize(std::string_view word, BpeScratch* scratch, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto id = TokenToId(word)) {
      ids->push_back(*id);
      return;
    }
  }
  AddInitialSymbols(word, scratch);
  if (scratch->symbols.size() > 1) MergeAll(scratch);
  for (const BpeScratch::Symbol& s : scratch->symbols) {
    if (s.live) ids->push_back(s.id);
  }
}

}  // namespace lfmvox::text
