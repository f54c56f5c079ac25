// Reading result files that came from outside: regular files only, of a bounded size. Every dsreport
// reader goes through readInputFile (and its JSON errors through json_io.h jsonFieldError).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace ds::report {

// The whole text of an input file, read only when it is a regular file no larger than
// maxInputBytes(): a directory, FIFO or device (/dev/zero) would read as empty or forever. Throws
// IoError when it cannot be opened, ConfigError naming the path for the other cases.
std::string readInputFile(const std::string& path);
// The readers' size cap: 256 MiB unless setMaxInputBytes (dsreport --max-input-mb) changed it. A
// result file is a few MiB; a 1 GiB JSON needs ~10 GiB of memory to parse.
inline constexpr std::size_t kDefaultMaxInputBytes = 256ull << 20;
std::size_t maxInputBytes();
void setMaxInputBytes(std::size_t bytes);

}  // namespace ds::report
