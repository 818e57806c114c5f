// Typed, range-checked reads of config.json keys. A present key of the wrong
// type or out of range is an error naming `where` and the key; an absent (or
// null) key leaves *out at the caller's default unless it is required.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "base/status.h"

namespace lfmvox {

// Reads and parses a JSON file holding an object; the error names the file.
Result<nlohmann::json> ReadJsonFile(const std::string& path);

Status GetInt(const nlohmann::json& j, const char* key, const std::string& where, bool required, int64_t lo,
              int64_t hi, int* out);
Status GetDouble(const nlohmann::json& j, const char* key, const std::string& where, double lo, double hi,
                 double* out);
Status GetBool(const nlohmann::json& j, const char* key, const std::string& where, bool* out);

}  // namespace lfmvox
