# Where the benchmark scripts' ranks run (bench-peers, bench-ddp-peers): the placements users start
# ranks under, as mpirun options plus a wrapper before the program. Source it, then:
#   set_placement NAME   sets place_mpi (mpirun's binding options) and place_wrap (a command before
#                        the program, maybe empty) for NAME:
#     unbound         mpirun --bind-to none (as dsrun/torchrun start them)
#     mpirun-default  mpirun's own binding (each rank on one core for 2 ranks)
#     shared-core     every rank on CPU 0 (mpirun --bind-to none taskset -c 0 ...)
#     hog             unbound, with one busy CPU hog beside the ranks (start_hog / stop_hog)
#   place_describe NAME  one line saying how NAME starts the ranks
#   start_hog, stop_hog  one busy shell loop on whichever CPU the scheduler gives it, bounded by
#                        timeout and stopped by its pid (the caller traps stop_hog on EXIT)
#   free_port            a free TCP port on 127.0.0.1 for a rendezvous
placement_names=(unbound mpirun-default shared-core hog)
place_mpi=(--bind-to none)
place_wrap=()
set_placement() {
  place_wrap=()
  case $1 in
    unbound|hog) place_mpi=(--bind-to none) ;;
    mpirun-default) place_mpi=() ;;
    shared-core) place_mpi=(--bind-to none); place_wrap=(taskset -c 0) ;;
  esac
}
place_describe() {
  case $1 in
    unbound) echo "mpirun --bind-to none" ;;
    mpirun-default) echo "mpirun's default binding: one core per rank" ;;
    shared-core) echo "every rank on CPU 0 (taskset -c 0)" ;;
    hog) echo "mpirun --bind-to none, one busy CPU hog beside the ranks" ;;
  esac
}
hog_pid=""
start_hog() { timeout 1800 sh -c 'while :; do :; done' & hog_pid=$!; }
stop_hog() { [ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null; wait "$hog_pid" 2>/dev/null; hog_pid=""; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}
