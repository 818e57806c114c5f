#include "api/word_timing.h"

#include <algorithm>

#include "dsp/dtw.h"

namespace lfmvox {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace

Result<std::vector<WordTiming>> WordsFromAttention(std::vector<float> rows, size_t F,
                                                   std::span<const AlignedToken> tokens, double frame_seconds,
                                                   double clip_seconds) {
  std::vector<WordTiming> words;
  const size_t T = tokens.size();
  if (T == 0) return words;
  if (F == 0 || rows.size() != T * F) {
    return Internal(
        StrFormat("word timing: %zu attention values for %zu tokens × %zu frames", rows.size(), T, F));
  }
  LFM_RETURN_IF_ERROR(AttentionToCost(rows, T, F));
  LFM_ASSIGN_OR_RETURN(std::vector<size_t> starts, DtwRowStarts(rows, T, F));
  auto at = [&](size_t t) {
    return t < T ? std::clamp(static_cast<double>(starts[t]) * frame_seconds, 0.0, clip_seconds)
                 : clip_seconds;
  };
  bool open = false;  // the last word may take more pieces
  for (size_t t = 0; t < T; ++t) {
    const AlignedToken& tok = tokens[t];
    const std::string& p = tok.piece;
    const size_t lead = static_cast<size_t>(std::find_if_not(p.begin(), p.end(), IsSpace) - p.begin());
    if (tok.special) continue;             // left out, as the transcript leaves it out
    if (lead == p.size() && !p.empty()) {  // white space only: ends the word
      open = false;
      continue;
    }
    if (!open || lead > 0) {
      words.push_back({std::string(), at(t), at(t)});
      open = true;
    }
    words.back().text.append(p, lead, std::string::npos);
    words.back().end = at(t + 1);
    // A piece that ends in white space closes its word.
    if (!p.empty() && IsSpace(p.back())) {
      while (!words.back().text.empty() && IsSpace(words.back().text.back())) words.back().text.pop_back();
      open = false;
    }
  }
  // (Starts never go back along the DTW path, so each word's end, the next token's start, is ≥ its start.)
  std::erase_if(words, [](const WordTiming& w) { return w.text.empty(); });
  return words;
}

}  // namespace lfmvox
