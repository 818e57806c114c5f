// The server's parsing of request bodies from clients (untrusted bytes): JSON bodies within a nesting
// depth and value count, never-throwing field access, the speech request's fields and the
// transcription form. Nothing here knows about models or sockets (fuzz/fuzz_server.cc drives it).
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec_util.h"

namespace lfmvox::server {

// A client error: the HTTP status and the OpenAI error object's fields.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // "" -> null
  std::string code;   // "" -> null
  std::string type = "invalid_request_error";
};

ApiError BadRequest(std::string message, std::string param = "", std::string code = "");

// Request JSON: at most this deep and this many values (checked by a scan before parsing) (a chat's 256
// messages of a few parts each need far fewer), so a hostile body costs memory proportional to its size and
// no deep recursion.
inline constexpr int kMaxJsonDepth = 32;
inline constexpr size_t kMaxJsonValues = size_t{1} << 16;

// `body` as a JSON object (a 400 otherwise).
std::optional<ApiError> ParseObject(std::string_view body, nlohmann::json* out);

// obj[key], or nullptr when absent or null.
const nlohmann::json* Field(const nlohmann::json& obj, const char* key);
std::optional<ApiError> GetString(const nlohmann::json& obj, const char* key, std::string* out,
                                  bool required);
std::optional<ApiError> GetNumber(const nlohmann::json& obj, const char* key, double lo, double hi,
                                  std::optional<double>* out);
std::optional<ApiError> GetSeed(const nlohmann::json& obj, uint64_t* seed);
std::optional<ApiError> GetBool(const nlohmann::json& obj, const char* key, bool* out);

// POST /v1/audio/speech's fields, checked for type and range (the voice and format against the model
// are the server's).
struct SpeechRequest {
  std::string model, input, voice, response_format = "mp3", stream_format = "audio";
  std::optional<double> speed, temperature;
  uint64_t seed = 0;
};
std::optional<ApiError> ParseSpeechRequest(std::string_view body, size_t max_text_chars, SpeechRequest* out);

// POST /v1/audio/transcriptions' multipart form.
struct TranscriptionForm {
  std::vector<FormPart> parts;  // views into the body
  size_t file = 0;              // parts[file] is the audio
  std::string response_format = "json", language;
  bool stream = false;
  bool words = false;     // timestamp_granularities[] holds "word" (verbose_json only)
  float temperature = 0;  // text sampling; 0 greedy (the ASR preset)
};
std::optional<ApiError> ParseTranscriptionForm(std::string_view content_type, std::string_view body,
                                               TranscriptionForm* out);

size_t Utf8Chars(std::string_view s);
// semantic_vad's test of a transcript: its last character, past white space and closing quotes or
// brackets, ends a sentence (. ? ! … or the full-width 。？！).
bool EndsLikeASentence(std::string_view t);

}  // namespace lfmvox::server
