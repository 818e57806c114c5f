// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) for the regexes that a
// tokenizer.json holds. Hugging Face's tokenizers run those with Oniguruma; the syntax the files use
// (\p{L}, \p{N}, (?i:...), (?!...), classes, counted repeats) means the same in PCRE2, with one exception
// that Compile rewrites: under Unicode rules PCRE2's \s also matches U+180E, which Oniguruma's \s (=
// White_Space) does not, so \s and \S become \p{White_Space} and \P{White_Space}. Remaining known
// differences, none of which the LFM2 pattern uses: Ruby-syntax (?m) means "dot matches newline" in
// Oniguruma; \h is a hex digit there; \w and \d follow PCRE2's Unicode definitions; Unicode data is PCRE2's
// (14.0 in Debian 12).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

struct pcre2_real_code_8;  // pcre2.h stays out of this header: it needs PCRE2_CODE_UNIT_WIDTH set first

namespace lfmvox::text {

// [begin, end) byte offsets of one match.
using Span = std::pair<size_t, size_t>;

// The matching work one input text may cost, in PCRE2 match-limit steps, drawn down by every FindAll on that
// text's pieces (a per-call limit would let a hostile nested lookahead such as `a(?=.*.*.*!)` run ~n^4
// steps). ForText sizes it from the text: a fixed base plus a share per byte and per pre-tokenizer pass, far
// above what linear patterns need (see regex.cc).
struct MatchBudget {
  uint64_t total = 0;
  uint64_t left = 0;
  size_t text_bytes = 0;
  static MatchBudget ForText(size_t bytes, size_t passes = 1);
};

class Regex {
 public:
  // `literal`: the pattern is a plain string to find (a tokenizer.json `{"String": ...}` pattern).
  static Result<Regex> Compile(std::string_view pattern, bool literal);

  // Appends every match in `text` (valid UTF-8) to *matches, left to right and non-overlapping. Empty matches
  // are kept except one that ends where the previous match ended, and the search then moves on by one
  // character: the onig crate's find_iter, which tokenizers uses. The work is charged to *budget (null: a
  // budget of its own, MatchBudget::ForText(text.size())); fails (OutOfRange) only when a pathological
  // pattern exhausts it. The budget grows with the text, so linear work on long inputs (a megabyte of
  // spaces) always completes.
  Status FindAll(std::string_view text, std::vector<Span>* matches, MatchBudget* budget = nullptr) const;

  // Whether the pattern matches starting exactly at byte `pos` (a character boundary) of `text`.
  bool MatchesAt(std::string_view text, size_t pos) const;

 private:
  explicit Regex(std::shared_ptr<pcre2_real_code_8> code) : code_(std::move(code)) {}
  std::shared_ptr<pcre2_real_code_8> code_;  // immutable once compiled, so copies share it across threads
};

}  // namespace lfmvox::text
