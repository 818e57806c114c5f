// Typed access to optional fields of tokenizer.json objects, with errors that name the field's path
// (e.g. "added_tokens[3].lstrip"). nlohmann's own getters throw on a type mismatch; these check first.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace lfmvox::text {

// Absent or null leaves *out unchanged (the caller's default); anything but a boolean is DataLoss.
inline Status OptionalBool(const nlohmann::json& obj, const std::string& where, const char* key, bool* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return DataLoss(where + "." + key + " must be true or false");
  *out = it->get<bool>();
  return Status::Ok();
}

// Absent or null sets *present to false; anything but a string is DataLoss.
inline Status OptionalString(const nlohmann::json& obj, const std::string& where, const char* key,
                             std::string* out, bool* present = nullptr) {
  const auto it = obj.find(key);
  if (present != nullptr) *present = false;
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return DataLoss(where + "." + key + " must be a string or null");
  *out = it->get_ref<const std::string&>();
  if (present != nullptr) *present = true;
  return Status::Ok();
}

// The "type" of a component object such as the pre_tokenizer.
inline Result<std::string> ComponentType(const nlohmann::json& obj, const std::string& where) {
  if (!obj.is_object()) return DataLoss(where + " must be an object or null");
  const auto it = obj.find("type");
  if (it == obj.end() || !it->is_string()) return DataLoss(where + " has no string \"type\"");
  return it->get_ref<const std::string&>();
}

}  // namespace lfmvox::text
