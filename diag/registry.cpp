#include "diag/registry.h"

#include <algorithm>

#include "diag/world/world_checks.h"
#include "engine/common/error.h"

namespace ds::diag {

const std::vector<CheckDef>& localChecks() {
  static const std::vector<CheckDef> all = [] {
    std::vector<CheckDef> v;
    for (auto family : {envChecks(), netChecks(), gpuChecks(), gpuHealthChecks(), gpuTopologyChecks(), ncclChecks(), mpiChecks(),
                        systemChecks(), runnerChecks()}) {
      for (auto& c : family) v.push_back(std::move(c));
    }
    return v;
  }();
  return all;
}

// The world checks, each one function in diag/world/ and one row here. To add one:
//   1. write `Finding world::yourCheck(const WorldFacts&)` in diag/world/world_checks.cpp (or in
//      cross_checks.cpp when it reads only the ranks' records) and declare it in world_checks.h;
//   2. add its row: id, the one line --list shows, the step whose result it judges, the function.
// runWorld then runs it on rank 0 when it is selected and adds its finding; --list and --only/--skip
// know it from this row. (A fact no step collects yet is a field of WorldFacts, filled by its step
// in runWorld.) Rows are in --list order; findings come out step by step (WorldStep's order), in
// row order within a step.
const std::vector<WorldCheckDef>& worldChecks() {
  using S = WorldStep;
  static const std::vector<WorldCheckDef> all = {
      {"world.rendezvous", "Every rank joins the store within --timeout (names the ranks that never joined)", S::kGather,
       world::rendezvous},
      {"world.gather", "Every rank reports its local results to rank 0 within --timeout", S::kGather, world::gather},
      {"world.ranks_unique", "Ranks unique and complete, one WORLD_SIZE", S::kRecords, world::ranksUnique},
      {"world.local_rank_unique", "LOCAL_RANK unique per host", S::kRecords, world::localRankUnique},
      {"world.gpu_unique", "No two ranks on the same GPU (PCI bus id / UUID)", S::kRecords, world::gpuUnique},
      {"world.versions_equal", "NCCL, CUDA driver, MPI and dsperf versions equal on every rank", S::kRecords,
       world::versionsEqual},
      {"world.nccl_settings_equal", "The same NCCL_* settings on every rank", S::kRecords, world::ncclSettingsEqual},
      {"world.cores_disjoint", "Ranks bound to cores on one host do not share them", S::kRecords, world::coresDisjoint},
      {"world.hostnames", "No two hosts share a hostname (boot ids differ)", S::kRecords, world::hostnames},
      {"world.clock_skew", "Clock skew between rank 0 and every rank", S::kClock, world::clockSkew},
      {"world.smoke_allreduce", "A smoke allreduce with a correctness check on the job's backend", S::kSmoke,
       world::smokeAllreduce},
      {"world.reachability", "TCP probes between host leaders on every interface; names missing routes", S::kFleet,
       world::reachability},
      {"world.link_matrix", "Link latency/bandwidth in rounds of disjoint host pairs; names the slow link or node",
       S::kFleet, world::linkMatrix},
      {"world.hosts", "A verdict per host (healthy, suspect with evidence, no result) and the suspects", S::kFleet,
       world::hosts},
  };
  return all;
}

bool patternMatches(const std::string& p, const std::string& id) {
  if (p == id) return true;
  if (!p.empty() && p.back() == '*') return id.rfind(p.substr(0, p.size() - 1), 0) == 0;
  return id.rfind(p + ".", 0) == 0;  // a family
}

bool Selection::selected(const std::string& id) const {
  auto any = [&](const std::vector<std::string>& ps) {
    return std::any_of(ps.begin(), ps.end(), [&](const auto& p) { return patternMatches(p, id); });
  };
  if (!only.empty() && !any(only)) return false;
  return !any(skip);
}

void validateSelection(const Selection& s) {
  std::vector<std::string> ids;
  for (const auto& c : localChecks()) ids.push_back(c.id);
  for (const auto& c : worldChecks()) ids.emplace_back(c.id);
  for (const auto* list : {&s.only, &s.skip}) {
    for (const auto& p : *list) {
      if (std::none_of(ids.begin(), ids.end(), [&](const auto& id) { return patternMatches(p, id); })) {
        throw ConfigError(fmt::format("'{}' matches no check; give an id (net.master_port_free), a family (net) or a "
                                      "prefix (net.*). `dsdiag --list` shows them all.",
                                      p));
      }
    }
  }
}

std::vector<DiagRecord> runLocalChecks(Context& ctx, const Selection& sel, int rank, const std::string& host) {
  std::vector<DiagRecord> out;
  for (const auto& c : localChecks()) {
    if (!sel.selected(c.id)) continue;
    Finding f;
    bool threw = true;
    try {
      f = c.run(ctx);
      threw = false;
    } catch (const std::exception& e) {
      f = fail(fmt::format("The check itself failed: {}", e.what()),
               "This is a dsdiag bug or an environment it does not understand; report it with this output.");
    } catch (...) {
      f = fail("The check itself failed with an unknown exception", "Report this as a dsdiag bug.");
    }
    // A check that threw is dsdiag's failure, not the machine's: JUnit shows it as an <error>.
    if (threw) f.data["check_error"] = true;
    out.push_back(DiagRecord{c.id, c.family, f.status, std::move(f.message), std::move(f.remedy), std::move(f.data),
                             rank, host});
  }
  return out;
}

}  // namespace ds::diag
