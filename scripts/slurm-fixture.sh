#!/usr/bin/env bash
# A throwaway one-node Slurm (munged + slurmctld + slurmd from Debian's slurm-wlm and munge) for the
# `slurm` tests: everything lives under DIR, nothing touches /etc/slurm or the system munge.
#   scripts/slurm-fixture.sh start DIR   starts it and writes DIR/env (source it: SLURM_CONF, ...)
#   scripts/slurm-fixture.sh stop DIR    stops the daemons it started (by their pid files)
# `start` exits 77 with a reason on stderr (and in DIR/skip-reason) where a daemon cannot start:
# packages missing, not root, no free ports. The tests then skip with that reason.
set -uo pipefail
cmd=${1:?usage: slurm-fixture.sh start|stop DIR}
dir=${2:?usage: slurm-fixture.sh start|stop DIR}

skip() {
  mkdir -p "$dir"
  echo "slurm fixture: $*" | tee "$dir/skip-reason" >&2
  exit 77
}

stop() {
  for d in slurmd slurmctld munged; do
    local pidfile="$dir/$d.pid"
    [[ -s $pidfile ]] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

if [[ $cmd == stop ]]; then
  stop
  exit 0
fi
[[ $cmd == start ]] || { echo "usage: slurm-fixture.sh start|stop DIR" >&2; exit 2; }

for b in munged mungekey slurmctld slurmd srun sbatch sinfo; do
  command -v "$b" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$b" >/dev/null 2>&1 ||
    skip "'$b' is not installed; run scripts/setup.sh (it installs slurm-wlm and munge)"
done
export PATH=$PATH:/usr/sbin
[[ $(id -u) == 0 ]] || skip "slurmd must run as root to start tasks as the submitting user; run the slurm tests as root (CI does)"
plugins=$(dirname "$(find /usr/lib -name 'select_cons_tres.so' -path '*slurm*' 2>/dev/null | head -1)")
[[ -d $plugins ]] || skip "no Slurm plugin directory (select_cons_tres.so) found under /usr/lib"

stop  # daemons left by an earlier run that was killed before its cleanup
rm -rf "$dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 700 "$dir/munge"
host=$(hostname -s)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ctld_port=$(free_port) && slurmd_port=$(free_port) || skip "cannot find free TCP ports for slurmctld and slurmd"
cpus=8

mungekey -c -k "$dir/munge/munge.key" >/dev/null 2>&1 || skip "mungekey could not create a key in $dir/munge"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" --force 2>>"$dir/munged.log" ||
  skip "munged did not start: $(tail -3 "$dir/munged.log" | tr '\n' ' ')"

cat >"$dir/slurm.conf" <<CONF
ClusterName=dsperf
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
PluginDir=$plugins
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
KillWait=2
InactiveLimit=0
MinJobAge=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES OverSubscribe=FORCE MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" -i >>"$dir/slurmctld.out" 2>&1 ||
  { stop; skip "slurmctld did not start: $(tail -3 "$dir/slurmctld.log" 2>/dev/null | tr '\n' ' ')"; }
slurmd -f "$SLURM_CONF" -N "$host" >>"$dir/slurmd.out" 2>&1 ||
  { stop; skip "slurmd did not start: $(tail -3 "$dir/slurmd.log" 2>/dev/null | tr '\n' ' ')"; }
# Wait (bounded) until the node is idle.
for _ in $(seq 1 60); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -1)
  [[ $state == idle* ]] && break
  sleep 0.5
done
if [[ $state != idle* ]]; then
  reason="node state '$state' after 30 s: $(tail -3 "$dir/slurmd.log" 2>/dev/null | tr '\n' ' ')"
  stop
  skip "$reason"
fi
cat >"$dir/env" <<ENV
export SLURM_CONF=$SLURM_CONF
export PATH=\$PATH:/usr/sbin
ENV
echo "slurm fixture: up in $dir (node $host, $cpus CPUs, ctld port $ctld_port)"
