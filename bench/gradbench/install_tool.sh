#!/usr/bin/env bash
# Builds the tapegrad GradBench tool and installs it into a GradBench checkout as
# tools/tapegrad, where GradBench's C++ wrapper (python/gradbench/gradbench/cpp.py) finds it:
#   bench/gradbench/install_tool.sh /path/to/gradbench
# The wrapper runs `make -C tools/tapegrad bin/<eval>`; the Makefile written here links
# bin/<eval> to the one tapegrad_gradbench program, which reads the eval from its own name.
# Environment:
#   BUILD_DIR  the CMake build directory (default: build/gradbench in this repository)
#   MARCH      the -march flag (default -march=native, as GradBench's C++ tools; MARCH= builds
#              for any x86-64)
#   TOOL_BIN   an already-built tapegrad_gradbench: install it as it is, build nothing
#   TOOL_NAME  the tool's name in the checkout, tools/<TOOL_NAME> (default: tapegrad)
#   TARGET     the program to build and install: tapegrad_gradbench (default) or
#              tapegrad_gradbench_function (the function variant: each eval function's tensor
#              work as one tapegrad::function, traced on the first run and replayed after)
set -euo pipefail
GRADBENCH=${1:?usage: install_tool.sh GRADBENCH_DIR}
[ -d "$GRADBENCH/tools" ] || { echo "install_tool.sh: $GRADBENCH has no tools/ folder: not a GradBench checkout" >&2; exit 1; }
GRADBENCH=$(cd "$GRADBENCH" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TOOL_NAME=${TOOL_NAME:-tapegrad}
TARGET=${TARGET:-tapegrad_gradbench}
if [ -n "${TOOL_BIN:-}" ]; then
  [ -x "$TOOL_BIN" ] || { echo "install_tool.sh: TOOL_BIN=$TOOL_BIN is not an executable" >&2; exit 1; }
  BIN=$(cd "$(dirname "$TOOL_BIN")" && pwd)/$(basename "$TOOL_BIN")
else
  BUILD=${BUILD_DIR:-$ROOT/build/gradbench}
  MARCH=${MARCH--march=native}
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_BUILD_GRADBENCH=ON \
    -DCMAKE_CXX_FLAGS="$MARCH" -DTAPEGRAD_BUILD_TESTS=OFF -DTAPEGRAD_BUILD_EXAMPLES=OFF > /dev/null
  cmake --build "$BUILD" -j "$(nproc)" --target "$TARGET"
  BIN=$BUILD/bench/gradbench/$TARGET
fi
TOOL="$GRADBENCH/tools/$TOOL_NAME"
mkdir -p "$TOOL"
cat > "$TOOL/Makefile" <<MAKEFILE
# Written by tapegrad's bench/gradbench/install_tool.sh: every eval is one program.
TAPEGRAD_TOOL=$BIN
bin/%: \$(TAPEGRAD_TOOL)
	@mkdir -p bin
	ln -sf \$(TAPEGRAD_TOOL) \$@
MAKEFILE
printf '%s\n' hello llsq lse ode kmeans gmm lstm det ba ht saddle particle > "$TOOL/evals.txt"
echo "installed $BIN as the tool $TOOL_NAME in $TOOL"
