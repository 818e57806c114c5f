// The version of lfmvox: the one place it is written. The root CMakeLists.txt reads these three numbers
// into project(VERSION), which names the shared library, the CMake package and lfmvox.pc.
// lfmvox_version() (lfmvox_c.h) and lfmvox::Version() (lfmvox.h) return the version of the library
// actually linked, which may differ from these macros (the headers compiled against).
#ifndef LFMVOX_VERSION_H_
#define LFMVOX_VERSION_H_

#define LFMVOX_VERSION_MAJOR 0
#define LFMVOX_VERSION_MINOR 1
#define LFMVOX_VERSION_PATCH 0

#define LFMVOX_VERSION_STR_INNER_(x) #x
#define LFMVOX_VERSION_STR_(x) LFMVOX_VERSION_STR_INNER_(x)
// "MAJOR.MINOR.PATCH"
#define LFMVOX_VERSION_STRING               \
  LFMVOX_VERSION_STR_(LFMVOX_VERSION_MAJOR) \
  "." LFMVOX_VERSION_STR_(LFMVOX_VERSION_MINOR) "." LFMVOX_VERSION_STR_(LFMVOX_VERSION_PATCH)

#endif  // LFMVOX_VERSION_H_
