#!/usr/bin/env bash
# The compile CPU seconds (user + system, ccache off) of a user's program at -O2, the median of
# REPEAT compiles each: a main that includes only <xtensor/xarray.hpp> (the floor any program
# using tapegrad's public headers pays), one that includes <tapegrad/tapegrad.hpp>,
# examples/poisson_pinn.cpp and examples/train_digits_cnn.cpp. CONFIG_INCLUDE is a configured
# build's include folder (it holds tapegrad/config.hpp). build_times.sh and open_goals.sh run it.
#   bench/time_programs.sh CONFIG_INCLUDE [repeat=5]
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG_INCLUDE=${1:?usage: bench/time_programs.sh CONFIG_INCLUDE [repeat]}
REPEAT=${2:-5}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export CCACHE_DISABLE=1
INCLUDES=(-Iinclude -I"$CONFIG_INCLUDE" -Iexamples)
printf '#include <xtensor/xarray.hpp>\nint main() { return 0; }\n' > "$WORK/xarray_main.cpp"
printf '#include <tapegrad/tapegrad.hpp>\nint main() { return 0; }\n' > "$WORK/empty_main.cpp"
for source in "$WORK/xarray_main.cpp" "$WORK/empty_main.cpp" examples/poisson_pinn.cpp \
  examples/train_digits_cnn.cpp; do
  samples=()
  for _ in $(seq "$REPEAT"); do
    /usr/bin/time -f "%U %S" -o "$WORK/time.txt" c++ -std=c++17 -O2 -DNDEBUG -DXTENSOR_USE_XSIMD \
      "${INCLUDES[@]}" -DTAPEGRAD_DIGITS_CSV='""' -c "$source" -o "$WORK/program.o" > /dev/null
    samples+=("$(awk '{printf "%.2f", $1 + $2}' "$WORK/time.txt")")
  done
  median=$(printf '%s\n' "${samples[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  echo "$(basename "$source"): median $median s CPU (samples ${samples[*]})"
done
