#include "reports/input_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "engine/common/error.h"
#include "engine/common/unique_fd.h"
#include "engine/host/resources.h"

namespace ds::report {

namespace {
std::atomic<std::size_t> gMaxInputBytes{kDefaultMaxInputBytes};
}  // namespace

std::size_t maxInputBytes() { return gMaxInputBytes.load(); }
void setMaxInputBytes(std::size_t bytes) { gMaxInputBytes.store(bytes); }

std::string readInputFile(const std::string& path) {
  const UniqueFd owned(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO must not block the open
  const int fd = owned.get();
  if (fd < 0) {
    throw IoError(
        fmt::format("cannot read {}: {}. Check the path and its permissions.", path, errnoText(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw IoError(fmt::format("cannot read {}: {}", path, errnoText(errno)));
  if (S_ISDIR(st.st_mode))
    throw ConfigError(fmt::format(
        "{} is a directory, not a result file; give the files inside it ({}/*.json).", path, path));
  if (!S_ISREG(st.st_mode)) {
    throw ConfigError(
        fmt::format("{} is not a regular file (a device, FIFO or socket); dsreport reads result "
                    "files only. Save the data to a file first.",
                    path));
  }
  const std::size_t cap = maxInputBytes();
  if (static_cast<std::size_t>(st.st_size) > cap) {
    throw ConfigError(fmt::format(
        "{} is {}, more than dsreport reads ({}; result files are a few MiB). Check "
        "that it is the right file, or raise the cap with --max-input-mb.",
        path, sys::bytesText(static_cast<double>(st.st_size)), sys::bytesText(static_cast<double>(cap))));
  }
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t off = 0;
  // Read to the size fstat gave, plus one more read: a file that grows meanwhile is cut at the cap.
  while (true) {
    if (off == text.size()) {
      if (text.size() >= cap + 1) break;
      text.resize(std::min(cap + 1, text.size() + 65536));
    }
    ssize_t n = ::read(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(fmt::format("cannot read {}: {}", path, errnoText(errno)));
    if (n == 0) break;
    off += static_cast<std::size_t>(n);
  }
  if (off > cap) {
    throw ConfigError(
        fmt::format("{} grew beyond {} while it was read; read it when the run that writes it "
                    "is done, or raise the cap with --max-input-mb.",
                    path, sys::bytesText(static_cast<double>(cap))));
  }
  text.resize(off);
  return text;
}

}  // namespace ds::report
