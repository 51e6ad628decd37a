#!/usr/bin/env bash
# Installs what is missing, then runs the checks, each stage timed:
#   1. build (Release, -O2) and the whole ctest suite; every library source compiles on its own
#      (-fsyntax-only: the builds are unity builds);
#   2. install into a scratch prefix, check the exported symbols name no -march-dependent
#      allocator, and build and run the consumer programs: the CMake package consumer with
#      default flags, -mavx2 and -march=native; a plain g++ line from pkg-config; a project
#      that add_subdirectory()s the source tree;
# and with --sanitizers (what CI runs) also:
#   3. clang++-14: every library source compiles (-fsyntax-only), and the pkg-config consumer
#      builds and runs (GCC accepts a few things C++17 does not);
#   4. AddressSanitizer + UndefinedBehaviorSanitizer build (-O1 -g1, the library shared), the
#      whole ctest suite;
#   5. ThreadSanitizer build (the same), every test executable named test_thread*.
# Build directories live under $BUILD_DIR (default build/test); ccache keeps reruns short.
set -euo pipefail
cd "$(dirname "$0")/.."

SANITIZERS=0
for argument in "$@"; do
  case "$argument" in
    --sanitizers) SANITIZERS=1 ;;
    -h | --help)
      sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
      echo "usage: scripts/test.sh [--sanitizers]"
      exit 0 ;;
    *)
      echo "scripts/test.sh: unknown argument '$argument' (usage: scripts/test.sh [--sanitizers])" >&2
      exit 2 ;;
  esac
done
# clang-format 14: the suite checks that the sources are formatted (scripts/check_format.sh).
bash scripts/setup.sh clang-format-14
SOURCE_DIR=$PWD
BUILD_DIR=${BUILD_DIR:-build/test}
JOBS=$(nproc)
LAUNCHER=()
if command -v ccache > /dev/null; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# Paths below the checkout hashed relative to it, and the build folder left out of the -g
# builds' hashes, so that another clone (CI's, a second worktree) reuses the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$SOURCE_DIR}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

STAGE=""
STAGE_START=$SECONDS
# Prints the time of the stage that ends and names the one that starts.
stage() {
  if [ -n "$STAGE" ]; then echo "== $STAGE: $((SECONDS - STAGE_START)) s"; fi
  STAGE=$1
  STAGE_START=$SECONDS
  if [ -n "$STAGE" ]; then echo "== $STAGE"; fi
}

# ---- 1. build and test ------------------------------------------------------------------
stage "build and ctest (Release -O2)"
# -O2: the suite builds in a fraction of -O3's time and still runs fast.
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DTAPEGRAD_BUILD_TESTS=ON -DTAPEGRAD_BUILD_EXAMPLES=ON > /dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS")
scripts/check_includes.sh "$BUILD_DIR/include-check" "$JOBS"

# ---- 2. consumers -----------------------------------------------------------------------
stage "install; consumers (CMake package x3 -march, pkg-config, add_subdirectory)"
PREFIX="$PWD/$BUILD_DIR/install-prefix"
rm -rf "$PREFIX"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" > /dev/null
LIBRARY=$(find "$PREFIX" -name 'libtapegrad.*' | head -n 1)

# The ABI: no exported symbol may name an xsimd allocator. The storage type's allocator is the
# library's own buffer_allocator; an -march-dependent xsimd default leaking into a signature is
# what broke -mavx2 consumers. (grep finding nothing is the expected outcome, not a failure.)
ALIGNMENTS=$(nm -C --defined-only "$LIBRARY" | { grep -o 'aligned_allocator<[^<>]*, [0-9]*ul>' || true; } |
  sed 's/.*, \([0-9]*\)ul>/\1/' | sort -u | tr '\n' ' ')
STORAGE_ALLOCATORS=$(nm -C --defined-only "$LIBRARY" | grep -c 'tapegrad::buffer_allocator<' || true)
echo "xsimd allocator alignments named by exported symbols: ${ALIGNMENTS:-none}; symbols naming" \
  "buffer_allocator: $STORAGE_ALLOCATORS"
if [ -n "$ALIGNMENTS" ]; then
  echo "FAILED: $LIBRARY exports symbols naming xsimd's aligned_allocator<..., $ALIGNMENTS>" >&2
  exit 1
