#include "reports/json_io.h"

#include "reports/input_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "engine/common/error.h"

namespace ds::report {

std::string dumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

void writeTextAtomic(const std::string& path, const std::string& text) {
  std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw IoError(fmt::format("cannot write {}: {}. Check that the folder exists and is writable.", path,
                              errnoText(errno)));
  }
  auto fail = [&](int err, const char* hint) {
    ::unlink(tmp.c_str());
    return IoError(fmt::format("cannot write {}: {}{}", path, errnoText(err), hint));
  };
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw fail(err, " (disk full?)");
    }
    off += static_cast<std::size_t>(n);
  }
  // A failed fsync or close means the bytes may not be on disk: the old file stays in place.
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    throw fail(err, " (disk full?)");
  }
  if (::close(fd) != 0) throw fail(errno, " (disk full?)");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw IoError(fmt::format("cannot move the finished file into place at {}: {}", path, errnoText(err)));
  }
}

void writeJsonAtomic(const std::string& path, const nlohmann::json& j) {
  writeTextAtomic(path, dumpJson(j, 2) + "\n");
}

std::string textOr(const nlohmann::json& j, const char* key, const std::string& fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

nlohmann::json readJson(const std::string& path) { return parseJsonText(readInputFile(path), path); }

nlohmann::json parseJsonText(const std::string& text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(fmt::format("{} is not valid JSON (byte {}): {}. The file may be truncated or corrupt.",
                                  origin, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {
    // Valid syntax the library still refuses, e.g. a number too large for a double (out_of_range 406).
    throw ConfigError(
        fmt::format("{} cannot be read as JSON: {}. The file may be corrupt.", origin, jsonErrorText(e)));
  }
}

}  // namespace ds::report
