// Vendor libraries opened at run time (dlopen) instead of linked. A binary linked against libnccl and
// libcublas makes the dynamic loader map and relocate several hundred MiB at every start (0.2-0.4 s,
// also for --version and for CPU-only runs), and does not start at all where one is missing or broken.
// dsbench opens them on its first GPU use; dsdiag probes them the same way (diag/probes.cpp).
#pragma once

#include <mutex>
#include <string>
#include <vector>

namespace ds::sys {

// Where the dynamic loader finds `name`, for messages: the name itself when it is a path, else the
// first LD_LIBRARY_PATH entry that holds it, else the name (the loader's cache or default folders).
std::string locateLibrary(const std::string& name);

struct OpenedLibrary {
  void* handle = nullptr;  // null when none loaded
  std::string used;        // the name that loaded
  std::string error;       // the loader's reason for the first name that failed, or for `broken`
  std::string broken;      // where a name that exists but does not load (empty, wrong ELF, missing symbol) is
};

// dlopen(RTLD_NOW | RTLD_LOCAL) of the first name that loads. With stopAtBroken, a name that exists but
// does not load ends the search with `broken` set: a binary that opens that name would load the same
// file and fail, so a later name that loads must not pass for it. Never throws.
OpenedLibrary openFirstLibrary(const std::vector<std::string>& names, bool stopAtBroken = true);

// A library opened on first use and kept open for the life of the process. Thread-safe.
class LazyLibrary {
 public:
  // what: "NCCL"; names: the names to try, in order; remedy: what to do when none loads.
  LazyLibrary(std::string what, std::vector<std::string> names, std::string remedy);
  // Opens the library on the first call. Throws BackendError naming it, the loader's reason and the
  // remedy; a later call tries again.
  void* handle();
  // The address of `name` in the library (opening it first). Throws BackendError naming the file when
  // it lacks the symbol (an older library than the one dsperf was built with).
  void* symbol(const char* name);
  // Whether handle() has opened it, without opening it.
  bool loaded() const;

 private:
  std::string what_;
  std::vector<std::string> names_;
  std::string remedy_;
  mutable std::mutex mu_;
  void* handle_ = nullptr;
  std::string used_;
};

}  // namespace ds::sys
