#!/usr/bin/env bash
# A fleet of "hosts" for dsdiag's fleet tests: N network namespaces on one bridge that lives in a
# switch namespace of its own (nothing is made in the root namespace), host i at 10.79.<net>.<i+1>/24
# on an interface eth0, each command run with its own hostname fleet<i> (zero-padded: fleet03).
# Faults are injected per host: a slow NIC, peers it cannot reach, an MTU mismatch, a renamed
# interface, packet loss, a CPU quota. docs/dev/fleet-testbed.md describes each one.
#
#   fleet.sh setup NAME N [--net K] [--mtu M] [--ipv6] [--owner PID]
#   fleet.sh exec NAME I -- COMMAND [ARG...]     run on host I (its netns, hostname, CPU cgroup)
#   fleet.sh addr NAME I                          host I's address
#   fleet.sh fault NAME slow I [RATE]             tc tbf RATE (default 30mbit) both ways on I's link
#   fleet.sh fault NAME cut I J[,J...] [out|both|route|reject]
#        out: new TCP connections from I to J dropped (J can still connect to I);
#        both: every packet between I and J dropped, both ways; route: blackhole routes on I (I's
#        packets to J vanish, so TCP fails both ways); reject: I's connections to J are refused
#        with an ICMP error (fails fast instead of timing out)
#   fleet.sh fault NAME mtu I M [--switch]        eth0 of I at MTU M (TCP adapts through the MSS);
#        --switch: the switch port of I at M instead, and an nftables rule there that drops every
#        frame larger than M, both ways (connections open, then large transfers stall)
#   fleet.sh fault NAME ifname I NEW              rename I's eth0 to NEW (e.g. ens5)
#   fleet.sh fault NAME loss I PERCENT            drop PERCENT% of I's packets, both ways (nftables)
#   fleet.sh fault NAME cpu I PERCENT             the processes of host I (running and started later)
#                                                 get PERCENT% of one CPU (cgroup v1 cfs_quota_us or v2 cpu.max)
#   fleet.sh fault NAME delay I MS                MS more milliseconds each way on I's packets (a
#                                                 userspace queue: ds_fleet_delay behind iptables NFQUEUE)
#   fleet.sh teardown NAME                        kills what still runs on the hosts, removes all
#   fleet.sh sweep                                tears down fleets whose owner process is gone
#
# Exit codes: 0 done; 2 bad usage; 4 network namespaces cannot be made here (tests skip with the
# message); 5 this fault cannot be made on this machine (the message says what is missing); 1 a
# step failed (the message names it).
#
# Delay: this kernel has no sch_netem, nftables has no delay statement (and no queue statement
# here: CONFIG_NFT_QUEUE is off), tbf's "latency" only bounds its queue, and sch_fq (for BPF
# departure-time pacing) is not built. So `fault delay` sends the host's packets through iptables'
# NFQUEUE target (xtables, which this kernel has) to ds_fleet_delay (built beside the tests from
# diag/tests/fleet_delay.cpp; $DS_FLEET_DELAY or $DS_TEST_DIR/ds_fleet_delay), which holds each one
# for MS ms. Every packet of that host then crosses to userspace: fine for one host, not for many.
set -u
set -o pipefail

state_root=${DS_FLEET_STATE:-/run/dsfleet}
cg_name=dsfleet

