#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "text/utf8.h"

namespace lfmvox::text {
namespace {

// Backtracking budget: PCRE2's default (10M) plus a few steps per subject byte, because the LFM2 pattern's
// `\s*[\r\n]+` alternative legitimately backtracks once per character over a long run of spaces.
constexpr uint64_t kBaseMatchLimit = 10'000'000;
constexpr uint64_t kMatchStepsPerByte = 8;
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

Result<Regex> Regex::Compile(std::string_view pattern, bool literal) {
  const std::string source = literal ? std::string(pattern) : RewriteWhitespaceClasses(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2 refuses UCP together with LITERAL, and a literal needs no character classes anyway.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
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

Status Regex::FindAll(std::string_view text, std::vector<Span>* matches) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> mc(pcre2_match_context_create(nullptr));
  if (!md || !mc) return Internal("out of memory creating PCRE2 match data");
  const uint64_t limit = kBaseMatchLimit + kMatchStepsPerByte * static_cast<uint64_t>(text.size());
  pcre2_set_match_limit(mc.get(), static_cast<uint32_t>(std::min<uint64_t>(limit, UINT32_MAX)));
  pcre2_set_heap_limit(mc.get(), kHeapLimitKiB);

  size_t search_from = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (search_from <= text.size()) {
    const int rc = Search(code_.get(), text, search_from, 0, md.get(), mc.get());
    if (rc == PCRE2_ERROR_NOMATCH) break;
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
  return Search(code_.get(), text, pos, PCRE2_ANCHORED, md.get(), nullptr) >= 0;
}

}  // namespace lfmvox::text
