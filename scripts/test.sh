#!/usr/bin/env bash
# Installs what is missing, builds the library and its tests, runs them with ctest, then
# installs the library into a scratch prefix and builds a separate consumer project against it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build/test}
JOBS=$(nproc)
# -O2: the suite builds in a fraction of -O3's time and still runs fast.
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DTAPEGRAD_BUILD_TESTS=ON -DTAPEGRAD_BUILD_EXAMPLES=ON
cmake --build "$BUILD_DIR" -j "$JOBS"
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS")

# The package config works for an outside project.
PREFIX="$PWD/$BUILD_DIR/install-prefix"
rm -rf "$PREFIX" "$BUILD_DIR/consumer"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" > /dev/null
cmake -S test/consumer -B "$BUILD_DIR/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$BUILD_DIR/consumer" -j "$JOBS" > /dev/null
"$BUILD_DIR/consumer/consumer"
