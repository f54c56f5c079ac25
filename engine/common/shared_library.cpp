#include "engine/common/shared_library.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "engine/common/error.h"

namespace ds::sys {

std::string locateLibrary(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* llp = std::getenv("LD_LIBRARY_PATH");
  std::istringstream dirs(llp != nullptr ? llp : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), F_OK) == 0) return candidate;
  }
  return name;
}

OpenedLibrary openFirstLibrary(const std::vector<std::string>& names, bool stopAtBroken) {
  OpenedLibrary r;
  for (const auto& n : names) {
    dlerror();
    void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      r.handle = h;
      r.used = n;
      return r;
    }
    const char* e = dlerror();
    const std::string text = e != nullptr ? e : n + ": unknown dlopen error";
    const bool missing = text.rfind(n + ": cannot open shared object file: No such file or directory", 0) == 0;
    if (!missing && stopAtBroken) {
      r.broken = locateLibrary(n);
      r.error = text;
      return r;
    }
    // The first name's error says it all (the others are fallbacks of the same library).
    if (r.error.empty()) r.error = text;
  }
  return r;
}

LazyLibrary::LazyLibrary(std::string what, std::vector<std::string> names, std::string remedy)
    : what_(std::move(what)), names_(std::move(names)), remedy_(std::move(remedy)) {}

void* LazyLibrary::handle() {
  std::lock_guard<std::mutex> lock(mu_);
  if (handle_ != nullptr) return handle_;
  OpenedLibrary o = openFirstLibrary(names_);
  if (o.handle == nullptr) {
    const std::string which = o.broken.empty() ? names_.front() : o.broken;
    throw BackendError(fmt::format("{} could not be loaded: {} {}", what_,
                                   o.broken.empty() ? fmt::format("{} was not found ({}).", which, o.error)
                                                    : fmt::format("{} is there but broken ({}).", which, o.error),
                                   remedy_));
  }
  handle_ = o.handle;
  used_ = o.used;
  return handle_;
}

void* LazyLibrary::symbol(const char* name) {
  void* h = handle();
  void* s = dlsym(h, name);
  if (s == nullptr) {
    throw BackendError(fmt::format("{} ({}) has no function {}: it is older than the {} dsperf was built "
                                   "with. {}",
                                   what_, locateLibrary(used_), name, what_, remedy_));
  }
  return s;
}

bool LazyLibrary::loaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return handle_ != nullptr;
}

}  // namespace ds::sys
