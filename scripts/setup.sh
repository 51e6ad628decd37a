#!/usr/bin/env bash
# Installs the Debian packages tapegrad needs that are missing (via sudo when not root).
# Run by demo.sh and test.sh; safe to run again. Arguments name extra packages (test.sh adds
# the ones only its checks need).
set -euo pipefail

TAPEGRAD_PACKAGES=(
  build-essential cmake pkg-config ccache
  xtensor-dev libxtensor-blas-dev libxsimd-dev libopenblas-dev
  catch2 zlib1g-dev python3
  # Philox4x32-10 for the random ops (header-only, needed to build tapegrad only)
  librandom123-dev
  # save_npz/load_npz write and read NumPy's .npz (a zip archive) through libzip
  libzip-dev
  # the NumPy file tests check that numpy reads what tapegrad writes, and the reverse
  python3-numpy
  # the GradBench tool's evals, which the test suite builds
  nlohmann-json3-dev
  # tapegrad::distributed and its tests under mpiexec (optional: the rest builds without)
  libopenmpi-dev openmpi-bin
)
TAPEGRAD_PACKAGES+=("$@")

missing=()
for p in "${TAPEGRAD_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tapegrad: installing ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
