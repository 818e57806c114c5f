// Word timestamps from a model's attention onto the speech it transcribes (GenerateOptions::
// word_timestamps), family-agnostic: a family records, for each generated token, its attention onto the
// audio clip's positions (the row of the position that predicted it); this aligns the tokens to the clip's
// frames (dsp/dtw.h, Whisper's method) and groups them into words.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "lfmvox/lfmvox.h"

namespace lfmvox {

struct AlignedToken {
  std::string piece;     // the text the token completes (empty while a character is incomplete)
  bool special = false;  // a control token: aligned, never part of a word
};

// rows [T, F]: token t's attention onto the clip's F frames (consumed: made into DTW costs). A word
// starts at a piece that begins with white space (or the first text piece) and takes the pieces after it
// up to the next such piece or a white-space-only one (control tokens are aligned but left out of the
// words, as a transcript leaves them out); its start is its first token's
// frame, its end the next token's (the clip's end after the last token), in seconds at frame_seconds a
// frame, clamped to [0, clip_seconds].
Result<std::vector<WordTiming>> WordsFromAttention(std::vector<float> rows, size_t F,
                                                   std::span<const AlignedToken> tokens, double frame_seconds,
                                                   double clip_seconds);

}  // namespace lfmvox
