#!/usr/bin/env bash
# Every library source compiles on its own (-fsyntax-only, one file at a time): it includes
# what it uses, and no file-local helper is shadowed by another file's. The builds are unity
# builds, where a missing include can hide behind an earlier file of the same batch.
# With a COMPILER (for instance clang++-14), the same with that compiler, in a BUILD_DIR of its
# own: GCC accepts a few things C++17 does not, which another compiler then refuses.
#   scripts/check_includes.sh BUILD_DIR [JOBS] [COMPILER]
set -euo pipefail
BUILD_DIR=$1
JOBS=${2:-2}
COMPILER=(${3:+"-DCMAKE_CXX_COMPILER=$3"})
SOURCE_DIR=$(cd "$(dirname "$0")/.." && pwd)
# Configuring writes the compile commands; nothing is built.
cmake -S "$SOURCE_DIR" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_UNITY_BUILD=OFF \
  -DTAPEGRAD_BUILD_TESTS=OFF -DTAPEGRAD_BUILD_EXAMPLES=OFF -DTAPEGRAD_WITH_MPI=OFF \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${COMPILER[@]}" > /dev/null
python3 - "$BUILD_DIR/compile_commands.json" "$SOURCE_DIR/src/" > "$BUILD_DIR/syntax_checks.txt" <<'PY'
import json, shlex, sys
commands, prefix = json.load(open(sys.argv[1])), sys.argv[2]
for entry in commands:
    if not entry["file"].startswith(prefix):
        continue
    words = shlex.split(entry["command"])
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == "-o":
            skip = True
        elif word != "-c" and word != entry["file"]:
            kept.append(word)
    print(shlex.join(["cd", entry["directory"]]) + " && " + shlex.join(kept + ["-fsyntax-only", entry["file"]]))
PY
COUNT=$(wc -l < "$BUILD_DIR/syntax_checks.txt")
if ! tr '\n' '\0' < "$BUILD_DIR/syntax_checks.txt" | xargs -0 -P "$JOBS" -I{} bash -c '{}'; then
  echo "FAILED: a library source does not compile on its own (above)" >&2
  exit 1
fi
echo "-- $COUNT library sources compile on their own${3:+ with $3}"
