#include "reports/diag/hostlist.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "engine/common/error.h"

namespace ds::report {
namespace {

struct Numbered {
  unsigned long long value = 0;
  std::string digits;  // as written, with its zero padding
};

// A run of consecutive numbers that Slurm expands back to the same strings: every member, printed with
// the width of the first, is the member as written.
struct Run {
  std::string first, last;
  unsigned long long lastValue = 0;
  std::string text() const { return first == last ? first : first + "-" + last; }
};

bool extends(const Run& r, const Numbered& n) {
  return n.value == r.lastValue + 1 && fmt::format("{:0{}}", n.value, r.first.size()) == n.digits;
}

}  // namespace

std::string slurmHostlist(std::vector<std::string> hosts) {
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  std::map<std::string, std::vector<Numbered>> byPrefix;  // prefix -> numbered names
  std::vector<std::string> plain;                         // names without a trailing number
  for (const auto& h : hosts) {
    if (h.empty() || h.find_first_of(",[]") != std::string::npos) {
      throw ConfigError(fmt::format(
          "'{}' cannot be written into a Slurm hostlist: host names must be non-empty and contain no ',', "
          "'[' or ']'. Check the host names the ranks reported (hostname on each node).",
          h));
    }
    std::size_t cut = h.find_last_not_of("0123456789") + 1;  // npos + 1 == 0: all digits
    std::string digits = h.substr(cut);
    // Slurm's expansion reads at most 18 digits; longer numbers stay literal.
    if (digits.empty() || digits.size() > 18) {
      plain.push_back(h);
      continue;
    }
    byPrefix[h.substr(0, cut)].push_back({std::stoull(digits), digits});
  }
  std::vector<std::pair<std::string, std::string>> items;  // sort key, text
  for (auto& [prefix, nums] : byPrefix) {
    std::sort(nums.begin(), nums.end(), [](const Numbered& a, const Numbered& b) {
      return a.value != b.value ? a.value < b.value : a.digits.size() < b.digits.size();
    });
    std::vector<Run> runs;
    for (const auto& n : nums) {
      auto open = std::find_if(runs.begin(), runs.end(), [&](const Run& r) { return extends(r, n); });
      if (open != runs.end()) {
        open->last = n.digits;
        open->lastValue = n.value;
      } else {
        runs.push_back({n.digits, n.digits, n.value});
      }
    }
    if (runs.size() == 1 && runs[0].first == runs[0].last) {
      items.emplace_back(prefix, prefix + runs[0].first);
      continue;
    }
    std::string body;
    for (const auto& r : runs) body += (body.empty() ? "" : ",") + r.text();
    items.emplace_back(prefix, prefix + "[" + body + "]");
  }
  for (const auto& p : plain) items.emplace_back(p, p);
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (const auto& [key, text] : items) out += (out.empty() ? "" : ",") + text;
  return out;
}

std::string deepspeedExclude(std::vector<std::string> hosts) {
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : "@") + h;
  return out;
}

}  // namespace ds::report
