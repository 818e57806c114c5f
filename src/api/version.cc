// lfmvox::Version() and lfmvox_version(): the version this library was built as (include/lfmvox/version.h).
#include "lfmvox/version.h"

#include "lfmvox/lfmvox.h"
#include "lfmvox/lfmvox_c.h"

namespace lfmvox {

const char* Version() { return LFMVOX_VERSION_STRING; }

}  // namespace lfmvox

extern "C" const char* lfmvox_version(void) { return LFMVOX_VERSION_STRING; }
