#include "bench/coll/collective.h"

#include <fmt/format.h>

#include "engine/common/error.h"

namespace ds::bench::coll {

void Launch::wait(comm::Timeout timeout) const {
  for (const auto& w : works) w->wait(timeout);
}

double Launch::durationUs() const {
  double us = 0;
  for (const auto& w : works) us += std::chrono::duration<double, std::micro>(w->duration()).count();
  return us;
}

bool Launch::completedIn(double& us) const {
  double total = 0;
  for (const auto& w : works) {
    std::chrono::nanoseconds took{0};
    if (!w->completedIn(took)) return false;
    total += std::chrono::duration<double, std::micro>(took).count();
  }
  us = total;
  return true;
}

double algBytes(const CollSpec& spec, const CollCounts& c, std::size_t eltSize, int nranks) {
  double s = static_cast<double>(c.paramCount) * static_cast<double>(eltSize);
  return spec.algBytesTimesRanks ? s * nranks : s;
}

const std::vector<const CollSpec*>& allCollectives() {
  static const std::vector<const CollSpec*> all{&kAllreduceSpec, &kAllgatherSpec, &kReduceScatterSpec,
                                                &kAlltoallSpec,  &kBroadcastSpec, &kReduceSpec,
                                                &kSendrecvSpec};
  return all;
}

const CollSpec& findCollective(const std::string& name) {
  std::string key;
  for (char c : name) {
    if (c != '_' && c != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (key.size() > 4 && key.compare(key.size() - 4, 4, "perf") == 0)
    key.resize(key.size() - 4);  // all_reduce_perf
  for (const CollSpec* s : allCollectives()) {
    std::string n;
    for (const char* p = s->facts->name; *p; ++p) {
      if (*p != '_') n += *p;
    }
    if (n == key) return *s;
  }
  std::vector<std::string> names;
  for (const CollSpec* s : allCollectives()) names.emplace_back(s->facts->name);
  throw ConfigError(
      fmt::format("--coll: unknown collective '{}'. Valid: {} or all.", name, fmt::join(names, ", ")));
}

}  // namespace ds::bench::coll
