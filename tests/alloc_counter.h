// One heap-allocation counter for the no-allocation tests: alloc_counter.cc replaces the global
// operator new (every form) and counts each call. Link it into a test binary by listing it in
// the test's SOURCES.
#pragma once

namespace lfmvox::testing {

// Allocations through operator new since the program started.
long AllocationCount();

}  // namespace lfmvox::testing
