#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "text/utf8.h"

namespace lfmvox::text {
namespace {

// The budget of one text, in PCRE2 match-limit steps: PCRE2's default per-call limit (10M) once, plus
// kBudgetPerByte per byte and pass. PCRE2 resets its limit at every start position of a call, so FindAll
// drives the start positions itself (anchored calls) and charges each call the limit it was given: a call
// first gets kFirstCallLimit, and one that hits its limit is retried with double (failed tries are charged
// too). So the charge is at most 4x the real work plus kFirstCallLimit per call, and at most two calls start
// per byte: 1024 per byte leaves 2x headroom for the LFM2 pattern's one backtrack per space over a long run
// of spaces (`\s*[\r\n]+`), while a nested lookahead over 1600 bytes stops after ~12M steps (well under a
// second) instead of ~n^4.
constexpr uint64_t kBaseBudget = 10'000'000;
constexpr uint64_t kBudgetPerByte = 1024;
constexpr uint32_t kFirstCallLimit = 256;
// Memory for the interpreter's backtracking frames (used when JIT is unavailable or its stack runs out).
constexpr uint32_t kHeapLimitKiB = 512 * 1024;

std::string Pcre2Error(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return StrFormat("PCRE2 error %d", code);
  return reinterpret_cast<const char*>(buf);
}

// Oniguruma's \s is Unicode White_Space; PCRE2's (with UCP) adds U+180E. Spelling the property out keeps the
// two engines in agreement; \p{...} is valid inside and outside character classes, so no parsing is needed
// beyond skipping other escapes and \Q...\E literal runs.
std::string RewriteWhitespaceClasses(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    const char e = pattern[i + 1];
    if (e == 's') {
      out += "\\p{White_Space}";
    } else if (e == 'S') {
      out += "\\P{White_Space}";
    } else if (e == 'Q') {
      const size_t end = pattern.find("\\E", i + 2);
      const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
      out.append(pattern.substr(i, stop - i));
      i = stop;
      continue;
    } else {
      out.push_back(c);
      out.push_back(e);
    }
    i += 2;
  }
  return out;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* p) const { pcre2_match_data_free(p); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* p) const { pcre2_match_context_free(p); }
};

// Runs one search from `start`; falls back from JIT to the interpreter when the JIT stack is too small.
int Search(const pcre2_code* code, std::string_view text, size_t start, uint32_t options,
           pcre2_match_data* md, pcre2_match_context* mc) {
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // Text is validated once by the caller, so PCRE2 need not re-check it on every call.
  options |= PCRE2_NO_UTF_CHECK;
  int rc = pcre2_match(code, subject, text.size(), start, options, md, mc);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc = pcre2_match(code, subject, text.size(), start, options | PCRE2_NO_JIT, md, mc);
  }
  return rc;
}

}  // namespace

MatchBudget MatchBudget::ForText(size_t bytes, size_t passes) {
  const uint64_t per = kBudgetPerByte * std::max<uint64_t>(passes, 1);
  const uint64_t b = static_cast<uint64_t>(bytes);
  const uint64_t total = b > (UINT64_MAX - kBaseBudget) / per ? UINT64_MAX : kBaseBudget + per * b;
  return MatchBudget{total, total, bytes};
}

Result<Regex> Regex::Compile(std::string_view pattern, bool literal) {
  const std::string source = literal ? std::string(pattern) : RewriteWhitespaceClasses(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2 refuses UCP together with LITERAL, and a literal needs no character classes anyway.
  // Anchored at compile time: FindAll and MatchesAt drive the start positions themselves (anchored at match
  // time instead would turn the JIT off).
  const uint32_t options = PCRE2_UTF | PCRE2_ANCHORED | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options,
                                   &error, &offset, nullptr);
  if (code == nullptr) {
    return InvalidArgument(StrFormat("regex /%s/ does not compile at offset %zu: %s", source.c_str(),
                                     static_cast<size_t>(offset), Pcre2Error(error).c_str()));
  }
  // JIT is an optimisation only: when it is unavailable pcre2_match interprets the pattern.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return Regex(std::shared_ptr<pcre2_code>(code, pcre2_code_free));
}

Status Regex::FindAll(std::string_view text, std::vector<Span>* matches, MatchBudget* budget) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> mc(pcre2_match_context_create(nullptr));
  if (!md || !mc) return Internal("out of memory creating PCRE2 match data");
  pcre2_set_heap_limit(mc.get(), kHeapLimitKiB);
  MatchBudget own;
  if (budget == nullptr) {
    own = MatchBudget::ForText(text.size());
    budget = &own;
  }
  auto exhausted = [&] {
    return OutOfRange(StrFormat(
        "the pre-tokenizer regex needs more than its budget of %llu match steps for a %zu-byte text (the "
        "pattern backtracks super-linearly, e.g. nested quantifiers in a lookahead); fix the Split "
        "pattern in tokenizer.json, or split the text into shorter pieces",
        static_cast<unsigned long long>(budget->total), budget->text_bytes));
  };

  size_t search_from = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (search_from <= text.size()) {
    // One anchored call at search_from (the leftmost match starts at the first position where one does),
    // its limit doubled until it completes or the budget runs out.
    uint32_t limit = kFirstCallLimit;
    int rc;
    for (;;) {
      if (budget->left == 0) return exhausted();
      const uint32_t give = static_cast<uint32_t>(std::min<uint64_t>(limit, budget->left));
      pcre2_set_match_limit(mc.get(), give);
      pcre2_set_depth_limit(mc.get(), give);
      budget->left -= give;
      // The JIT counts its limit in coarser units than the interpreter (a unit may cover much more work), so
      // only the first, small try runs JIT code; a call that needs more is retried interpreted, where a
      // step is one match() call and the budget bounds the time.
      rc = Search(code_.get(), text, search_from, limit == kFirstCallLimit ? 0 : PCRE2_NO_JIT, md.get(),
                  mc.get());
      if (rc != PCRE2_ERROR_MATCHLIMIT && rc != PCRE2_ERROR_DEPTHLIMIT) break;
      if (give < limit || limit > UINT32_MAX / 2) return exhausted();
      limit *= 2;
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
      // No match starts here: try the next character.
      if (search_from == text.size()) break;
      size_t len = 1;
      DecodeUtf8At(text, search_from, &len);
      search_from += len;
      continue;
    }
    if (rc < 0) {
      return OutOfRange(StrFormat("the pre-tokenizer regex gave up on a %zu-byte text: %s", text.size(),
                                  Pcre2Error(rc).c_str()));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t begin = ov[0], end = ov[1];
    if (begin == end && have_last && last_match_end == end) {
      // An empty match right after the previous match: step over one character and search again.
      size_t len = 1;
      if (search_from < text.size()) DecodeUtf8At(text, search_from, &len);
      search_from += len;
      continue;
    }
    matches->emplace_back(begin, end);
    search_from = end;
    have_last = true;
    last_match_end = end;
  }
  return Status::Ok();
}

bool Regex::MatchesAt(std::string_view text, size_t pos) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  if (!md) return false;
  return Search(code_.get(), text, pos, 0, md.get(), nullptr) >= 0;
}

}  // namespace lfmvox::text
