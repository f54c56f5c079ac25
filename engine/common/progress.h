// When a long wait says that it is still waiting: 10 s, 30 s and 60 s after it began, then every
// 60 s, so that no wait in rendezvous stays silent for more than a minute.
#pragma once

#include <chrono>

namespace ds {

class ProgressSchedule {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ProgressSchedule(Clock::time_point start = Clock::now()) : start_(start) {}

  Clock::time_point start() const { return start_; }
  // When the next progress line is due.
  Clock::time_point next() const { return start_ + offset(lines_); }
  bool due(Clock::time_point now = Clock::now()) const { return now >= next(); }
  // Call after printing a line.
  void advance() { ++lines_; }
  // Seconds since the wait began, for the line itself.
  double elapsedSeconds(Clock::time_point now = Clock::now()) const {
    return std::chrono::duration<double>(now - start_).count();
  }

  // The offset of line n (0-based): 10 s, 30 s, 60 s, 120 s, 180 s, ...
  static std::chrono::seconds offset(int n) {
    if (n <= 0) return std::chrono::seconds(10);
    if (n == 1) return std::chrono::seconds(30);
    return std::chrono::seconds(60) * (n - 1);
  }

 private:
  Clock::time_point start_;
  int lines_ = 0;
};

}  // namespace ds
