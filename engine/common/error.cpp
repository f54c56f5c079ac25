#include "engine/common/error.h"

#include <cstring>

namespace ds {

namespace detail {
void checkFailed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(
      fmt::format("internal error: check '{}' failed at {}:{}{}{} (this is a dsperf bug; "
                  "please report it with this message)",
                  expr, file, line, msg.empty() ? "" : ": ", msg));
}
}  // namespace detail

std::string errnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer, which may or may not be buf.
  const char* text = strerror_r(err, buf, sizeof(buf));
  return fmt::format("{} - {}", err, text);
}

}  // namespace ds
