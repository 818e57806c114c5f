#!/usr/bin/env bash
# Install.ConsumerProjects: the installed tree works for a user's project.
#   1. `cmake --install` of the build into a temporary prefix, which is then moved (the package and
#      the .pc file must be relocatable);
#   2. liblfmvox.so exports only the public API: no defined dynamic symbol outside lfmvox_* / lfmvox::,
#      and every lfmvox:: one named in include/lfmvox/;
#   3. a C++ project (consumer_cpp, find_package(lfmvox)) against lfmvox::lfmvox and lfmvox::lfmvox_static,
#      and a C11 program (consumer_c) built with pkg-config, shared and static: each prints the library's
#      version, which must equal include/lfmvox/version.h's, and decodes examples/codes.txt with the
#      oracle detokenizer (tests/data/lfm25_detok): as many samples as the oracle's PCM
#      (traces/detok__T45__pcm.npy, the same codes) and an SNR against it of at least 100 dB.
# usage: install_test.sh SOURCE_DIR BUILD_DIR C_COMPILER CXX_COMPILER
# Exits 77 (ctest: skipped) when a tool it needs is missing or the library was not built.
set -euo pipefail
export LC_ALL=C  # byte-wise text tools: the .npy header follows binary bytes
src=$1 build=$2 cc=$3 cxx=$4
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

for tool in cmake pkg-config nm c++filt readelf; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
[ -x "$cc" ] && [ -x "$cxx" ] || skip "compilers $cc / $cxx not found"
[ -f "$build/packaging/liblfmvox.a" ] && [ -f "$build/packaging/lfmvox.1" ] &&
  ls "$build"/packaging/liblfmvox.so.* >/dev/null 2>&1 || skip "liblfmvox is not built (cmake --build $build)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lfmvox_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The version, from the one place it is written.
major=$(sed -n 's/^#define LFMVOX_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/lfmvox/version.h")
minor=$(sed -n 's/^#define LFMVOX_VERSION_MINOR \([0-9]*\)$/\1/p' "$src/include/lfmvox/version.h")
patch=$(sed -n 's/^#define LFMVOX_VERSION_PATCH \([0-9]*\)$/\1/p' "$src/include/lfmvox/version.h")
version="$major.$minor.$patch"
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] || fail "no version in version.h"

# 1. Install, then move the tree: nothing may point back at the first prefix.
cmake --install "$build" --prefix "$tmp/stage" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
mv "$tmp/stage" "$tmp/prefix"
prefix=$tmp/prefix
libdir=$(dirname "$(find "$prefix" -name liblfmvox.a | head -1)")
for f in include/lfmvox/lfmvox.h include/lfmvox/lfmvox_c.h include/lfmvox/version.h include/lfmvox/visibility.h \
         bin/lfmvox share/man/man1/lfmvox.1; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
for f in liblfmvox.so "liblfmvox.so.$major.$minor" pkgconfig/lfmvox.pc cmake/lfmvox/lfmvoxConfig.cmake; do
  [ -e "$libdir/$f" ] || fail "$libdir/$f is not installed"
done
if grep -rq "$tmp/stage" "$libdir/cmake" "$libdir/pkgconfig"; then fail "the package names the install prefix"; fi
[ "$("$prefix/bin/lfmvox" --version)" = "lfmvox $version" ] || fail "installed lfmvox --version"
head -1 "$prefix/share/man/man1/lfmvox.1" | grep -q "^\.TH LFMVOX 1 .*lfmvox $version" || fail "man page header"

# 2. The export table of liblfmvox.so.
nm -D --defined-only "$libdir/liblfmvox.so" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' |
  c++filt >"$tmp/exports.txt"
grep -Ev '^(lfmvox_|lfmvox::|typeinfo for lfmvox::|typeinfo name for lfmvox::|vtable for lfmvox::)' \
  "$tmp/exports.txt" >"$tmp/foreign.txt" || true
