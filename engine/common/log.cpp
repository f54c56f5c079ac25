#include "engine/common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace ds::log {
namespace {

Level levelFromEnv() {
  const char* v = std::getenv("DS_LOG_LEVEL");
  if (v == nullptr) return Level::kInfo;
  std::string s(v);
  if (s == "debug") return Level::kDebug;
  if (s == "warn" || s == "warning") return Level::kWarn;
  if (s == "error") return Level::kError;
  return Level::kInfo;
}

std::atomic<int>& thresholdRef() {
  static std::atomic<int> t{static_cast<int>(levelFromEnv())};
  return t;
}
std::atomic<int> gRank{-1};

}  // namespace

Level threshold() { return static_cast<Level>(thresholdRef().load(std::memory_order_relaxed)); }
void setThreshold(Level level) { thresholdRef().store(static_cast<int>(level)); }
void setRank(int rank) { gRank.store(rank); }

void write(Level level, std::string_view msg) {
  static constexpr const char* kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  int rank = gRank.load();
  std::string line =
      rank >= 0 ? fmt::format("[dsperf] [rank {}] {}: {}\n", rank, kNames[static_cast<int>(level)], msg)
                : fmt::format("[dsperf] {}: {}\n", kNames[static_cast<int>(level)], msg);
  // One write() so lines of concurrent threads and processes do not interleave mid-line.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ds::log
