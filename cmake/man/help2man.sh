#!/usr/bin/env bash
# One man page from a tool's own --help (help2man), plus the hand-written sections of docs/man/<page>.h2m
# (DESCRIPTION, EXAMPLES, EXIT STATUS, SEE ALSO), so that the OPTIONS cannot drift from the flags.
# Usage: help2man.sh OUT.1 VERSION H2M BINARY [SUBCOMMAND]   (run by cmake/Manpages.cmake)
set -euo pipefail
out=$1 version=$2 h2m=$3 binary=$4 sub=${5:-}
page=$(basename "$out" .1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# help2man runs "<program> --help"; a subcommand's page runs "dsbench coll --help" through a wrapper
# named like the page (help2man takes the program name from it).
if [[ -n "$sub" ]]; then
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$binary" "$sub" >"$tmp/$page"
else
  printf '#!/bin/sh\nexec "%s" "$@"\n' "$binary" >"$tmp/$page"
fi
chmod +x "$tmp/$page"
# NAME's one-line summary is the first line of the .h2m file after "[NAME]"'s "page \- ".
help2man --no-info --section=1 --version-string="$version" --source="dsperf $version" \
  --manual="dsperf manual" --include="$h2m" --output="$out.tmp" "$tmp/$page"
# help2man names the wrapper's path in the page's header comment; keep the page reproducible.
sed -i "s|$tmp/||g" "$out.tmp"
mv "$out.tmp" "$out"
