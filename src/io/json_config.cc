#include "io/json_config.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace lfmvox {

using nlohmann::json;

Result<json> ReadJsonFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open " + path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLoss(path + " is not valid JSON");
  if (!j.is_object()) return DataLoss(path + " must hold a JSON object");
  return j;
}

Status GetInt(const json& j, const char* key, const std::string& where, bool required, int64_t lo, int64_t hi,
              int* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return NotFound(StrFormat("%s lacks the required key \"%s\"", where.c_str(), key));
    return Status::Ok();
  }
  if (!it->is_number_integer())
    return InvalidArgument(StrFormat("%s: \"%s\" must be an integer", where.c_str(), key));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return OutOfRange(StrFormat("%s: \"%s\" = %lld is outside [%lld, %lld]", where.c_str(), key,
                                static_cast<long long>(v), static_cast<long long>(lo),
                                static_cast<long long>(hi)));
  }
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status GetDouble(const json& j, const char* key, const std::string& where, double lo, double hi,
                 double* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return InvalidArgument(StrFormat("%s: \"%s\" must be a number", where.c_str(), key));
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    return OutOfRange(StrFormat("%s: \"%s\" = %g is outside [%g, %g]", where.c_str(), key, v, lo, hi));
  }
  *out = v;
  return Status::Ok();
}

Status GetBool(const json& j, const char* key, const std::string& where, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean())
    return InvalidArgument(StrFormat("%s: \"%s\" must be true or false", where.c_str(), key));
  *out = it->get<bool>();
  return Status::Ok();
}

}  // namespace lfmvox
