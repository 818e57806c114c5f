#include "request_parse.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace lfmvox::server {

using json = nlohmann::json;

ApiError BadRequest(std::string message, std::string param, std::string code) {
  return {400, std::move(message), std::move(param), std::move(code)};
}

size_t Utf8Chars(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Whether a transcript reads as a finished sentence: its last character, past white space and closing
// quotes or brackets, ends one (. ? ! … and the full-width 。？！).
bool EndsLikeASentence(std::string_view t) {
  while (!t.empty() && (std::isspace(static_cast<unsigned char>(t.back())) || t.back() == '"' ||
                        t.back() == '\'' || t.back() == ')' || t.back() == ']')) {
    t.remove_suffix(1);
  }
  if (t.empty()) return false;
  if (t.back() == '.' || t.back() == '?' || t.back() == '!') return true;
  for (std::string_view end : {"\u2026", "\u3002", "\uff1f", "\uff01"}) {
    if (t.size() >= end.size() && t.substr(t.size() - end.size()) == end) return true;
  }
  return false;
}

namespace {

// One scan of the brackets and commas outside strings: the nesting depth (stopping at the first level
// past kMaxJsonDepth) and a bound on the values (each one after a container's first follows a comma).
// nlohmann then parses only what is within both limits: a deep or huge body costs no parse (and
// nlohmann's callback parser, the other way to bound it, erases discarded members in quadratic time).
std::optional<ApiError> CheckLimits(std::string_view s) {
  int depth = 0;
  size_t values = 1;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return BadRequest("the request body nests JSON deeper than " + std::to_string(kMaxJsonDepth) +
                          " levels");
      }
      ++values;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && ++values > kMaxJsonValues) {
      return BadRequest("the request body has more than " + std::to_string(kMaxJsonValues) + " JSON values");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseObject(std::string_view body, json* out) {
  *out = json();
  if (auto e = CheckLimits(body)) return e;
  try {
    *out = json::parse(body.begin(), body.end(), nullptr, false);
  } catch (const std::exception&) {  // std::bad_alloc
    *out = json(json::value_t::discarded);
  }
  if (out->is_discarded()) return BadRequest("the request body is not valid JSON");
  if (!out->is_object()) return BadRequest("the request body must be a JSON object");
  return std::nullopt;
}

const json* Field(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> GetString(const json& obj, const char* key, std::string* out, bool required) {
  const json* v = Field(obj, key);
  if (v == nullptr) {
    if (required)
      return BadRequest(std::string("'") + key + "' is required", key, "missing_required_parameter");
    return std::nullopt;
  }
  if (!v->is_string()) return BadRequest(std::string("'") + key + "' must be a string", key);
  *out = v->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> GetNumber(const json& obj, const char* key, double lo, double hi,
                                  std::optional<double>* out) {
  const json* v = Field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return BadRequest(std::string("'") + key + "' must be a number", key);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    return BadRequest(
        std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
        key);
  }
  *out = d;
  return std::nullopt;
}

std::optional<ApiError> GetSeed(const json& obj, uint64_t* seed) {
  const json* v = Field(obj, "seed");
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer() ||
      (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0)) {
    return BadRequest("'seed' must be a non-negative integer", "seed");
  }
  *seed = v->get<uint64_t>();
  return std::nullopt;
}

std::optional<ApiError> GetBool(const json& obj, const char* key, bool* out) {
  const json* v = Field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return BadRequest(std::string("'") + key + "' must be true or false", key);
  *out = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ParseSpeechRequest(std::string_view text, size_t max_text_chars, SpeechRequest* out) {
  json body;
  if (auto e = ParseObject(text, &body)) return e;
  SpeechRequest& r = *out;
  std::optional<ApiError> e;
  if (!e) e = GetString(body, "model", &r.model, false);
  if (!e) e = GetString(body, "input", &r.input, true);
  if (!e) e = GetString(body, "response_format", &r.response_format, false);
  if (!e) e = GetString(body, "stream_format", &r.stream_format, false);
  if (!e) e = GetNumber(body, "speed", 0.25, 4.0, &r.speed);
  if (!e) e = GetNumber(body, "temperature", 0, 2, &r.temperature);
  if (!e) e = GetSeed(body, &r.seed);
  if (!e) {
    const json* v = Field(body, "voice");
    if (v != nullptr && v->is_object()) {
      e = GetString(*v, "id", &r.voice, true);
    } else if (v != nullptr) {
      e = GetString(body, "voice", &r.voice, false);
    }
  }
  if (e) return e;
  if (r.input.empty()) return BadRequest("'input' is empty", "input");
  if (Utf8Chars(r.input) > max_text_chars) {
    return BadRequest("'input' is over " + std::to_string(max_text_chars) + " characters", "input",
                      "string_above_max_length");
  }
  if (r.stream_format != "audio" && r.stream_format != "sse") {
    return BadRequest("'stream_format' must be audio or sse", "stream_format");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseTranscriptionForm(std::string_view content_type, std::string_view body,
                                               TranscriptionForm* out) {
  auto boundary = MultipartBoundary(content_type);
  if (!boundary.ok()) return BadRequest(boundary.status().message());
  auto parts = ParseMultipart(body, *boundary);
  if (!parts.ok()) return BadRequest(parts.status().message());
  TranscriptionForm& f = *out;
  f.parts = std::move(parts).value();
  bool have_file = false, want_words = false;
  std::string stream = "false";
  for (size_t i = 0; i < f.parts.size(); ++i) {
    const FormPart& p = f.parts[i];
    if (p.name == "file") {
      f.file = i;
      have_file = true;
    } else if (p.name == "response_format") {
      f.response_format = std::string(p.body);
    } else if (p.name == "stream") {
      stream = std::string(p.body);
    } else if (p.name == "language") {
      f.language = std::string(p.body.substr(0, 16));
    } else if (p.name == "temperature") {
      // OpenAI's range; 0 (the default) is greedy, as the model's ASR preset.
      const std::string t(p.body.substr(0, 32));
      char* end = nullptr;
      const double v = std::strtod(t.c_str(), &end);
      if (t.empty() || end != t.c_str() + t.size() || !(v >= 0 && v <= 1)) {
        return BadRequest("'temperature' must be a number in [0, 1]", "temperature");
      }
      f.temperature = static_cast<float>(v);
    } else if (p.name == "timestamp_granularities[]" || p.name == "timestamp_granularities") {
      if (p.body == "word")
        want_words = true;
      else if (p.body != "segment")
        return BadRequest("timestamp_granularities[] takes segment or word", "timestamp_granularities[]");
    }
    // model, prompt, include[], chunking_strategy: accepted; one chunk.
  }
  if (!have_file) {
    return BadRequest("the form needs a 'file' part with the audio", "file", "missing_required_parameter");
  }
  const std::string& rf = f.response_format;
  if (rf != "json" && rf != "text" && rf != "srt" && rf != "vtt" && rf != "verbose_json") {
    return BadRequest("'response_format' must be json, text, srt, vtt or verbose_json", "response_format");
  }
  if (want_words && rf != "verbose_json") {
    return BadRequest("timestamp_granularities[] word needs response_format verbose_json",
                      "timestamp_granularities[]");
  }
  f.words = want_words;
  if (stream != "true" && stream != "false") return BadRequest("'stream' must be true or false", "stream");
  f.stream = stream == "true";
  return std::nullopt;
}

}  // namespace lfmvox::server
