# Sourced by the bundle's launcher (bin/<tool>) and by run-gpu-checks.sh: finds the libraries the
# node must provide (share/dsperf/runtime-libs lists those the tools need, e.g. libnccl.so.2) and
# puts their folders on LD_LIBRARY_PATH. See launch.sh for the search order.

# Sets ds_found_dir to the folder holding library $1 (a file name such as libnccl.so.2), searched in
# the order of launch.sh ($2: the override's value, $3: its variable's name), and ds_found_from to
# where it came from. Returns 1 when not found.
ds_bundle_locate() {
  local lib=$1 override=$2 py dir
  ds_found_from=""
  ds_found_dir=""
  if [[ -n "$override" ]]; then
    if [[ -f "$override" ]]; then dir=$(dirname "$override"); else dir=$override; fi
    if [[ -e "$dir/$lib" ]]; then
      ds_found_from="\$${3}"
      ds_found_dir=$dir
      return 0
    fi
    echo "dsperf bundle: $3=$override holds no $lib; looking in the usual places instead" >&2
  fi
  py=${DS_PYTHON:-python3}
  if command -v "$py" >/dev/null 2>&1; then
    # nvidia is a namespace package: nvidia/nccl/lib (nvidia-nccl-cu13), nvidia/cublas/lib or
    # nvidia/cu13/lib (CUDA 13 wheels).
    local roots
    roots=$("$py" -c 'import nvidia, sys; print("\n".join(nvidia.__path__))' 2>/dev/null) || roots=""
    local r
    while IFS= read -r r; do
      [[ -z "$r" ]] && continue
      dir=$(find "$r" -maxdepth 3 -name "$lib" -printf '%h\n' 2>/dev/null | sort | head -n 1)
      if [[ -n "$dir" ]]; then
        ds_found_from="$py's nvidia packages"
        ds_found_dir=$dir
        return 0
      fi
    done <<<"$roots"
  fi
  local cuda=${CUDA_HOME:-/usr/local/cuda}
  for dir in "$cuda/lib64" "$cuda/lib" "$cuda/targets/x86_64-linux/lib"; do
    if [[ -e "$dir/$lib" ]]; then
      ds_found_from="the CUDA toolkit"
      ds_found_dir=$dir
      return 0
    fi
  done
  return 1
}

# Fills LD_LIBRARY_PATH for the libraries in $1/share/dsperf/runtime-libs, once per job.
ds_bundle_find_libs() {
  local bundle=$1
  [[ -n "${DS_BUNDLE_LIBS:-}" ]] && return 0
  local list=$bundle/share/dsperf/runtime-libs lib dir override var found=() missing=()
  if [[ -f "$list" ]]; then
    while IFS= read -r lib; do
      [[ -z "$lib" ]] && continue
      case $lib in
        libnccl*) var=DS_NCCL_LIB ;;
        *) var=DS_CUBLAS_LIB ;;
      esac
      override=${!var:-}
      if ds_bundle_locate "$lib" "$override" "$var"; then
        dir=$ds_found_dir
        found+=("$lib from $dir ($ds_found_from)")
        case ":${LD_LIBRARY_PATH:-}:" in
          *":$dir:"*) ;;
          *) export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
        esac
      else
        missing+=("$lib")
      fi
    done <"$list"
  fi
  local text=""
  ((${#found[@]} > 0)) && text=$(printf '%s; ' "${found[@]}") && text=${text%; }
  if ((${#missing[@]} > 0)); then
    text+="${text:+; }NOT FOUND: ${missing[*]} (looked in DS_NCCL_LIB/DS_CUBLAS_LIB, ${DS_PYTHON:-python3}'s nvidia packages and ${CUDA_HOME:-/usr/local/cuda}); the tools that need them will not start: set DS_NCCL_LIB or DS_CUBLAS_LIB to the folder that holds them"
  fi
  export DS_BUNDLE_LIBS="${text:-none needed}"
  [[ "${DS_BUNDLE_QUIET:-0}" == 1 ]] || echo "dsperf bundle: ${DS_BUNDLE_LIBS}" >&2
  return 0
}
