// Parsing JSON text from untrusted sources (config.json, tokenizer.json, a
// safetensors header, a prompt) within limits checked in one streaming pass
// before any document is built: nesting depth, so the document and every walk
// over it stay shallow, and the number of values, so the document's memory
// (~100 bytes a value) stays proportional to what the format legitimately
// holds. Never throws: a malformed text is DataLoss with nlohmann's message
// (byte offset included), a text over a limit OutOfRange saying which, and an
// allocation failure OutOfRange too.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lfmvox {

struct JsonLimits {
  size_t max_depth = 64;                // arrays/objects open at once
  size_t max_values = size_t{1} << 22;  // scalars, arrays and objects, keys not counted
};

// `what` names the text in errors ("config.json at DIR", "the prompt").
Result<nlohmann::json> ParseJson(std::string_view text, const std::string& what,
                                 const JsonLimits& limits = {});

}  // namespace lfmvox
