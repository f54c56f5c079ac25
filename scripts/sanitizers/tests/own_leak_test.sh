#!/usr/bin/env bash
# ctest lsan.own_leak_caught (ASan builds): our own leak fails the run and is named, with the
# suppressions and options every binary carries (default_options.c, lsan.supp).
# Usage: own_leak_test.sh PROGRAM
set -uo pipefail
out=$("$1" 2>&1)
rc=$?
if ((rc == 0)); then
  echo "FAIL: $1 leaked 4096 bytes and exited 0: LeakSanitizer did not report it (are leaks suppressed too widely? scripts/sanitizers/lsan.supp)"
  printf '%s\n' "$out"; exit 1
fi
if ! grep -q "detected memory leaks" <<<"$out" || ! grep -q "dsOwnLeakForTheLsanTest" <<<"$out"; then
  echo "FAIL: $1 exited $rc but LeakSanitizer's report does not name dsOwnLeakForTheLsanTest:"
  printf '%s\n' "$out"; exit 1
fi
echo "ok: our leak is reported (exit $rc) and named"
