// The exception boundary of the public API: library code reports errors as Status, but the standard library
// and third-party code it calls can throw (std::bad_alloc from any allocation, a filesystem or stream error).
// Every public entry point runs its body through Guard, so no exception leaves the library: an allocation
// failure becomes kOutOfMemory with what to lower, anything else kInternal naming the entry point.
#pragma once

#include <exception>
#include <new>

#include "base/status.h"

namespace lfmvox {

// The message of an allocation failure inside `entry`.
inline Status OutOfMemoryStatus(const char* entry) {
  return OutOfMemory(StrFormat(
      "%s ran out of memory (an allocation failed: the machine's memory or this process's limit is used "
      "up); lower the conversation's context (ConversationOptions::context, --context), the engine's "
      "max_batch or max_clip_seconds, load smaller weights (--weights q8_0 or q4_0), or free memory",
      entry));
}

// Runs f() (returning Status or Result<T>) and returns its result, or the Status of the exception it threw.
template <typename F>
auto Guard(const char* entry, F&& f) noexcept -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return OutOfMemoryStatus(entry);
  } catch (const std::exception& e) {
    return Internal(
        StrFormat("%s: unexpected exception (%s); please report this as an lfmvox bug", entry, e.what()));
  } catch (...) {
    return Internal(StrFormat("%s: unexpected exception; please report this as an lfmvox bug", entry));
  }
}

}  // namespace lfmvox
