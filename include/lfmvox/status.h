// Errors as values. Library code never throws, exits or prints: every fallible
// call returns Status or Result<T>, and the message says what to fix.
//
// Thread safety: Status and Result are plain values (copy or move them across
// threads freely; one object is not for concurrent mutation).
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "lfmvox/visibility.h"

LFMVOX_API_BEGIN
namespace lfmvox {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something malformed
  kNotFound,         // a file, tensor or key is missing
  kDataLoss,         // a file is truncated or corrupt
  kOutOfRange,       // a length, index or size beyond what is allowed
  kUnimplemented,    // valid input this build does not support
  kInternal,         // a broken invariant inside lfmvox (a bug)
  kIo,               // the operating system refused (open, mmap, write)
  kCancelled,        // stopped on request: Cancel(), or a caller's callback
  kOutOfMemory,      // an allocation failed: the machine's memory (or the process's limit) ran out
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "code: message", for front ends that print errors.
  std::string ToString() const;

  // Prepends context ("loading audio_detokenizer: ") to the message.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status DataLoss(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status OutOfRange(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(StatusCode::kUnimplemented, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status IoError(std::string m) { return Status(StatusCode::kIo, std::move(m)); }
inline Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
inline Status OutOfMemory(std::string m) { return Status(StatusCode::kOutOfMemory, std::move(m)); }

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(runtime/explicit)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(runtime/explicit)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lfmvox
LFMVOX_API_END
