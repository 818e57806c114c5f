// Which symbols liblfmvox.so exports. The library is compiled with -fvisibility=hidden and
// -fvisibility-inlines-hidden (root CMakeLists.txt): everything is internal unless a public header
// (include/lfmvox/*.h) declares it between LFMVOX_API_BEGIN and LFMVOX_API_END. A linker version script
// (packaging/lfmvox.map) also keeps the standard library's template instances out of the export table.
// Plain C and C++: the pragmas go through _Pragma so that they can live in a macro.
#ifndef LFMVOX_VISIBILITY_H_
#define LFMVOX_VISIBILITY_H_

#if defined(__GNUC__) || defined(__clang__)
#define LFMVOX_API_BEGIN _Pragma("GCC visibility push(default)")
#define LFMVOX_API_END _Pragma("GCC visibility pop")
#else
#define LFMVOX_API_BEGIN
#define LFMVOX_API_END
#endif

#endif  // LFMVOX_VISIBILITY_H_
