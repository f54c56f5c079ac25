#!/bin/sh
# Two "hosts" for dsdiag's netns tests: network namespaces <name>a and <name>b joined by a veth
# pair, with addresses 10.77.<net>.1/24 (a) and 10.77.<net>.2/24 (b). Traffic stays inside.
#   netns.sh setup <name> <net> [delay_ms]   (delay: tc netem on both veth ends, else a tbf rate limit)
#   netns.sh teardown <name>
# Exit 4 from setup: namespaces cannot be made here (not root, no ip, no CAP_NET_ADMIN).
set -u
cmd=$1 name=$2
case "$cmd" in
setup)
  net=$3 delay=${4:-0}
  command -v ip >/dev/null 2>&1 || { echo "netns.sh: 'ip' (iproute2) is not installed" >&2; exit 4; }
  ip netns add "${name}a" 2>/dev/null || { echo "netns.sh: cannot create network namespaces (needs root/CAP_NET_ADMIN)" >&2; exit 4; }
  set -e
  ip netns add "${name}b"
  ip link add "${name}0" type veth peer name "${name}1"
  ip link set "${name}0" netns "${name}a"
  ip link set "${name}1" netns "${name}b"
  ip -n "${name}a" addr add "10.77.${net}.1/24" dev "${name}0"
  ip -n "${name}b" addr add "10.77.${net}.2/24" dev "${name}1"
  for ns in a b; do ip -n "${name}${ns}" link set lo up; done
  ip -n "${name}a" link set "${name}0" up
  ip -n "${name}b" link set "${name}1" up
  if [ "$delay" != 0 ]; then
    # netem adds the delay; where the kernel has no sch_netem, a tbf rate limit (20 mbit/s) still
    # makes the link slow, in bandwidth instead of latency. Prints which one was used.
    set +e
    if ip netns exec "${name}a" tc qdisc add dev "${name}0" root netem delay "${delay}ms" 2>/dev/null &&
       ip netns exec "${name}b" tc qdisc add dev "${name}1" root netem delay "${delay}ms" 2>/dev/null; then
      echo "shaped: netem delay ${delay}ms"
    elif ip netns exec "${name}a" tc qdisc add dev "${name}0" root tbf rate 20mbit burst 16kbit latency 400ms 2>/dev/null &&
         ip netns exec "${name}b" tc qdisc add dev "${name}1" root tbf rate 20mbit burst 16kbit latency 400ms 2>/dev/null; then
      echo "shaped: tbf rate 20mbit (tc netem is not available in this kernel: no sch_netem)"
    else
      echo "netns.sh: neither tc netem nor tc tbf is available" >&2
      exit 5
    fi
  fi
  ;;
teardown)
  ip netns del "${name}a" 2>/dev/null
  ip netns del "${name}b" 2>/dev/null
  exit 0
  ;;
*)
  echo "usage: netns.sh setup <name> <net> [delay_ms] | teardown <name>" >&2
  exit 2
  ;;
esac
