// Library-internal error helpers on top of the public Status / Result
// (include/lfmvox/status.h): message formatting and the early-return macros.
// Kept out of the public headers so that users' code gets no unprefixed names.
#pragma once

#include <string>
#include <utility>

#include "lfmvox/status.h"

namespace lfmvox {

// printf-style message formatting for error construction.
std::string StrFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

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
