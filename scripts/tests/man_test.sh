#!/usr/bin/env bash
# ctest man.render: every man page the build made (cmake/Manpages.cmake) renders with `man -l` and no
# warning from man or groff (--warnings), and has the hand-written sections of docs/man/<page>.h2m and
# the OPTIONS help2man took from the tool's --help.
# Usage: man_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:?usage: man_test.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
sanitize=$(sed -n 's/^DS_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
if [[ -n "$sanitize" ]]; then
  echo "SKIP: $build is a sanitizer build (DS_SANITIZE=$sanitize), which makes no man pages (cmake/Manpages.cmake); run this test in the plain build"
  exit 77
fi
pages=("$build"/man/man1/*.1)
[[ -e "${pages[0]}" ]] || { echo "FAIL: no man pages in $build/man/man1 (is help2man installed? scripts/setup.sh installs it)"; exit 1; }
want=$(ls "$src"/docs/man/*.h2m | wc -l)
fails=0
if ((${#pages[@]} != want)); then
  echo "FAIL: ${#pages[@]} pages in $build/man/man1 but $want docs/man/*.h2m files"; fails=1
fi
for page in "${pages[@]}"; do
  name=$(basename "$page" .1)
  err=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l "$page" 2>&1 >"$build/man/$name.txt")
  rc=$?
  if ((rc != 0)) || [[ -n "$err" ]]; then
    echo "FAIL: man -l $page (exit $rc) warned:"; printf '%s\n' "$err" | head -10; fails=$((fails + 1)); continue
  fi
  for section in NAME SYNOPSIS DESCRIPTION OPTIONS EXAMPLES "EXIT STATUS" "SEE ALSO"; do
    grep -q "^$section\$" "$build/man/$name.txt" || {
      echo "FAIL: $name.1 has no $section section (docs/man/$name.h2m or the tool's --help)"; fails=$((fails + 1)); }
  done
  grep -q -- '--help' "$build/man/$name.txt" || { echo "FAIL: $name.1 lists no options"; fails=$((fails + 1)); }
  echo "ok: $name.1"
done
((fails == 0)) && echo "man: PASS (${#pages[@]} pages)" || echo "man: FAIL ($fails problems)"
exit $((fails > 0))
