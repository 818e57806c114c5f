#include "base/json_parse.h"

#include <new>
#include <nlohmann/json.hpp>

namespace lfmvox {
namespace {

using nlohmann::json;

// Counts depth and values; stops the parse (returns false) at the first limit
// exceeded or syntax error, remembering which.
class LimitSax {
 public:
  explicit LimitSax(const JsonLimits& l) : limits_(l) {}

  bool null() { return Value(); }
  bool boolean(bool) { return Value(); }
  bool number_integer(json::number_integer_t) { return Value(); }
  bool number_unsigned(json::number_unsigned_t) { return Value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return Value(); }
  bool string(json::string_t&) { return Value(); }
  bool binary(json::binary_t&) { return Value(); }
  bool start_object(size_t) { return Open(); }
  bool key(json::string_t&) { return true; }
  bool end_object() { return Close(); }
  bool start_array(size_t) { return Open(); }
  bool end_array() { return Close(); }
  bool parse_error(size_t /*position*/, const std::string& /*last_token*/, const json::exception& e) {
    syntax_ = e.what();
    return false;
  }

  bool too_deep = false;
  bool too_many = false;
  const std::string& syntax() const { return syntax_; }

 private:
  bool Value() {
    if (++values_ > limits_.max_values) too_many = true;
    return !too_many;
  }
  bool Open() {
    if (++depth_ > limits_.max_depth) too_deep = true;
    return !too_deep && Value();
  }
  bool Close() {
    --depth_;
    return true;
  }

  JsonLimits limits_;
  size_t depth_ = 0;
  size_t values_ = 0;
  std::string syntax_;
};

}  // namespace

Result<json> ParseJson(std::string_view text, const std::string& what, const JsonLimits& limits) {
  try {
    LimitSax sax(limits);
    if (!json::sax_parse(text.begin(), text.end(), &sax)) {
      if (sax.too_deep) {
        return OutOfRange(what + " nests arrays/objects deeper than " + std::to_string(limits.max_depth) +
                          " levels; no valid file of this kind does");
      }
      if (sax.too_many) {
        return OutOfRange(what + " holds more than " + std::to_string(limits.max_values) +
                          " JSON values; no valid file of this kind does");
      }
      return DataLoss(what + " is not valid JSON: " + sax.syntax());
    }
    json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return DataLoss(what + " is not valid JSON");
    return j;
  } catch (const std::bad_alloc&) {
    return OutOfRange(what + ": out of memory while parsing " + std::to_string(text.size()) +
                      " bytes of JSON");
  } catch (const std::exception& e) {  // nlohmann's own, should the parser raise one after all
    return DataLoss(what + " is not valid JSON: " + e.what());
  }
}

}  // namespace lfmvox