fi
if [ "$STORAGE_ALLOCATORS" -eq 0 ]; then
  echo "FAILED: no exported symbol of $LIBRARY names buffer_allocator: is nm reading it?" >&2
  exit 1
fi

# The installed package, found by a separate CMake project, once per -march.
MARCH_FLAGS=("")
if grep -qw avx2 /proc/cpuinfo; then
  MARCH_FLAGS+=("-mavx2" "-march=native")
else
  echo "consumer: -mavx2 and -march=native skipped: this CPU has no AVX2 (the programs could not run)"
fi
for flags in "${MARCH_FLAGS[@]}"; do
  name=${flags:-default}
  name=${name#-}
  dir="$BUILD_DIR/consumer-${name//=/-}"
  rm -rf "$dir"
  echo "-- CMake package consumer, CMAKE_CXX_FLAGS='${flags}'"
  cmake -S test/consumer -B "$dir" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS="$flags" "${LAUNCHER[@]}" > /dev/null
  cmake --build "$dir" -j "$JOBS" > /dev/null
  "$dir/consumer"
done

# pkg-config: a plain compiler command line, nothing from CMake.
echo "-- pkg-config consumer"
PC_DIR=$(dirname "$(find "$PREFIX" -name tapegrad.pc | head -n 1)")
PC_FLAGS=$(PKG_CONFIG_PATH="$PC_DIR" pkg-config --cflags tapegrad)
PC_LIBS=$(PKG_CONFIG_PATH="$PC_DIR" pkg-config --libs tapegrad)
echo "pkg-config --cflags --libs tapegrad: $PC_FLAGS $PC_LIBS"
# The .pc file's version is the one the installed headers define.
PC_VERSION=$(PKG_CONFIG_PATH="$PC_DIR" pkg-config --modversion tapegrad)
HEADER_VERSION=$(sed -n 's/^#define TAPEGRAD_VERSION_STRING "\(.*\)"$/\1/p' \
  "$PREFIX/include/tapegrad/version.hpp")
echo "tapegrad.pc version $PC_VERSION, tapegrad/version.hpp version $HEADER_VERSION"
if [ "$PC_VERSION" != "$HEADER_VERSION" ]; then
  echo "FAILED: tapegrad.pc says version '$PC_VERSION', tapegrad/version.hpp '$HEADER_VERSION'" >&2
  exit 1
fi
# Builds the consumer's units in DIRECTORY with COMPILER... (a command: "ccache c++"), links
# them with the compiler alone, and runs the program.
pkg_config_consumer() {
  local directory=$1 unit
  shift
  mkdir -p "$directory"
  for unit in main own_xsimd no_xsimd; do
    # shellcheck disable=SC2086  # the flags are words
    "$@" -std=c++17 -O2 $PC_FLAGS -c "test/consumer/$unit.cpp" -o "$directory/$unit.o"
  done
  # shellcheck disable=SC2086
  "${@: -1}" "$directory"/*.o -o "$directory/consumer" $PC_LIBS
  "$directory/consumer"
}
CXX_COMMAND=(c++)
if command -v ccache > /dev/null; then CXX_COMMAND=(ccache c++); fi
pkg_config_consumer "$BUILD_DIR/consumer-pkg-config" "${CXX_COMMAND[@]}"

# add_subdirectory: the source tree built inside another project, same target name.
echo "-- add_subdirectory consumer"
# tapegrad's objects go as deep below the source tree as stage 1's ("${BUILD_DIR}-..."): ccache
# then hashes the same relative paths and reuses stage 1's objects instead of compiling them.
case "$BUILD_DIR" in
  /*) SUBDIRECTORY_BINARY_DIR="${BUILD_DIR}-subdirectory-tapegrad" ;;
  *) SUBDIRECTORY_BINARY_DIR="$SOURCE_DIR/${BUILD_DIR}-subdirectory-tapegrad" ;;
esac
cmake -S test/consumer_subdirectory -B "$BUILD_DIR/consumer-subdirectory" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DTAPEGRAD_BINARY_DIR="$SUBDIRECTORY_BINARY_DIR" > /dev/null
cmake --build "$BUILD_DIR/consumer-subdirectory" -j "$JOBS" --target consumer > /dev/null
"$BUILD_DIR/consumer-subdirectory/consumer"

if [ "$SANITIZERS" -eq 0 ]; then
  stage ""
  echo "== build, tests and consumers passed in $SECONDS s (the sanitizer stages run with --sanitizers)"
  exit 0
fi

# ---- 3. clang ----------------------------------------------------------------------------
stage "clang++-14: library sources (-fsyntax-only), pkg-config consumer"
bash scripts/setup.sh clang-14
scripts/check_includes.sh "$BUILD_DIR/include-check-clang" "$JOBS" clang++-14
echo "-- pkg-config consumer, clang++-14"
pkg_config_consumer "$BUILD_DIR/consumer-clang" clang++-14

# ---- 4. AddressSanitizer + UndefinedBehaviorSanitizer ------------------------------------
stage "ASan+UBSan build (-O1 -g1) and ctest"
# Without the MPI component: OpenMPI is not instrumented, and LSan would report its own
# allocations; the MPI tests run in stage 1.
# -g1: line tables, all a sanitizer report needs for file:line; full -g costs a fifth more
# compile time on the test files.
# A shared library: each of the ~95 test programs linked the instrumented static library into
# an executable of its own (146 MB each, 13 GB in all, 3-8 s of linking each); against the
# shared one a program holds only its own code (1.9 GB in all) and links in a fraction of that.
# (Stage 1 tests the static library, the default a user builds.)
SANITIZER_BUILD=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1"
  -DBUILD_SHARED_LIBS=ON -DTAPEGRAD_BUILD_TESTS=ON -DTAPEGRAD_BUILD_EXAMPLES=OFF
  -DTAPEGRAD_WITH_MPI=OFF)
# A unity build, as stage 1's: instrumented, the library's template-heavy sources take four
# times their -O2 time each, and a batch instantiates the shared kernels once. (Stage 1 checks
# that each source compiles on its own.)
cmake -S . -B "$BUILD_DIR/asan" "${SANITIZER_BUILD[@]}" -DTAPEGRAD_SANITIZE=address,undefined \
  > /dev/null
cmake --build "$BUILD_DIR/asan" -j "$JOBS" > /dev/null
# halt/abort on the first report: a sanitizer finding fails its test. allocator_may_return_null:
# the misuse catalogue asks for absurd allocations and checks they become ResourceExhausted
# (without it ASan aborts on the request instead of failing it).
(cd "$BUILD_DIR/asan" &&
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
  LSAN_OPTIONS=suppressions="$SOURCE_DIR/test/sanitizers/lsan.supp":print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "$JOBS")

# ---- 5. ThreadSanitizer ------------------------------------------------------------------
stage "TSan build (-O1 -g1) and the test_thread* executables"
# test/CMakeLists.txt makes one executable per test/test_*.cpp, named after the file.
mapfile -t THREAD_TESTS < <(find test -maxdepth 1 -name 'test_thread*.cpp' -printf '%f\n' |
  sed 's/\.cpp$//' | sort)
if [ ${#THREAD_TESTS[@]} -eq 0 ]; then
  echo "FAILED: no test/test_thread*.cpp to run under ThreadSanitizer" >&2
  exit 1
else
  cmake -S . -B "$BUILD_DIR/tsan" "${SANITIZER_BUILD[@]}" -DTAPEGRAD_SANITIZE=thread > /dev/null
  # OPENBLAS_NUM_THREADS=1 (here and for the build, whose test discovery runs the programs):
  # OpenBLAS is not instrumented, and its pthread build hands large products to its own worker
  # threads through spin-waits on plain variables, which TSan cannot see as synchronisation
  # (a possible source of reports in its frames, and accesses it does not check anyway). With
  # one thread every BLAS call runs on the calling thread, so TSan checks tapegrad's threading
  # and nothing of OpenBLAS's. (test_ops_linalg, whose products are small, ran clean either way.)
  export OPENBLAS_NUM_THREADS=1
  cmake --build "$BUILD_DIR/tsan" -j "$JOBS" --target "${THREAD_TESTS[@]}" > /dev/null
  for t in "${THREAD_TESTS[@]}"; do
    echo "-- $t under ThreadSanitizer"
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions="$SOURCE_DIR/test/sanitizers/tsan.supp" \
      "$BUILD_DIR/tsan/test/$t"
  done
fi

stage ""
echo "== all stages passed in $SECONDS s"
