#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest.
# Arguments go to ctest, e.g. scripts/test.sh -L unit   or   scripts/test.sh -R Store
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${DS_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure --timeout 300 -j "${DS_TEST_JOBS:-2}" "$@"
