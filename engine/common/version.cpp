#include "engine/common/version.h"

#include <cstring>

#ifndef DS_VERSION
#error "DS_VERSION is set by engine/common/CMakeLists.txt from project()"
#endif
#ifndef DS_GIT_COMMIT
#define DS_GIT_COMMIT "unknown"
#endif

namespace ds {

const char* version() { return DS_VERSION; }

const char* gitCommit() { return DS_GIT_COMMIT; }

std::string versionWithCommit() {
  std::string v = version();
  if (std::strcmp(gitCommit(), "unknown") != 0) v += std::string("+") + gitCommit();
  return v;
}

std::string versionLine(std::string_view tool) {
  return std::string(tool) + " " + version() + " (git " + gitCommit() + ")";
}

}  // namespace ds
