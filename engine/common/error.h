// The one error hierarchy of dsperf. Errors in the environment (bad config, I/O, timeouts, a peer
// gone) are exceptions callers are expected to handle; broken invariants use DS_CHECK, which carries
// file:line. main() of every tool maps these to its documented exit codes.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ds {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user's configuration (env var, flag, file) is wrong. The message names the variable, the
// value and what would be valid.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A bounded wait ran out. The message names what was waited for (rank, key, collective) and for how
// long.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// A socket, file or process operation failed.
class IoError : public Error {
 public:
  using Error::Error;
};

// A peer spoke a protocol we do not accept (garbage bytes, a newer version, another job's id).
class ProtocolError : public Error {
 public:
  using Error::Error;
};

// A communication backend failed or does not support what was asked.
class BackendError : public Error {
 public:
  using Error::Error;
};

// A broken invariant inside dsperf: a bug, not a user error.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void checkFailed(const char* expr, const char* file, int line, const std::string& msg);
}  // namespace detail

// errnoText(e) -> "98 - Address already in use", the form users know from c10d.
std::string errnoText(int err);

}  // namespace ds

#define DS_CHECK(cond, ...)                                                                \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      ::ds::detail::checkFailed(#cond, __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__)); \
    }                                                                                      \
  } while (0)
