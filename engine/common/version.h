// dsperf's version and the git commit it was built from, for --version and the JSON files. The number
// comes from project() in the top-level CMakeLists.txt, the commit from cmake/Version.cmake.
#pragma once

#include <string>
#include <string_view>

namespace ds {

// "0.2.0"
const char* version();
// "2158586abcde", "2158586abcde-dirty", or "unknown" (built without a .git).
const char* gitCommit();
// "0.2.0+2158586abcde" (semantic-version build metadata), or "0.2.0" when the commit is unknown:
// what the JSON files record as tool_version.
std::string versionWithCommit();
// "dsdiag 0.2.0 (git 2158586abcde)": the --version line of a tool.
std::string versionLine(std::string_view tool);

}  // namespace ds
