// Errors as values. Library code never throws, exits or prints: every fallible
// call returns Status or Result<T>, and the message says what to fix.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <variant>

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
  kCancelled,        // the caller asked the call to stop (Cancel())
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

// printf-style message formatting for error construction.
std::string StrFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status DataLoss(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status OutOfRange(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(StatusCode::kUnimplemented, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status IoError(std::string m) { return Status(StatusCode::kIo, std::move(m)); }
inline Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }

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

#define LFM_CONCAT_INNER_(a, b) a##b
#define LFM_CONCAT_(a, b) LFM_CONCAT_INNER_(a, b)

#define LFM_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::lfmvox::Status lfm_status_ = (expr);     \
    if (!lfm_status_.ok()) return lfm_status_; \
  } while (0)

#define LFM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

// LFM_ASSIGN_OR_RETURN(auto x, Foo()); returns Foo()'s status on error.
#define LFM_ASSIGN_OR_RETURN(lhs, expr) \
  LFM_ASSIGN_OR_RETURN_IMPL_(LFM_CONCAT_(lfm_result_, __LINE__), lhs, expr)
