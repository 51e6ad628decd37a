#!/usr/bin/env bash
# Runs GradBench's evals against the tapegrad tool, the hand-written `manual` tool and the
# `pytorch` tool, and prints one table of mean evaluate times (ms), what GradBench scores.
#   bench/gradbench/run.sh /path/to/gradbench [EVALS...]
# Needs: a GradBench checkout set up as its README says (manual built, python deps), and a
# runner that speaks GradBench's protocol between an eval and a tool (RUNNER: a folder with
# run_all.sh and log_table.py; default: the project's shared/gradbench beside this repo).
set -euo pipefail
GRADBENCH=$(cd "${1:?usage: run.sh GRADBENCH_DIR [EVALS...]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
RUNNER=${RUNNER:-$HERE/../../../shared/gradbench}
EVALS=${*:-hello llsq lse ode kmeans gmm lstm det ba ht saddle particle}
LOGS=${LOGS:-$GRADBENCH/run-logs}
"$HERE/install_tool.sh" "$GRADBENCH"

tools="tapegrad manual"
/usr/bin/python3 -c 'import torch' 2>/dev/null && tools="$tools pytorch"
for tool in $tools; do
  evals=""
  for e in $EVALS; do
    # The evals each tool implements (pytorch: gmm lstm lse kmeans; manual: not particle/saddle).
    if [ -f "$GRADBENCH/tools/$tool/evals.txt" ] && ! grep -qx "$e" "$GRADBENCH/tools/$tool/evals.txt"; then continue; fi
    evals="$evals $e"
  done
  [ -n "$evals" ] && GRADBENCH="$GRADBENCH" LOGS="$LOGS" TOOL=$tool EVALS="$evals" "$RUNNER/run_all.sh" || true
done
logs=()
for e in $EVALS; do for tool in $tools; do
  [ -f "$LOGS/$e-$tool.jsonl" ] && logs+=("$LOGS/$e-$tool.jsonl")
done; done
/usr/bin/python3 "$RUNNER/log_table.py" "${logs[@]}"
