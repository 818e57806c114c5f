#pragma once
// The web page `lfmvox serve` answers at `/` (apps/server/web), embedded in the binary at build time by
// embed_web.cmake: a request's path is only ever compared with this table, never opened as a file.

#include <string_view>

namespace lfmvox::server {

struct WebFile {
  std::string_view path;          // "/index.html", "/app.js", ...
  std::string_view content_type;  // from the file's extension
  std::string_view body;
};

// The embedded file for an HTTP path ("/" is "/index.html"), or nullptr.
const WebFile* WebAsset(std::string_view path);

// The headers every page reply carries: a Content-Security-Policy that allows only this origin's own
// scripts, styles, worklets and WebSocket, no inline code, no framing.
inline constexpr std::string_view kWebCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "media-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace lfmvox::server
