# Flag helpers shared by the benchmark scripts (bench-peers, bench-ddp-peers, verdict-calibration).
# Source it after setting `prog` (the script's name in messages):
#   usage     prints the script's header comment (line 2 up to its `set -` line) without the '# '
#   bad MSG   says "<prog>: MSG; see --help." on stderr and exits 1
#   value_of FLAG [VALUE]   prints VALUE, or stops with "FLAG needs a value" when it is missing
usage() { sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
bad() { echo "$prog: $*; see --help." >&2; exit 1; }
value_of() { [ $# -ge 2 ] || bad "$1 needs a value"; printf '%s' "$2"; }
