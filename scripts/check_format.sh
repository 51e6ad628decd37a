#!/usr/bin/env bash
# Fails when a C++ file of the project differs from what clang-format 14 (Debian 12's) makes of
# it with the project's .clang-format. Usage: scripts/check_format.sh [clang-format binary]
set -euo pipefail
cd "$(dirname "$0")/.."
FORMAT=${1:-clang-format-14}
mapfile -t files < <(find include src test examples bench \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) -not -path '*/build*' | sort)
# One run over every file: clang-format names each file it would change in its warnings.
mapfile -t bad < <("$FORMAT" --dry-run -Werror "${files[@]}" 2>&1 |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} of ${#files[@]} files are not formatted; run:"
  echo "  $FORMAT -i ${bad[*]}"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
