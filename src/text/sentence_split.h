// Splits text into sentences for long-form TTS: each piece is spoken as its own turn.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lfmvox::text {

// `text` (UTF-8) cut after sentence ends: '.', '!', '?', ';' followed by white space or the end (closing
// quotes and brackets stay with their sentence), the CJK and full-width ends 。！？；, and line breaks. A
// '.' does not end a sentence after a known abbreviation (Mr., e.g., etc., ...), a single letter (an
// initial: "J. R. R."), inside a number (3.14, 1.000), or when the next word starts in lower case. A
// piece longer than `max_bytes` (> 0) is cut again at the last comma (, ， 、 : ：) within the limit,
// else at the last white space, else at the last character boundary. Pieces are trimmed of white space;
// those with nothing to speak (only punctuation and spaces) are dropped. Invalid UTF-8 is an error
// naming its byte offset.
Result<std::vector<std::string>> SplitSentences(std::string_view text, size_t max_bytes);

}  // namespace lfmvox::text
