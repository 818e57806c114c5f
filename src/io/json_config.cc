#include "io/json_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/file_read.h"
#include "base/json_parse.h"

namespace lfmvox {

using nlohmann::json;

std::string JsonPreview(const json& v) {
  if (v.is_array()) {
    // A short flat list is shown whole; anything nested only by its size.
    bool flat = v.size() <= 8;
    for (const json& e : v) flat = flat && e.is_primitive();
    if (!flat) return "a list of " + std::to_string(v.size());
  }
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  std::string s = v.dump();
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s;
}

namespace {

// The value of a present, non-null key; null (with an error or OK) otherwise.
const json* Find(const json& j, const char* key, const std::string& where, bool required, Status* st) {
  *st = Status::Ok();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) *st = NotFound(StrFormat("%s lacks the required key \"%s\"", where.c_str(), key));
    return nullptr;
  }
  return &*it;
}

Status RangeError(const std::string& where, const char* key, const json& v, double lo, double hi) {
  return OutOfRange(
      StrFormat("%s: \"%s\" = %s is outside [%g, %g]", where.c_str(), key, JsonPreview(v).c_str(), lo, hi));
}

// One integer element (a whole-valued float such as 16000.0 included) in [lo, hi]. The bounds are far
// below 2^53, so comparing as double is exact.
Status ToInt(const json& v, const char* key, const std::string& where, const char* what, int64_t lo,
             int64_t hi, int* out) {
  const double d = v.is_number() ? v.get<double>() : 0.0;
  if (!v.is_number() || (v.is_number_float() && !(std::isfinite(d) && d == std::floor(d)))) {
    return InvalidArgument(
        StrFormat("%s: \"%s\" must be %s, got %s", where.c_str(), key, what, JsonPreview(v).c_str()));
  }
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
    return OutOfRange(StrFormat("%s: \"%s\" = %s is outside [%lld, %lld]", where.c_str(), key,
                                JsonPreview(v).c_str(), static_cast<long long>(lo),
                                static_cast<long long>(hi)));
  }
  *out = static_cast<int>(v.is_number_float() ? static_cast<int64_t>(d) : v.get<int64_t>());
  return Status::Ok();
}

}  // namespace

Result<json> ReadJsonFile(const std::string& path) {
  LFM_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path, kMaxConfigBytes));
  LFM_ASSIGN_OR_RETURN(json j, ParseJson(text, path, kConfigLimits));
  if (!j.is_object()) return DataLoss(path + " must hold a JSON object");
  return j;
}

bool HasKey(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

Status CheckObject(const json& j, const std::string& where) {
  // The type, not the value: a hostile value can be nested deep enough to exhaust the stack in dump().
  if (!j.is_object()) return InvalidArgument(where + " must be a JSON object, got " + j.type_name());
  return Status::Ok();
}

Result<const json*> GetSection(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null())
    return NotFound(StrFormat("%s lacks the \"%s\" section", where.c_str(), key));
  if (!it->is_object())
    return InvalidArgument(StrFormat("%s: the \"%s\" section must be a JSON object", where.c_str(), key));
  return &*it;
}

Status GetInt(const json& j, const char* key, const std::string& where, bool required, int64_t lo, int64_t hi,
              int* out) {
  Status st;
  const json* v = Find(j, key, where, required, &st);
  if (v == nullptr) return st;
  return ToInt(*v, key, where, "an integer", lo, hi, out);
}

Status GetDouble(const json& j, const char* key, const std::string& where, bool required, double lo,
                 double hi, double* out) {
  Status st;
  const json* v = Find(j, key, where, required, &st);
  if (v == nullptr) return st;
  if (!v->is_number())
    return InvalidArgument(
        StrFormat("%s: \"%s\" must be a number, got %s", where.c_str(), key, v->dump().c_str()));
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) return RangeError(where, key, *v, lo, hi);
  *out = d;
  return Status::Ok();
}

Status GetFloat(const json& j, const char* key, const std::string& where, bool required, double lo, double hi,
                float* out) {
  double d = *out;
  LFM_RETURN_IF_ERROR(GetDouble(j, key, where, required, lo, hi, &d));
  *out = static_cast<float>(d);
  return Status::Ok();
}

Status GetBool(const json& j, const char* key, const std::string& where, bool required, bool* out) {
  Status st;
  const json* v = Find(j, key, where, required, &st);
  if (v == nullptr) return st;
  if (!v->is_boolean()) {
    return InvalidArgument(
        StrFormat("%s: \"%s\" must be true or false, got %s", where.c_str(), key, v->dump().c_str()));
  }
  *out = v->get<bool>();
  return Status::Ok();
}

Status GetString(const json& j, const char* key, const std::string& where, bool required, std::string* out) {
  Status st;
  const json* v = Find(j, key, where, required, &st);
  if (v == nullptr) return st;
  if (!v->is_string())
    return InvalidArgument(
        StrFormat("%s: \"%s\" must be a string, got %s", where.c_str(), key, v->dump().c_str()));
  *out = v->get<std::string>();
  return Status::Ok();
}

Status GetIntArray(const json& j, const char* key, const std::string& where, bool required, int64_t lo,
                   int64_t hi, std::vector<int>* out) {
  Status st;
  const json* v = Find(j, key, where, required, &st);
  if (v == nullptr) return st;
  if (!v->is_array()) {
    return InvalidArgument(
        StrFormat("%s: \"%s\" must be an array of integers, got %s", where.c_str(), key, v->dump().c_str()));
  }
  std::vector<int> a(v->size());
  for (size_t i = 0; i < a.size(); ++i) {
    LFM_RETURN_IF_ERROR(ToInt((*v)[i], key, where, "an array of integers", lo, hi, &a[i]));
  }
  *out = std::move(a);
  return Status::Ok();
}

Status GetStringArray(const json& j, const char* key, const std::string& where, bool required,
                      std::vector<std::string>* out) {
  Status st;
  const json* v = Find(j, key, where, required, &st);
  if (v == nullptr) return st;
  const bool ok =
      v->is_array() && std::all_of(v->begin(), v->end(), [](const json& e) { return e.is_string(); });
  if (!ok) {
    return InvalidArgument(
        StrFormat("%s: \"%s\" must be an array of strings, got %s", where.c_str(), key, v->dump().c_str()));
  }
  out->clear();
  for (const json& e : *v) out->push_back(e.get<std::string>());
  return Status::Ok();
}

Status RequireValue(const json& j, const char* key, const std::string& where, const json& want,
                    bool absent_ok, const char* what) {
  Status st;
  const json* v = Find(j, key, where, !absent_ok, &st);
  if (v == nullptr) return st;
  if (*v != want) {
    return Unimplemented(StrFormat("%s: \"%s\" = %s is not supported (only %s: %s)", where.c_str(), key,
                                   JsonPreview(*v).c_str(), JsonPreview(want).c_str(), what));
  }
  return Status::Ok();
}

}  // namespace lfmvox
