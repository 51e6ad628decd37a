#!/usr/bin/env bash
# Build times, in CPU seconds (user + system of the compiler processes), ccache off:
#   1. the library (Release -O2), compiled one file at a time and as a unity build;
#   2. a user's program at -O2, the median of REPEAT compiles (bench/time_programs.sh):
#      an empty main that includes <tapegrad/tapegrad.hpp>, one that includes only
#      <xtensor/xarray.hpp>, examples/poisson_pinn.cpp and examples/train_digits_cnn.cpp.
# CPU time rises on a busy machine: run it on a quiet one and compare figures of one run.
#   bench/build_times.sh [work_dir=build/build-times] [repeat=5]
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-build/build-times}
REPEAT=${2:-5}
export CCACHE_DISABLE=1
mkdir -p "$WORK"

# CPU seconds of a command and its children.
cpu_seconds() {
  /usr/bin/time -f "%U %S" -o "$WORK/time.txt" "$@" > /dev/null
  awk '{printf "%.1f", $1 + $2}' "$WORK/time.txt"
}

echo "== the library, Release -O2 (cmake --build -j $(nproc))"
for unity in OFF ON; do
  dir="$WORK/library-unity-$unity"
  rm -rf "$dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DTAPEGRAD_UNITY_BUILD=$unity -DTAPEGRAD_BUILD_EXAMPLES=OFF -DTAPEGRAD_WITH_MPI=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER= > /dev/null
  start=$SECONDS
  cpu=$(cpu_seconds cmake --build "$dir" -j "$(nproc)" --target tapegrad)
  echo "unity build $unity: $cpu s CPU, $((SECONDS - start)) s wall"
done

echo "== a user's program, -O2 (median of $REPEAT compiles)"
bench/time_programs.sh "$WORK/library-unity-ON/include" "$REPEAT"
