#include "engine/common/iso_time.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace ds {

std::string isoUtc(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string isoUtcNow() {
  return isoUtc(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()));
}

std::string isoUtcNowMs() {
  const auto now = std::chrono::system_clock::now();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::string s = isoUtc(std::chrono::system_clock::to_time_t(now));
  s.pop_back();  // the 'Z', which follows the fraction
  return fmt::format("{}.{:03d}Z", s, static_cast<int>(ms));
}

bool parseIsoTimeMs(const std::string& text, double& ms) {
  int y, mo, d, h = 0, mi = 0, consumed = 0;
  double s = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf%n", &y, &mo, &d, &h, &mi, &s, &consumed) < 6) {
    consumed = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &y, &mo, &d, &consumed) < 3 || consumed != 10)
      return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s < 0 || s >= 61) return false;
  std::string zone = text.substr(static_cast<std::size_t>(consumed));
  int offsetMin = 0;
  if (!zone.empty() && zone != "Z") {
    int oh = 0, om = 0;
    char sign = 0;
    if (std::sscanf(zone.c_str(), "%c%2d:%2d", &sign, &oh, &om) != 3 || (sign != '+' && sign != '-'))
      return false;
    offsetMin = (sign == '+' ? 1 : -1) * (oh * 60 + om);
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = 0;
  time_t t = timegm(&tm);
  ms = (static_cast<double>(t) + s - offsetMin * 60.0) * 1000.0;
  return true;
}

}  // namespace ds
