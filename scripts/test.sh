#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest.
# Arguments go to ctest, e.g. scripts/test.sh -L unit   or   scripts/test.sh -R Store
# --sanitize=address (ASan+UBSan) or --sanitize=thread (TSan) builds into build-asan/ or build-tsan/
# (see scripts/build.sh) and runs the tests there with the sanitizer options of
# scripts/sanitizers/env.sh, e.g. scripts/test.sh --sanitize=address -L 'unit|mp'
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/sanitizers/env.sh"
ds_parse_sanitize_flag "$@"
if [[ -n "$sanitize" ]]; then
  ds_sanitizer_env "$sanitize" "$root/scripts/sanitizers"  # an unknown mode stops here
fi
phase=$SECONDS
"$root/scripts/setup.sh"
echo "test: setup took $((SECONDS - phase)) s"
build=${DS_BUILD_DIR:-$(ds_build_dir_for "$sanitize" "$root")}
phase=$SECONDS
if [[ -n "$sanitize" ]]; then
  DS_BUILD_DIR=$build "$root/scripts/build.sh" --sanitize="$sanitize"
else
  "$root/scripts/build.sh"
fi
echo "test: build took $((SECONDS - phase)) s"
cd "$build"
# The long fleet suite (label fleet: 64 namespace hosts, every fault; many minutes on 2 cores) runs
# only when asked for: `scripts/test.sh -L fleet` (or `ctest -L fleet` in the build). Its smoke part
# (16 hosts, label netns) stays in the default run. So does the clean-node test (label cleannode:
# three debootstrap roots, apt from the registry, a bundle compile on its first run):
# `scripts/test.sh -L cleannode`.
if [[ " ${args[*]-} " != *fleet* && " ${args[*]-} " != *cleannode* && " ${args[*]-} " != *" -LE "* &&
      " ${args[*]-} " != *--label-exclude* ]]; then
  args+=(-LE 'fleet|cleannode')
fi
# ctest's own last lines ("Total Test time (real)") give its time; the run ends with its summary.
# Three tests at a time on a normal build: its tests wait on timeouts and peers about half the time
# (the two cores were 55 % busy at -j2; -j3 took 281 s instead of about 400 on this 2-core VM). A
# sanitizer build's tests keep two cores busy, so two. DS_TEST_JOBS sets it.
jobs=${DS_TEST_JOBS:-$([[ -n "$sanitize" ]] && echo 2 || echo 3)}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "test: DS_TEST_JOBS='$jobs' must be a positive number of tests to run at once" >&2; exit 1; }
ctest --output-on-failure --timeout 300 -j "$jobs" ${args[@]+"${args[@]}"}
