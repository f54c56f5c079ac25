#include "engine/env/slurm.h"

#include "engine/common/error.h"
#include "engine/env/env_source.h"

namespace ds::env {
namespace {

// Safety bound: a typo such as "node[1-999999999]" must not exhaust memory or time. No cluster has
// more nodes than this; a million (the bound before fuzzing) took half a second and 350 MB to expand.
constexpr size_t kMaxHosts = 65'536;

[[noreturn]] void badList(std::string_view varName, std::string_view list, std::string_view why) {
  throw ConfigError(
      fmt::format("{}='{}' is not a valid Slurm host list: {}. Expected a form like "
                  "'node[01-04,07]' or 'a,b,c'.",
                  varName, list, why));
}

[[noreturn]] void badTasks(std::string_view varName, std::string_view list, std::string_view why) {
  throw ConfigError(
      fmt::format("{}='{}' is not a valid Slurm tasks-per-node list: {}. Expected a form like "
                  "'2(x3),1' (three nodes with 2 tasks, then one with 1). srun sets it; do not "
                  "export it by hand.",
                  varName, list, why));
}

// Splits at commas that are not inside brackets.
std::vector<std::string_view> splitTopLevel(std::string_view s, std::string_view varName,
                                            std::string_view all) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') {
      if (++depth > 1) badList(varName, all, "nested '['");
    } else if (s[i] == ']') {
      if (--depth < 0) badList(varName, all, "']' without '['");
    } else if (s[i] == ',' && depth == 0) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) badList(varName, all, "'[' without ']'");
  parts.push_back(s.substr(start));
  return parts;
}

// Expands one bracket body "01-04,07" into its strings, keeping zero padding.
std::vector<std::string> expandRanges(std::string_view body, std::string_view varName, std::string_view all) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    std::string_view item =
        body.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) badList(varName, all, "an empty range inside '[...]'");
    size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    for (std::string_view d : {lo, hi}) {
      if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string_view::npos) {
        badList(varName, all, fmt::format("'{}' is not a number or a range like 1-4", item));
      }
    }
    long long a = std::stoll(std::string(lo));
    long long b = std::stoll(std::string(hi));
    if (b < a) badList(varName, all, fmt::format("range '{}' runs backwards", item));
    // Bounded per bracket too: many ranges in one bracket add up (found by fuzzing).
    if (static_cast<size_t>(b - a) >= kMaxHosts || out.size() + static_cast<size_t>(b - a) >= kMaxHosts)
      badList(varName, all, fmt::format("range '{}' makes the list longer than {} hosts", item, kMaxHosts));
    size_t width = lo.size();
    for (long long v = a; v <= b; ++v) out.push_back(fmt::format("{:0{}}", v, width));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> expandNodelist(std::string_view list, std::string_view varName) {
  std::vector<std::string> hosts;
  if (list.empty()) badList(varName, list, "it is empty");
  for (std::string_view group : splitTopLevel(list, varName, list)) {
    if (group.empty()) badList(varName, list, "an empty host name between commas");
    // Cartesian product over every bracket in this group.
    std::vector<std::string> partial{""};
    size_t pos = 0;
    while (pos < group.size()) {
      size_t open = group.find('[', pos);
      std::string_view literal =
          group.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos);
      for (auto& p : partial) p.append(literal);
      if (open == std::string_view::npos) break;
      size_t close = group.find(']', open);
      auto choices = expandRanges(group.substr(open + 1, close - open - 1), varName, list);
      std::vector<std::string> next;
      if (partial.size() * choices.size() > kMaxHosts)
        badList(varName, list, fmt::format("it expands to more than {} hosts", kMaxHosts));
      next.reserve(partial.size() * choices.size());
      for (const auto& p : partial) {
        for (const auto& c : choices) next.push_back(p + c);
      }
      partial = std::move(next);
      pos = close + 1;
    }
    for (auto& p : partial) hosts.push_back(std::move(p));
    if (hosts.size() > kMaxHosts) badList(varName, list, fmt::format("it expands to more than {} hosts", kMaxHosts));
  }
  return hosts;
}

std::vector<int> expandTasksPerNode(std::string_view list, std::string_view varName) {
  std::vector<int> out;
  size_t start = 0;
  if (list.empty()) badTasks(varName, list, "it is empty");
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string_view item =
        list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t paren = item.find("(x");
    std::string_view count = item.substr(0, paren);
    long long n = parseIntVar(varName, count, 0, 1'000'000, "a task count such as '2(x3),1'");
    long long repeat = 1;
    if (paren != std::string_view::npos) {
      if (item.back() != ')') badTasks(varName, list, fmt::format("'{}' lacks its closing ')'", item));
      repeat = parseIntVar(varName, item.substr(paren + 2, item.size() - paren - 3), 1, 1'000'000,
                           "a repeat count such as '2(x3)'");
    }
    if (out.size() + static_cast<size_t>(repeat) > kMaxHosts)
      badTasks(varName, list, fmt::format("it lists more than {} nodes", kMaxHosts));
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(n));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

SlurmPlace slurmPlace(const EnvSource& env) {
  auto job = env.get("SLURM_JOB_ID");
  if (!job) job = env.get("SLURM_JOBID");
  if (!job || job->empty()) return SlurmPlace::kNone;
  auto step = env.get("SLURM_STEP_ID");
  if (!step) step = env.get("SLURM_STEPID");
  if (!step || step->empty() || step->find_first_not_of("0123456789") != std::string::npos)
    return SlurmPlace::kAllocation;  // unset, or "batch"/"extern" spelled out
  // Slurm's special steps (batch 0xfffffffb, extern 0xfffffffc, interactive 0xfffffffa, ...) are
  // not srun task steps.
  if (step->size() > 10 || (step->size() == 10 && std::stoull(*step) >= 0xfffffff0ULL))
    return SlurmPlace::kAllocation;
  return SlurmPlace::kStep;
}

std::optional<std::pair<std::string, std::string>> firstSet(const EnvSource& env,
                                                            std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (auto v = env.get(n)) return std::pair<std::string, std::string>{n, *v};
  }
  return std::nullopt;
}

std::string slurmMpiPlugin(const EnvSource& env) {
  if (env.get("PMIX_RANK")) return "pmix";
  if (env.get("PMI_FD") || env.get("PMI_RANK")) return "pmi2";
  return "none";
}

std::optional<int> slurmDefaultPort(std::string_view jobId) {
  size_t end = jobId.size();
  size_t start = end;
  while (start > 0 && end - start < 4 && jobId[start - 1] >= '0' && jobId[start - 1] <= '9') --start;
  if (start == end) return std::nullopt;
  return 15000 + std::stoi(std::string(jobId.substr(start)));
}

}  // namespace ds::env
