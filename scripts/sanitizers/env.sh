# Sourced by scripts/build.sh and scripts/test.sh: their --sanitize=<mode> flag, the build folder of
# each mode, and the sanitizer run-time options. The same defaults are compiled into every binary (default_options.c), so running
# ctest or a binary by hand in build-asan/ or build-tsan/ behaves the same; values already in the
# environment are appended last and win.
# $1: address|thread, $2: the scripts/sanitizers directory.
ds_sanitizer_env() {
  local mode=$1 dir=$2
  [[ "${DS_SANITIZER_ENV:-}" == "$mode" ]] && return 0  # already done (test.sh, then build.sh)
  case "$mode" in
    address)
      export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_init_order=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
      export LSAN_OPTIONS="suppressions=$dir/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
      export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$dir/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
      ;;
    thread)
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$dir/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
      ;;
    *)
      echo "--sanitize=$mode: not a sanitizer mode; use --sanitize=address (ASan+UBSan) or --sanitize=thread (TSan)" >&2
      return 1
      ;;
  esac
  export DS_SANITIZER_ENV=$mode
}

# Splits the arguments into $sanitize (the mode of --sanitize=<mode>, or empty) and the array
# $args (everything else), for the caller to use.
ds_parse_sanitize_flag() {
  sanitize=""
  args=()
  local a
  for a in "$@"; do
    case "$a" in
      --sanitize=*) sanitize=${a#--sanitize=} ;;
      *) args+=("$a") ;;
    esac
  done
}

# The default build folder of a mode under the repo root $2: build, build-asan or build-tsan.
ds_build_dir_for() {
  case "$1" in
    address) echo "$2/build-asan" ;;
    thread) echo "$2/build-tsan" ;;
    *) echo "$2/build" ;;
  esac
}

# For a test that runs a sanitizer build's programs with the source tree hidden (install_test.sh,
# package_test.sh): the suppression files their compiled-in options name (DS_SANITIZER_DIR, in the
# source tree) would be unreadable there, and the sanitizer stops the program at start. Copies them
# to $3 (a folder that stays visible) and appends suppressions=<copy> to each options variable of the
# mode (a later value wins over the compiled-in default and over ds_sanitizer_env's).
# $1: address|thread|"" (nothing to do), $2: the scripts/sanitizers directory, $3: the folder.
ds_sanitizer_suppressions_in() {
  local mode=$1 dir=$2 to=$3
  case "$mode" in
    address)
      cp "$dir/lsan.supp" "$dir/ubsan.supp" "$to/"
      export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$to/lsan.supp"
      export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}suppressions=$to/ubsan.supp"
      ;;
    thread)
      cp "$dir/tsan.supp" "$to/"
      export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$to/tsan.supp"
      ;;
  esac
}
