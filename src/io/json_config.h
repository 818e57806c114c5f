// Typed, range-checked reads of config.json keys: the one set of readers every
// config parser uses. A present key of the wrong type or out of range is an
// error naming `where` (the file and section, e.g. "config.json [encoder]")
// and the key; an absent (or null) key is NotFound when required, else it
// leaves *out at the caller's default.
//   wrong type    InvalidArgument  `<where>: "key" must be ...`
//   out of range  OutOfRange       `<where>: "key" = v is outside [lo, hi]`
//   missing       NotFound         `<where> lacks the required key "key"`
//   unsupported   Unimplemented    `<where>: "key" = v is not supported (only ...)`
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/json_parse.h"
#include "base/status.h"

namespace lfmvox {

// A JSON value for an error message: a scalar or a short flat list as written, anything else only by
// its type and size (never dumped whole: a hostile value can nest deep enough to exhaust the stack).
std::string JsonPreview(const nlohmann::json& v);

// Reads and parses a JSON file holding an object (a model's config.json); the error names the file.
// A config is small: files over kMaxConfigBytes, nested deeper or holding more values than
// kConfigLimits, and anything but a regular file are refused before a document is built.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
inline constexpr JsonLimits kConfigLimits = {.max_depth = 32, .max_values = size_t{1} << 20};
Result<nlohmann::json> ReadJsonFile(const std::string& path);

// True when `key` is present and not null.
bool HasKey(const nlohmann::json& j, const char* key);
// InvalidArgument unless j is an object.
Status CheckObject(const nlohmann::json& j, const std::string& where);
// The object j[key]; NotFound `<where> lacks the "key" section` if absent,
// InvalidArgument if not an object.
Result<const nlohmann::json*> GetSection(const nlohmann::json& j, const char* key, const std::string& where);

// An integer in [lo, hi]; a float with a whole value (16000.0) is accepted.
Status GetInt(const nlohmann::json& j, const char* key, const std::string& where, bool required, int64_t lo,
              int64_t hi, int* out);
Status GetDouble(const nlohmann::json& j, const char* key, const std::string& where, bool required, double lo,
                 double hi, double* out);
// A number in [lo, hi] stored as float (eps values, pad values).
Status GetFloat(const nlohmann::json& j, const char* key, const std::string& where, bool required, double lo,
                double hi, float* out);
Status GetBool(const nlohmann::json& j, const char* key, const std::string& where, bool required, bool* out);
Status GetString(const nlohmann::json& j, const char* key, const std::string& where, bool required,
                 std::string* out);
// An array of integers, each in [lo, hi]; replaces *out when present.
Status GetIntArray(const nlohmann::json& j, const char* key, const std::string& where, bool required,
                   int64_t lo, int64_t hi, std::vector<int>* out);
// An array of strings; replaces *out when present.
Status GetStringArray(const nlohmann::json& j, const char* key, const std::string& where, bool required,
                      std::vector<std::string>* out);

// A key this engine implements for one value only: absent or null is that
// value when absent_ok (else NotFound); a present value other than `want` is
// Unimplemented naming key and value; `what` says what the value means.
Status RequireValue(const nlohmann::json& j, const char* key, const std::string& where,
                    const nlohmann::json& want, bool absent_ok, const char* what);

}  // namespace lfmvox