die() { echo "fleet.sh: $1" >&2; exit "${2:-1}"; }
usage() { sed -n '7,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# Namespace names: <NAME>s is the switch, <NAME>h<i> host i.
sw_ns() { echo "${1}s"; }
host_ns() { echo "${1}h${2}"; }

load() {  # load NAME: reads the fleet's state (n, net, width), or fails with a sentence
  local dir="$state_root/$1"
  [[ -f "$dir/n" ]] || die "no fleet named '$1' (no $dir/n): run 'fleet.sh setup $1 N' first" 2
  n=$(<"$dir/n") net=$(<"$dir/net") width=$(<"$dir/width")
}

host_index() {  # host_index I: checks I is a host of the loaded fleet
  [[ "$1" =~ ^[0-9]+$ ]] && ((10#$1 < n)) || die "host '$1' is not in fleet '$name' (hosts 0..$((n - 1)))" 2
  echo $((10#$1))
}

hostname_of() { printf "fleet%0${width}d" "$1"; }
addr_of() { echo "10.79.$net.$(($1 + 1))"; }

# The cgroup parent that has the cpu controller: cgroup v1 (/sys/fs/cgroup/cpu) or v2 (cpu in the
# unified hierarchy's controllers). Prints "v1 DIR" or "v2 DIR", nothing when neither.
cpu_cgroup_root() {
  local d
  for d in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct; do
    [[ -f "$d/cpu.cfs_quota_us" ]] && { echo "v1 $d"; return; }
  done
  d=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
  if [[ -n "$d" && -f "$d/cgroup.controllers" ]] && grep -qw cpu "$d/cgroup.controllers"; then
    echo "v2 $d"
  fi
}

teardown() {  # teardown NAME: idempotent; also for half-made fleets
  local name=$1 dir="$state_root/$1" i ns pids cg
  local count=0
  [[ -f "$dir/n" ]] && count=$(<"$dir/n")
  # What still runs on the hosts (ranks of a failed test) goes first: a namespace with processes in
  # it would outlive `ip netns del`.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}(s|h[0-9]+)$"); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
  done
  if [[ -f "$dir/cgroup" ]]; then
    cg=$(<"$dir/cgroup")
    for i in "$cg"/h*; do [[ -d "$i" ]] && rmdir "$i" 2>/dev/null; done
    rmdir "$cg" 2>/dev/null
  fi
  {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}(s|h[0-9]+)$"); do
      echo "netns del $ns"
    done
  } | ip -force -batch - >/dev/null 2>&1
  rm -rf "$dir"
  return 0
}

sweep() {  # tears down every fleet whose owner process has gone (a killed test)
  local dir owner
  for dir in "$state_root"/*/; do
    [[ -f "$dir/owner" ]] || continue
    owner=$(<"$dir/owner")
    if ! kill -0 "$owner" 2>/dev/null; then
      echo "fleet.sh: removing stale fleet $(basename "$dir") (its owner, pid $owner, is gone)" >&2
      teardown "$(basename "$dir")"
    fi
  done
}

setup() {
  local name=$1 count=$2
  shift 2
  local mtu=1500 ipv6=0 owner=$PPID
  net=0
  while (($#)); do
    case $1 in
      --net) net=${2:-}; shift 2 ;;
      --mtu) mtu=${2:-}; shift 2 ;;
      --ipv6) ipv6=1; shift ;;
      --owner) owner=${2:-}; shift 2 ;;
      *) die "setup: unknown option '$1' (options: --net K, --mtu M, --ipv6, --owner PID)" 2 ;;
    esac
  done
  [[ "$name" =~ ^[A-Za-z][A-Za-z0-9]{0,15}$ ]] ||
    die "setup: the fleet name '$name' must be a letter then up to 15 letters or digits" 2
  [[ "$count" =~ ^[0-9]+$ ]] && ((count >= 2 && count <= 250)) ||
    die "setup: the host count '$count' must be a number from 2 to 250" 2
  [[ "$net" =~ ^[0-9]+$ ]] && ((net <= 255)) || die "setup: --net '$net' must be 0..255 (the third octet of 10.79.K.0/24)" 2
  [[ "$mtu" =~ ^[0-9]+$ ]] && ((mtu >= 576 && mtu <= 65000)) || die "setup: --mtu '$mtu' must be 576..65000" 2
  [[ "$owner" =~ ^[0-9]+$ ]] || die "setup: --owner '$owner' must be a process id" 2
  command -v ip >/dev/null 2>&1 || die "'ip' (iproute2) is not installed; run scripts/setup.sh" 4
  command -v unshare >/dev/null 2>&1 || die "'unshare' (util-linux) is not installed" 4
  sweep
  # Every namespace's ARP entries count against one kernel-wide limit here (gc_thresh3, 1024 by
  # default): a 64-host fleet has 4032 of them, and past the limit ARP fails ("neighbor table
  # overflow" in dmesg) and connects time out at random. Raise it for the fleet (never lower it).
  local need=$((count * count * 2 + 1024)) cur
  cur=$(sysctl -n net.ipv4.neigh.default.gc_thresh3 2>/dev/null || echo 0)
  if ((cur < need)); then
    sysctl -qw net.ipv4.neigh.default.gc_thresh1=$((need / 8)) net.ipv4.neigh.default.gc_thresh2=$((need / 2)) \
      net.ipv4.neigh.default.gc_thresh3=$need 2>/dev/null ||
      echo "fleet.sh: could not raise net.ipv4.neigh.default.gc_thresh3 to $need (it is $cur): a fleet this large may see ARP failures" >&2
  fi
  if [[ -e "$state_root/$name" ]] || ip netns list 2>/dev/null | awk '{print $1}' | grep -qE "^${name}(s|h[0-9]+)$"; then
    die "setup: a fleet named '$name' exists already; run 'fleet.sh teardown $name' first"
  fi
  mkdir -p "$state_root/$name" 2>/dev/null ||
    die "cannot create $state_root/$name for the fleet's state (needs root): network namespaces cannot be made here" 4
  local dir="$state_root/$name"
  echo "$count" >"$dir/n"
  echo "$net" >"$dir/net"
  echo "$owner" >"$dir/owner"
  width=2
  ((count > 100)) && width=3
  echo "$width" >"$dir/width"
  local sw i t0=$EPOCHREALTIME
  sw=$(sw_ns "$name")
  if ! ip netns add "$sw" 2>"$dir/err"; then
    local why
    why=$(<"$dir/err")
    teardown "$name"
    die "cannot create network namespaces here (needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN): $why" 4
  fi
  # One ip process per namespace, commands batched.
  {
    for ((i = 0; i < count; i++)); do echo "netns add $(host_ns "$name" "$i")"; done
  } | ip -batch - >"$dir/err" 2>&1 || { local e; e=$(<"$dir/err"); teardown "$name"; die "setup: creating the host namespaces failed: $e"; }
  local sysctls=()
  ((ipv6)) || sysctls=(net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1)
  # Every host's switch port is p<i> on bridge br0 in the switch namespace; the host's end is eth0.
  # IPv6 is off in the switch (its ports carry no address) and, unless --ipv6, on the hosts.
  ip netns exec "$sw" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1
  {
    echo "link add br0 type bridge"
    echo "link set br0 mtu $mtu"
    echo "link set br0 up"
    echo "link set lo up"
    for ((i = 0; i < count; i++)); do
      echo "link add p$i mtu $mtu type veth peer name eth0 mtu $mtu netns $(host_ns "$name" "$i")"
      echo "link set p$i master br0"
      echo "link set p$i up"
    done
  } | ip -n "$sw" -batch - >"$dir/err" 2>&1 || { local e; e=$(<"$dir/err"); teardown "$name"; die "setup: building the switch failed: $e"; }
  for ((i = 0; i < count; i++)); do
    local h
    h=$(host_ns "$name" "$i")
    ((${#sysctls[@]})) && ip netns exec "$h" sysctl -q -w "${sysctls[@]}" >/dev/null 2>&1
    printf 'link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\n' "$(addr_of "$i")" |
      ip -n "$h" -batch - >"$dir/err" 2>&1 || { local e; e=$(<"$dir/err"); teardown "$name"; die "setup: configuring host $i failed: $e"; }
  done
  local secs
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.2f", b - a}')
  echo "fleet $name: $count hosts $(hostname_of 0)..$(hostname_of $((count - 1))) at 10.79.$net.1-$count/24 on eth0, bridge br0 in namespace $sw, MTU $mtu; made in $secs s"
}

nft_host() {  # nft_host NS RULES...: nftables rules in the host's table "inet fleet"
  local ns=$1
  shift
  command -v nft >/dev/null 2>&1 ||
    die "this fault needs nftables ('nft'), which is not installed: apt-get install nftables (scripts/setup.sh does)" 5
  {
    echo "table inet fleet {"
    echo "  chain in { type filter hook input priority 0; }"
    echo "  chain out { type filter hook output priority 0; }"
    echo "}"
    printf '%s\n' "$@"
  } | ip netns exec "$ns" nft -f - || die "nft rules for namespace $ns were refused (see above)" 5
}

peer_list() {  # peer_list I J[,J...]: validates the peers, prints their addresses
  local i=$1 j out=()
  IFS=, read -ra js <<<"$2"
  ((${#js[@]})) || die "fault cut: name at least one peer of host $i (e.g. 3 or 3,5,7)" 2
  for j in "${js[@]}"; do
    j=$(host_index "$j") || exit 2
    ((j != i)) || die "fault cut: host $i cannot be cut from itself" 2
    out+=("$(addr_of "$j")")
  done
  echo "${out[*]}"
}

fault() {
  local name=$1 kind=${2:-}
  [[ -n "$kind" ]] || usage
  shift 2
  load "$name"
  [[ $# -ge 1 ]] || die "fault $kind: name the host (0..$((n - 1)))" 2
  local i h sw
  i=$(host_index "$1") || exit 2
  shift
  h=$(host_ns "$name" "$i")
  sw=$(sw_ns "$name")
  case $kind in
    slow)
      local rate=${1:-30mbit}
      [[ "$rate" =~ ^[0-9]+(bit|kbit|mbit|gbit)$ ]] || die "fault slow: rate '$rate' must look like 30mbit (bit, kbit, mbit, gbit)" 2
      # Egress of eth0 is what host i sends; egress of its switch port is what it receives.
      ip -n "$h" link show eth0 >/dev/null 2>&1 || die "fault slow: host $i has no eth0 (renamed?); apply slow before ifname"
      tc -n "$h" qdisc replace dev eth0 root tbf rate "$rate" burst 64kb latency 400ms &&
        tc -n "$sw" qdisc replace dev "p$i" root tbf rate "$rate" burst 64kb latency 400ms ||
        die "fault slow: tc tbf was refused on host $i's link (is sch_tbf in the kernel?)" 5
      echo "fault: host $i ($(hostname_of "$i")) NIC limited to $rate both ways (tc tbf)"
      ;;
    cut)
      local addrs how=${2:-out} a rules=()
      addrs=$(peer_list "$i" "${1:-}") || exit 2
      case $how in
        out)
          for a in $addrs; do rules+=("add rule inet fleet out ip daddr $a tcp flags & (syn|ack) == syn drop"); done
          nft_host "$h" "${rules[@]}" ;;
        both)
          for a in $addrs; do
            rules+=("add rule inet fleet out ip daddr $a drop" "add rule inet fleet in ip saddr $a drop")
          done
          nft_host "$h" "${rules[@]}" ;;
        reject)
          for a in $addrs; do rules+=("add rule inet fleet out ip daddr $a tcp flags & (syn|ack) == syn reject with tcp reset"); done
          nft_host "$h" "${rules[@]}" ;;
        route)
          for a in $addrs; do
            ip -n "$h" route add blackhole "$a/32" || die "fault cut: the blackhole route to $a on host $i was refused"
          done ;;
        *) die "fault cut: '$how' is not a way to cut (out, both, route or reject)" 2 ;;
      esac
      echo "fault: host $i ($(hostname_of "$i")) cut from ${1} ($how)"
      ;;
    mtu)
      local m=${1:-} where=eth0 ns=$h
      [[ "$m" =~ ^[0-9]+$ ]] && ((m >= 576 && m <= 65000)) || die "fault mtu: MTU '$m' must be 576..65000" 2
      if [[ "${2:-}" == --switch ]]; then
        where=p$i ns=$sw
      elif [[ -n "${2:-}" ]]; then
        die "fault mtu: unknown option '$2' (only --switch)" 2
      fi
      ip -n "$ns" link set "$where" mtu "$m" || die "fault mtu: setting MTU $m on $where of host $i was refused"
      if [[ $where != eth0 ]]; then
        # The port's MTU alone is a leaky black hole: the kernel forwards a GSO packet (TCP's large
        # segment, cut into frames only at a real NIC) between veths and across the bridge without
        # checking it against the port's MTU, so only what TCP happens to send unsegmented dies and
        # a transfer stalls some of the time. A switch drops every oversized frame; so does this rule
        # (the bridge's forward hook sees a GSO packet's whole length).
        command -v nft >/dev/null 2>&1 ||
          die "fault mtu --switch needs nftables ('nft'), which is not installed: apt-get install nftables (scripts/setup.sh does)" 5
        printf '%s\n' "table bridge fleet_mtu_p$i {" \
          "  chain forward { type filter hook forward priority 0;" \
          "    iifname \"p$i\" meta length > $m drop; oifname \"p$i\" meta length > $m drop; }" "}" |
          ip netns exec "$sw" nft -f - || die "fault mtu: the nft rule that drops frames over $m on host $i's switch port was refused (see above)" 5
      fi
      echo "fault: host $i ($(hostname_of "$i")) MTU $m on $([[ $where == eth0 ]] && echo eth0 || echo 'its switch port')"
      ;;
    ifname)
      local new=${1:-}
      [[ "$new" =~ ^[a-z][a-z0-9]{0,14}$ ]] || die "fault ifname: '$new' is not an interface name (e.g. ens5)" 2
      ip -n "$h" link set eth0 down && ip -n "$h" link set eth0 name "$new" && ip -n "$h" link set "$new" up ||
        die "fault ifname: renaming host $i's eth0 to $new failed"
      echo "fault: host $i ($(hostname_of "$i")) has $new instead of eth0"
      ;;
    loss)
      local p=${1:-}
      [[ "$p" =~ ^[0-9]+$ ]] && ((p >= 1 && p <= 100)) || die "fault loss: percent '$p' must be 1..100" 2
      nft_host "$h" "add rule inet fleet in ip saddr 10.79.$net.0/24 numgen random mod 100 < $p drop" \
        "add rule inet fleet out ip daddr 10.79.$net.0/24 numgen random mod 100 < $p drop"
      echo "fault: host $i ($(hostname_of "$i")) drops $p% of its packets both ways (nftables numgen random)"
      ;;
    cpu)
      local p=${1:-} root ver cg pid
      [[ "$p" =~ ^[0-9]+$ ]] && ((p >= 1 && p <= 1000)) || die "fault cpu: percent '$p' must be 1..1000 (of one CPU)" 2
      read -r ver root <<<"$(cpu_cgroup_root)"
      [[ -n "${ver:-}" ]] || die "fault cpu: no cgroup with the cpu controller (neither /sys/fs/cgroup/cpu nor cgroup v2 with cpu)" 5
      cg=$root/$cg_name/$name/h$i
      if [[ $ver == v2 ]]; then
        # v2 hands a controller down only where every parent enables it in cgroup.subtree_control.
        mkdir -p "$root/$cg_name/$name" || die "fault cpu: cannot create $root/$cg_name/$name"
        echo +cpu >"$root/cgroup.subtree_control" 2>/dev/null
        echo +cpu >"$root/$cg_name/cgroup.subtree_control" 2>/dev/null
        echo +cpu >"$root/$cg_name/$name/cgroup.subtree_control" 2>/dev/null
        mkdir -p "$cg" && echo "$((p * 1000)) 100000" >"$cg/cpu.max" ||
          die "fault cpu: cgroup v2 refused cpu.max in $cg (is +cpu allowed in $root's cgroup.subtree_control?)" 5
      else
        mkdir -p "$cg" && echo 100000 >"$cg/cpu.cfs_period_us" && echo "$((p * 1000))" >"$cg/cpu.cfs_quota_us" ||
          die "fault cpu: cgroup v1 refused cpu.cfs_quota_us in $cg" 5
      fi
      echo "$root/$cg_name/$name" >"$state_root/$name/cgroup"
      echo "$cg" >"$state_root/$name/cg$i"
      # Processes already on the host move now; `exec` puts later ones there.
      for pid in $(ip netns pids "$h" 2>/dev/null); do echo "$pid" >"$cg/cgroup.procs" 2>/dev/null; done
      echo "fault: host $i ($(hostname_of "$i")) limited to $p% of one CPU (cgroup $ver $cg)"
      ;;
    delay)
      local ms=${1:-} bin ipt k
      [[ "$ms" =~ ^[0-9]+$ ]] && ((ms >= 1 && ms <= 10000)) || die "fault delay: '$ms' must be 1..10000 milliseconds" 2
      bin=${DS_FLEET_DELAY:-${DS_TEST_DIR:-}/ds_fleet_delay}
      [[ -x "$bin" ]] || die "fault delay: the kernel has no sch_netem, so delay needs the userspace queue ds_fleet_delay, which is not at '$bin' (build it: cmake --build build --target ds_fleet_delay, needs libnetfilter-queue-dev; then set DS_TEST_DIR=build/tests or DS_FLEET_DELAY)" 5
      ipt=$(command -v iptables-legacy || command -v iptables) ||
        die "fault delay: needs iptables (its NFQUEUE target; nftables' queue statement is not in this kernel): apt-get install iptables" 5
      [[ -f "$state_root/$name/delay$i" ]] && die "fault delay: host $i is delayed already"
      # The queue's reader first: NFQUEUE drops what no program reads.
      ip netns exec "$h" setsid "$bin" --queue 0 --ms "$ms" >"$state_root/$name/delay$i" 2>&1 </dev/null &
      for ((k = 0; k < 50; k++)); do
        grep -q "ds_fleet_delay: queue" "$state_root/$name/delay$i" 2>/dev/null && break
        kill -0 $! 2>/dev/null || break
        sleep 0.1
      done
      grep -q "ds_fleet_delay: queue" "$state_root/$name/delay$i" ||
        die "fault delay: ds_fleet_delay did not start on host $i: $(cat "$state_root/$name/delay$i")" 5
      ip netns exec "$h" "$ipt" -A OUTPUT -d "10.79.$net.0/24" -j NFQUEUE --queue-num 0 &&
        ip netns exec "$h" "$ipt" -A INPUT -s "10.79.$net.0/24" -j NFQUEUE --queue-num 0 ||
        die "fault delay: iptables refused the NFQUEUE rules on host $i (is xt_NFQUEUE in the kernel?)" 5
      echo "fault: host $i ($(hostname_of "$i")) delays its packets by $ms ms each way (NFQUEUE, ds_fleet_delay)"
      ;;
    *) die "fault: unknown fault '$kind' (slow, cut, mtu, ifname, loss, cpu, delay)" 2 ;;
  esac
}

cmd=${1:-}
case $cmd in
  setup)
    [[ $# -ge 3 ]] || usage
    setup "${@:2}" ;;
  exec)
    [[ $# -ge 5 && "$4" == -- ]] || usage
    name=$2
    load "$name"
    i=$(host_index "$3") || exit 2
    shift 4
    [[ -f "$state_root/$name/cg$i" ]] && echo $$ >"$(<"$state_root/$name/cg$i")/cgroup.procs"
    # `ip netns exec` mounts a fresh sysfs (the namespace's /sys/class/net), which hides the cgroup
    # file systems; a real host has them, and dsdiag reads its CPU limit there. So the host's command
    # mounts the cpu hierarchy again at the same path (private to its mount namespace; best effort).
    read -r cg_ver cg_dir <<<"$(cpu_cgroup_root)"
    cg_mount=:
    if [[ ${cg_ver:-} == v1 ]]; then
      cg_mount="mount -t tmpfs dsfleet-cgroup /sys/fs/cgroup && mkdir -p $cg_dir && mount -t cgroup -o $(basename "$cg_dir") cgroup $cg_dir"
    elif [[ ${cg_ver:-} == v2 ]]; then
      [[ $cg_dir == /sys/fs/cgroup ]] || cg_mount="mount -t tmpfs dsfleet-cgroup /sys/fs/cgroup && mkdir -p $cg_dir && "
      [[ $cg_mount == : ]] && cg_mount=""
      cg_mount+="mount -t cgroup2 cgroup2 $cg_dir"
    fi
    # No fork from here on: the pid the caller started becomes COMMAND's pid (tests signal it).
    exec ip netns exec "$(host_ns "$name" "$i")" unshare --uts sh -c \
      '{ eval "$2"; } 2>/dev/null; hostname "$1" && shift 2 && exec "$@"' sh \
      "$(hostname_of "$i")" "$cg_mount" "$@" ;;
  addr)
    [[ $# -eq 3 ]] || usage
    name=$2
    load "$name"
    i=$(host_index "$3") || exit 2
    addr_of "$i" ;;
  fault)
    [[ $# -ge 3 ]] || usage
    name=$2
    fault "${@:2}" ;;
  teardown)
    [[ $# -eq 2 ]] || usage
    teardown "$2" ;;
  sweep) sweep ;;
  -h | --help) usage ;;
  *) echo "fleet.sh: unknown command '${cmd}'" >&2; usage ;;
esac
