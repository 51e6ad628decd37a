#!/usr/bin/env bash
# The goals of the open performance issues (24, 25, 26), each measured as its issue asks: a
# ratio against a baseline run in the same process (medians of REPEAT repetitions), heap bytes
# counted exactly, or compile CPU seconds against a program that includes only xtensor.
#   bench/open_goals.sh [bench_build_dir=build/bench] [repeat=5]
# The build directory is a bench build (bench/README.md, "Build and run"). Run it on a quiet
# machine: the load average is printed before and after. Each program runs as its section of
# bench/README.md shows (bench_mlp sets its own thread counts). Nothing here is part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/bench}
REPEAT=${2:-5}
BIN="$BUILD/bench"
if [ ! -x "$BIN/bench_overhead" ]; then
  echo "bench/open_goals.sh: no bench programs in $BIN (configure with -DTAPEGRAD_BUILD_BENCH=ON)" >&2
  exit 2
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
REPS=(--benchmark_repetitions="$REPEAT" --benchmark_report_aggregates_only=true
  --benchmark_format=json)

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"

# Prints "name median_real_time" for each median row of a Google Benchmark JSON file.
medians() {
  python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("aggregate_name") == "median":
        print(b["run_name"], b["real_time"], b.get("ns_per_op", ""))
' "$1"
}
# The median of one benchmark, by exact run name.
median_of() { awk -v n="$2" '$1 == n {print $2}' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }

echo "-- issue 24: the chain, record + backward, against the raw xt::xarray op (goal <= 3x)"
"$BIN/bench_overhead" --benchmark_filter='raw_xarray$|no_tape$|recording$|record_and_backward$' \
  "${REPS[@]}" > "$WORK/overhead.json" 2> /dev/null
medians "$WORK/overhead.json" > "$WORK/overhead.txt"
raw=$(median_of "$WORK/overhead.txt" BM_raw_xarray)
for name in no_tape recording record_and_backward; do
  t=$(median_of "$WORK/overhead.txt" "BM_tapegrad_$name")
  echo "   $name: $(ratio "$t" "$raw") the raw op ($(awk -v t="$t" 'BEGIN {printf "%.1f", t / 999}')" \
    "vs $(awk -v t="$raw" 'BEGIN {printf "%.1f", t / 999}') ns per op)"
done

echo "-- issue 24: peak memory of the 100,003-op chain, non-persistent (goal <= 1.03x the minimum)"
OPENBLAS_NUM_THREADS=1 "$BIN/bench_memory" 2> /dev/null | grep '^chain, 1000 elements' |
  sed -E 's/^chain, 1000 elements, *([a-z-]+).*overall peak *([0-9]+) B\/op = ([0-9.]+x).*/   \1: \3 (\2 B per op; the minimum 2,667)/'

echo "-- issue 24 (<= 1.00x) and 25 (function <= 0.95x): the MLP step against the hand-written one"
"$BIN/bench_mlp" --benchmark_repetitions="$REPEAT" --benchmark_report_aggregates_only=true \
  2> /dev/null | sed -n '/^median ms\/step/,$p' | sed 's/^/   /'

echo "-- issue 24: batch_jacobian of the 64-128-10 MLP against one gradient (goal <= 3x)"
"$BIN/bench_jacobian" --benchmark_filter='Mlp' "${REPS[@]}" > "$WORK/jacobian.json" 2> /dev/null
medians "$WORK/jacobian.json" > "$WORK/jacobian.txt"
one=$(median_of "$WORK/jacobian.txt" BM_GradientMlpBatch)
echo "   vectorized $(ratio "$(median_of "$WORK/jacobian.txt" BM_BatchJacobianMlp)" "$one")," \
  "loop $(ratio "$(median_of "$WORK/jacobian.txt" BM_BatchJacobianMlpLoop)" "$one") one gradient"

echo "-- issue 24: the steady state of a training loop (0 from the system, < 1 fault per step)"
"$BIN/bench_steady_state" 2> /dev/null | sed 's/^/   /'

echo "-- issue 24: views of a 64 MB tensor (no element buffer, < 1 us each)"
"$BIN/bench_views" 2> /dev/null | grep -E '^(reshape|expand|squeeze|transpose|slice|split|reverse|identity)' |
  sed 's/^/   /'

echo "-- issue 25: Function against eager and the raw ops (chain <= 1.5x raw, MLP step <= 0.90x eager)"
"$BIN/bench_function" "${REPS[@]}" > "$WORK/function.json" 2> /dev/null
medians "$WORK/function.json" > "$WORK/function.txt"
raw=$(median_of "$WORK/function.txt" BM_chain_raw_xarray_forward)
fn=$(median_of "$WORK/function.txt" BM_chain_function_value_and_gradient)
eager=$(median_of "$WORK/function.txt" BM_chain_eager_value_and_gradient)
echo "   chain value + gradient: Function $(ratio "$fn" "$raw") the raw forward, eager $(ratio "$eager" "$raw")"
adolc=$(median_of "$WORK/function.txt" BM_chain_adolc_value_and_gradient)
if [ -n "$adolc" ]; then echo "   chain value + gradient: Function $(ratio "$fn" "$adolc") ADOL-C"; fi
for step in sgd adam; do
  echo "   MLP $step step: Function $(ratio "$(median_of "$WORK/function.txt" "BM_mlp_function_${step}_step")" \
    "$(median_of "$WORK/function.txt" "BM_mlp_eager_${step}_step")") eager"
done
hand=$(median_of "$WORK/function.txt" BM_lse_handwritten_value_and_gradient)
echo "   lse value + gradient (n = 1,280,000): eager" \
  "$(ratio "$(median_of "$WORK/function.txt" BM_lse_eager_value_and_gradient)" "$hand")," \
  "Function $(ratio "$(median_of "$WORK/function.txt" BM_lse_function_value_and_gradient)" "$hand") hand-written"

echo "-- issue 26: a user's program at -O2, CPU seconds (median of $REPEAT; goal <= 2 s)"
bench/time_programs.sh "$BUILD/include" "$REPEAT" | sed 's/^/   /'
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"