foreign=$(wc -l <"$tmp/foreign.txt")
public=$(wc -l <"$tmp/exports.txt")
echo "exports: $public symbols, $foreign outside lfmvox"
[ "$foreign" -eq 0 ] || { head -20 "$tmp/foreign.txt"; fail "$foreign exported symbols outside the lfmvox API"; }
grep -qx 'lfmvox_version' "$tmp/exports.txt" || fail "lfmvox_version is not exported"
grep -qx 'lfmvox::Version()' "$tmp/exports.txt" || fail "lfmvox::Version() is not exported"
# Every lfmvox:: name exported is declared in a public header (no internal class leaks out).
sed -E 's/^(typeinfo name for |typeinfo for |vtable for )//' "$tmp/exports.txt" | grep '^lfmvox::' |
  sed -E 's/^lfmvox::([A-Za-z_][A-Za-z0-9_]*).*/\1/' | sort -u >"$tmp/names.txt"
while read -r name; do
  grep -qw "$name" "$prefix"/include/lfmvox/*.h || fail "exported lfmvox::$name is not in include/lfmvox/"
done <"$tmp/names.txt"
echo "exported lfmvox:: names: $(tr '\n' ' ' <"$tmp/names.txt")"

data=$src/tests/data/lfm25_detok
codes=$src/examples/codes.txt
oracle=$data/traces/detok__T45__pcm.npy
expected_samples=$(head -c 128 "$oracle" | sed -n "s/.*'shape': (\([0-9]*\),).*/\1/p")
[ -n "$expected_samples" ] || fail "cannot read the oracle's shape"

check_run() {  # name, then the command
  local name=$1
  shift
  "$@" "$data" "$codes" "$oracle" >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "$name exited non-zero"; }
  grep -qx "version $version" "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "$name: library version"; }
  grep -qx "header_version $version" "$tmp/$name.out" || fail "$name: header version"
  grep -qx "missing_model_error not found" "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "$name: error"; }
  grep -qx "samples $expected_samples" "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "$name: sample count"; }
  local snr
  snr=$(sed -n 's/^snr_db //p' "$tmp/$name.out")
  awk -v s="$snr" 'BEGIN { exit !(s >= 100) }' || fail "$name: SNR $snr dB against the oracle"
  echo "$name: version $version, $expected_samples samples, SNR $snr dB"
}

# 3a. C++ with CMake.
cmake -S "$src/tests/install/consumer_cpp" -B "$tmp/cpp" -DCMAKE_PREFIX_PATH="$prefix" -DLFMVOX_EXPECTED_VERSION="$version" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release >"$tmp/cpp.log" 2>&1 || { cat "$tmp/cpp.log"; fail "configure consumer_cpp"; }
cmake --build "$tmp/cpp" -j2 >>"$tmp/cpp.log" 2>&1 || { cat "$tmp/cpp.log"; fail "build consumer_cpp"; }
readelf -d "$tmp/cpp/consumer_shared" | grep -q 'NEEDED.*liblfmvox\.so' || fail "consumer_shared does not use liblfmvox.so"
if readelf -d "$tmp/cpp/consumer_static" | grep -q 'NEEDED.*liblfmvox'; then fail "consumer_static needs liblfmvox.so"; fi
check_run cpp_shared "$tmp/cpp/consumer_shared"
check_run cpp_static "$tmp/cpp/consumer_static"

# 3b. C with pkg-config.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[ "$(pkg-config --modversion lfmvox)" = "$version" ] || fail "pkg-config --modversion"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wpedantic "$src/tests/install/consumer_c/main.c" -o "$tmp/c_shared" \
  $(pkg-config --cflags --libs lfmvox) -lm || fail "build consumer_c (shared)"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wpedantic "$src/tests/install/consumer_c/main.c" -o "$tmp/c_static" \
  $(pkg-config --cflags lfmvox) $(pkg-config --static --libs lfmvox | sed 's/-llfmvox\b/-l:liblfmvox.a/') ||
  fail "build consumer_c (static)"
if readelf -d "$tmp/c_static" | grep -q 'NEEDED.*liblfmvox'; then fail "c_static needs liblfmvox.so"; fi
check_run c_shared env LD_LIBRARY_PATH="$libdir" "$tmp/c_shared"
check_run c_static "$tmp/c_static"
echo "PASS"
