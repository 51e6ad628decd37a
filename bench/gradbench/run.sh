#!/usr/bin/env bash
# Runs GradBench's evals against the tapegrad tool, the hand-written `manual` tool and (when
# its Python has torch) the `pytorch` tool, then prints one table of mean evaluate times (ms),
# what GradBench scores:
#   bench/gradbench/run.sh GRADBENCH_DIR [EVALS...]
# GRADBENCH_DIR is a GradBench checkout (github.com/gradbench/gradbench); EVALS default to all
# twelve. The evals run through this repository's runner (runner/run_eval.py), not GradBench's
# Rust CLI. Each eval's output goes to $LOGS/<eval>-<tool>.txt and its messages to
# $LOGS/<eval>-<tool>.jsonl; one line per eval is printed. Any eval that is not a success
# (undefined, failed, invalid, timed out, or the eval itself erred) is listed at the end and
# the script exits 1, after printing the table of what did run.
#
# Environment (all optional):
#   TOOLS      the tools to run, in order (default: "tapegrad tapegrad-function manual", plus
#              "pytorch" when PY can import torch; tapegrad-function is the tool whose eval
#              functions are tapegrad::functions, traced on the first run of an evaluate and
#              replayed after). A tool runs only the evals listed in its tools/<tool>/evals.txt.
#   LOGS       where the logs go (default: GRADBENCH_DIR/run-logs)
#   PY         the Python that runs the evals and Python tools; it needs numpy and pydantic
#              (and scipy, dataclasses-json for evals other than hello). Default: the first of
#              `python3` on PATH and /usr/bin/python3 that imports numpy and pydantic.
#   TIMEOUT    seconds to wait for any one response before killing the tool (default 600)
#   EVAL_ARGS  extra arguments for every eval's run.py (e.g. "-n 1280000" for lse)
#   REINSTALL  1: rebuild and reinstall the tapegrad tool even if it is up to date
#   TAPEGRAD_TOOL_BIN   install this already-built tapegrad_gradbench and build nothing
#   TAPEGRAD_TOOL_NAME  install the tapegrad tool as tools/<this> (default: tapegrad)
#   BUILD_DIR, MARCH    passed to install_tool.sh (build directory, default build/gradbench;
#                       -march flag, default -march=native)
# The tapegrad tool is (re)built with install_tool.sh only when its binary is missing or older
# than a source of the library or the tool (C++, CMake). Tools run with OPENBLAS_NUM_THREADS=1: GradBench's
# C++ tools are single-threaded.
set -euo pipefail
die() { echo "run.sh: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: run.sh GRADBENCH_DIR [EVALS...]"
[ -d "$1" ] || die "$1: no such directory (the first argument is a GradBench checkout)"
GRADBENCH=$(cd "$1" && pwd)
shift
[ -f "$GRADBENCH/python/gradbench/gradbench/eval.py" ] || \
  die "$GRADBENCH is not a GradBench checkout (no python/gradbench/gradbench/eval.py)"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUNNER=$HERE/runner
EVALS=${*:-hello llsq lse ode kmeans gmm lstm det ba ht saddle particle}
LOGS=${LOGS:-$GRADBENCH/run-logs}
TIMEOUT=${TIMEOUT:-600}
EVAL_ARGS=${EVAL_ARGS:-}
TOOL_NAME=${TAPEGRAD_TOOL_NAME:-tapegrad}

for e in $EVALS; do
  [ -f "$GRADBENCH/python/gradbench/gradbench/evals/$e/run.py" ] || \
    die "no eval '$e' in $GRADBENCH/python/gradbench/gradbench/evals"
done

# The Python for the evals: it must import these modules.
modules="numpy pydantic"
[ "$EVALS" = hello ] || modules="$modules scipy dataclasses_json"
has_modules() { "$1" -c "import ${modules// /, }" > /dev/null 2>&1; }
if [ -z "${PY:-}" ]; then
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" > /dev/null && has_modules "$candidate"; then PY=$(command -v "$candidate"); break; fi
  done
  [ -n "${PY:-}" ] || die "no Python with the modules the evals need ($modules): install them
  (Debian: apt-get install python3-numpy python3-scipy python3-pydantic python3-dataclasses-json)
  or set PY to a Python that has them"
else
  has_modules "$PY" || die "PY=$PY cannot import the modules the evals need ($modules)"
fi

if [ -z "${TOOLS:-}" ]; then
  TOOLS="tapegrad tapegrad-function manual"
  "$PY" -c 'import torch' > /dev/null 2>&1 && TOOLS="$TOOLS pytorch"
fi
# The tapegrad tool is installed under its own name; every other tool must already be there.
tools=""
for tool in $TOOLS; do
  [ "$tool" = tapegrad ] && tool=$TOOL_NAME
  tools="$tools $tool"
done

# install TARGET NAME: builds (when out of date) and installs one of the tool's programs.
install() {
  local target=$1 name=$2 bin newer=""
  bin=${BUILD_DIR:-$ROOT/build/gradbench}/bench/gradbench/$target
  [ -x "$bin" ] && newer=$(find "$ROOT/CMakeLists.txt" "$ROOT/cmake" "$ROOT/include" "$ROOT/src" \
    "$HERE" -path "$RUNNER" -prune -o -type f -newer "$bin" \( -name '*.[ch]pp' -o -name '*.h' \
    -o -name '*.in' -o -name '*.cmake' -o -name CMakeLists.txt \) -print -quit)
  if [ "${REINSTALL:-0}" = 1 ] || [ ! -x "$bin" ] || [ -n "$newer" ]; then
    TARGET=$target TOOL_NAME=$name "$HERE/install_tool.sh" "$GRADBENCH"
  else
    echo "$name tool up to date ($bin; REINSTALL=1 rebuilds it)"
    TOOL_BIN=$bin TOOL_NAME=$name "$HERE/install_tool.sh" "$GRADBENCH"
  fi
}
if [[ " $TOOLS " == *" tapegrad "* ]]; then
  if [ -n "${TAPEGRAD_TOOL_BIN:-}" ]; then
    TOOL_BIN=$TAPEGRAD_TOOL_BIN TOOL_NAME=$TOOL_NAME "$HERE/install_tool.sh" "$GRADBENCH"
  else
    install tapegrad_gradbench "$TOOL_NAME"
  fi
fi
if [[ " $TOOLS " == *" tapegrad-function "* ]]; then
  install tapegrad_gradbench_function tapegrad-function
fi

mkdir -p "$LOGS"
q() { printf '%q' "$1"; }
# Evals get the pydantic shim (a no-op under pydantic 2) and GradBench's package on their path.
eval_cmd="env PYTHONPATH=$(q "$RUNNER/pydantic_shim"):python/gradbench $(q "$PY")"
failures=()
logs=()
for tool in $tools; do
  [ -d "$GRADBENCH/tools/$tool" ] || { failures+=("$tool: no tools/$tool in $GRADBENCH"); continue; }
  case $tool in
    pytorch|jax|tensorflow)  # GradBench's Python tools
      tool_cmd="env OPENBLAS_NUM_THREADS=1 PYTHONPATH=python/gradbench $(q "$PY") python/gradbench/gradbench/tools/$tool/run.py" ;;
    *)  # C++ tools: GradBench's wrapper runs `make -C tools/$tool bin/<eval>`, then bin/<eval>
      tool_cmd="env OPENBLAS_NUM_THREADS=1 $(q "$PY") python/gradbench/gradbench/cpp.py $tool" ;;
  esac
  for e in $EVALS; do
    if [ -f "$GRADBENCH/tools/$tool/evals.txt" ] && ! grep -qx "$e" "$GRADBENCH/tools/$tool/evals.txt"; then
      echo "--- $e ($tool): not in tools/$tool/evals.txt, skipped"
      continue
    fi
    extra=""
    # Some stored snapshots of GradBench lack hand12's data file; stop ht at hand11 then.
    if [ "$e" = ht ] && [ ! -e "$GRADBENCH/evals/ht/data/complicated_big/hand12_t26_c100000.txt" ]; then
      extra="--max 11"
      echo "--- ht: evals/ht/data/complicated_big/hand12_t26_c100000.txt is missing; running hand1-hand11"
    fi
    out=$LOGS/$e-$tool.txt
    rm -f "$out" "$LOGS/$e-$tool.jsonl"  # no stale log of an earlier run in the table
    echo "=== $e ($tool) $(date +%T)"
    rc=0
    "$PY" "$RUNNER/run_eval.py" --cwd "$GRADBENCH" -o "$LOGS/$e-$tool.jsonl" --timeout "$TIMEOUT" \
      "$eval_cmd python/gradbench/gradbench/evals/$e/run.py $extra $EVAL_ARGS" "$tool_cmd" \
      > "$out" 2>&1 || rc=$?
    echo "    $(tail -n 1 "$out")"
    [ -s "$LOGS/$e-$tool.jsonl" ] && logs+=("$LOGS/$e-$tool.jsonl")
    if [ "$rc" -ne 0 ]; then
      failures+=("$e ($tool): exit $rc, $(tail -n 1 "$out"); full output in $out")
      tail -n 21 "$out" | head -n -1 | sed 's/^/    | /'  # the outcome line is above
    fi
  done
done

if [ ${#logs[@]} -gt 0 ]; then
  echo
  "$PY" "$RUNNER/log_table.py" "${logs[@]}"
fi
if [ ${#logs[@]} -eq 0 ] && [ ${#failures[@]} -eq 0 ]; then
  die "no eval ran (EVALS=$EVALS, TOOLS=$TOOLS): none is in the tools' evals.txt"
fi
if [ ${#failures[@]} -gt 0 ]; then
  echo >&2
  echo "run.sh: ${#failures[@]} eval run(s) did not succeed:" >&2
  printf '  %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "every eval run succeeded and was valid"
