// Small wire-format helpers of the server: base64, and the bounded multipart/form-data parser.
// Nothing here knows about models or sockets. Thread-safe (no shared state).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lfmvox/status.h"

namespace lfmvox::server {

std::string Base64Encode(std::string_view bytes);
// Standard alphabet, '=' padding optional; whitespace is refused. At most max_bytes decoded bytes.
Result<std::string> Base64Decode(std::string_view text, size_t max_bytes);

struct FormPart {
  std::string name;          // Content-Disposition name
  std::string filename;      // Content-Disposition filename (empty when not a file)
  std::string content_type;  // the part's Content-Type, if any
  std::string_view body;     // a view into the request body
};

struct MultipartLimits {
  size_t max_parts = 64;
  size_t max_part_header_bytes = 4096;
};

// The boundary of a `multipart/form-data; boundary=...` Content-Type value.
Result<std::string> MultipartBoundary(std::string_view content_type);

// Splits a multipart/form-data body (RFC 7578) into its parts. Every malformed input (no closing
// boundary, a part without headers' end, too many parts, a header too long, no name) is an
// InvalidArgument naming what is wrong. The parts view `body`, which must outlive them.
Result<std::vector<FormPart>> ParseMultipart(std::string_view body, std::string_view boundary,
                                             const MultipartLimits& limits = {});

// Constant-time equality for secrets (the time depends only on the lengths).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The rest of the first token in a comma-separated header value (Sec-WebSocket-Protocol) that starts
// with `prefix`, spaces around tokens ignored; nullopt when no token does.
std::optional<std::string_view> HeaderToken(std::string_view list, std::string_view prefix);

}  // namespace lfmvox::server
