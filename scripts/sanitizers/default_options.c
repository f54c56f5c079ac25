/* Default run-time options for the sanitizer builds (cmake/Sanitizers.cmake links this into every
 * target when DS_SANITIZE is set). The sanitizer runtimes call these hooks before reading
 * ASAN_OPTIONS/UBSAN_OPTIONS/LSAN_OPTIONS/TSAN_OPTIONS, so the environment still overrides them.
 * scripts/test.sh --sanitize=... sets the same values in the environment; keep the two in step. */
#ifndef DS_SANITIZER_DIR
#error "DS_SANITIZER_DIR must name scripts/sanitizers"
#endif

#include <dlfcn.h>
#include <stdlib.h>

#define DS_VISIBLE __attribute__((visibility("default"), used))

#if defined(DS_SANITIZE_ADDRESS)
/* Third-party, ASan builds only: libpciaccess (loaded by hwloc's pci plugin, which dsdiag's topology
 * check and Open MPI use) keeps its state in globals and is unloaded with the plugin when the
 * topology is destroyed; LeakSanitizer then sees that state as leaked from a module that is gone,
 * which no suppression can name. Loading the library once, never to be unloaded (RTLD_NODELETE),
 * keeps that state reachable. Absent library: nothing to do. */
__attribute__((constructor)) static void ds_pin_libpciaccess(void) {
  (void)dlopen("libpciaccess.so.0", RTLD_NOW | RTLD_NODELETE);
}

/* Open MPI's and PMIx's plugins (mca_*.so) are dlclose()d at MPI_Finalize; a leak allocated inside
 * one is then reported from "<unknown module>" (srun --mpi=pmix: 116 KB in 3,342 allocations, issue
 * 30), which no suppression can name. Both libraries have a switch that keeps their plugins loaded;
 * with it the leaks keep their module name and lsan.supp's `leak:mca_` line applies, and nothing from
 * our own code is hidden. Set only when the environment does not set it already. */
__attribute__((constructor)) static void ds_keep_mpi_plugins_loaded(void) {
  setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 0);
  setenv("PMIX_MCA_mca_base_component_disable_dlclose", "1", 0);
}
#endif

DS_VISIBLE const char* __asan_default_options(void) {
  return "halt_on_error=1:abort_on_error=0:detect_leaks=1"
         ":strict_init_order=1:check_initialization_order=1";
}

DS_VISIBLE const char* __lsan_default_options(void) {
  return "suppressions=" DS_SANITIZER_DIR "/lsan.supp:print_suppressions=0";
}

DS_VISIBLE const char* __ubsan_default_options(void) {
  return "halt_on_error=1:print_stacktrace=1:suppressions=" DS_SANITIZER_DIR "/ubsan.supp";
}

DS_VISIBLE const char* __tsan_default_options(void) {
  return "halt_on_error=1:second_deadlock_stack=1:suppressions=" DS_SANITIZER_DIR "/tsan.supp";
}
