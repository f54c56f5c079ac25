#!/usr/bin/env bash
# Installs every Debian package dsperf needs that is missing. Idempotent and silent when all are
# present; runs `apt-get update` once, only when something must be installed.
#   scripts/setup.sh [--peers]
# --peers also makes sure of what the benchmark peers need (scripts/bench-peers.sh's torch peer and
# scripts/bench-ddp-peers.sh: Debian's python3-torch, which the torch tests need as well).
set -euo pipefail
peers=0
for arg in "$@"; do
  case $arg in
    --peers) peers=1 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown argument '$arg'; the only flag is --peers (the benchmark peers' packages)." >&2; exit 1 ;;
  esac
done

packages=(
  # toolchain
  g++ cmake make ninja-build pkg-config git ccache  # scripts/build.sh uses Ninja when it is there
  clang lld                      # sanitizer builds (scripts/build.sh --sanitize) and libFuzzer (scripts/fuzz.sh)
  help2man                       # man pages from the tools' --help (cmake/Manpages.cmake)
  dpkg-dev                       # cpack's .deb: dpkg-shlibdeps computes its Depends
  # DESIGN.md's dependency list
  libopenmpi-dev openmpi-bin     # MPI
  libgloo-dev                    # CPU collectives
  libcli11-dev                   # CLI
  nlohmann-json3-dev             # JSON
  libbenchmark-dev               # micro-benchmarks
  libgtest-dev libgmock-dev      # tests
  libopenblas-dev                # CPU maths
  libsqlite3-dev                 # run history
  libjs-chart.js                 # charts, embedded into HTML reports
  libhwloc-dev                   # topology
  libre2-dev                     # dsdiag explain: linear-time pattern matching
  libyaml-cpp-dev                # dsreport check: the operators' rules file (YAML, as superbench's rules)
  libfmt-dev                     # formatting
  libasio-dev                    # store event loop option
  # test tools
  iproute2 procps
  nftables                       # fleet tests (diag/tests/fleet.sh): unreachable peers and packet loss
  iptables libnetfilter-queue-dev  # fleet tests: delay through NFQUEUE (ds_fleet_delay; no sch_netem here)
  debootstrap                    # cleannode test: a Debian minbase root for the .deb, tarball and bundle
  patchelf                       # scripts/bundle.sh: RPATH $ORIGIN/../lib in the relocatable bundle
  libblas3                       # scripts/bundle.sh: the netlib BLAS of the bundle (-DDS_BLAS=reference)
  python3-jsonschema             # tests: our JSON outputs validate against reports/schema/dsperf.schema.json
  python3-torch                  # torch tests: the real c10d TCPStore, torchrun, torch.distributed.launch (1.13)
  chromium                       # browser tests: headless rendering of reports
  slurm-wlm munge                # slurm tests: a real one-node Slurm (scripts/slurm-fixture.sh)
  libxml2-utils                  # tests: xmllint validates JUnit files against reports/export/junit.xsd
  prometheus                     # prometheus tests: promtool check metrics reads dsreport export's text;
                                 # promtool check/test rules runs the shipped alerting rules and dashboard queries
  python3-yaml                   # prometheus tests: the alerting rules' expressions, read by check_dashboard.py
  python3-prometheus-client      # prometheus tests: prometheus_client's text and OpenMetrics parsers
)
# The benchmark peers: torch.distributed (gloo) and PyTorch DDP, on the same system libgloo as ours.
peer_packages=(python3-torch)
((peers)) && packages+=("${peer_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

echo "setup: installing ${#missing[@]} missing package(s): ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
