#include "reports/sample/sample.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "engine/common/error.h"
#include "engine/common/median.h"
#include "reports/diag/hostlist.h"
#include "reports/sweep/expected.h"

namespace ds::report {

namespace {

std::string hardwareSku(const std::vector<hw::HostHardware>& hw, const std::string& host) {
  for (const auto& h : hw)
    if (h.host == host) return hw::skuKey(h);
  return "unknown";
}

// The software that moved a row's bytes, from the run's recorded versions.
std::string stackOf(const std::string& backend, const std::map<std::string, std::string>& versions) {
  auto version = [&](const char* key) {
    auto it = versions.find(key);
    return it == versions.end() || it->second.empty() ? std::string("unknown") : it->second;
  };
  if (backend == "nccl") return "nccl " + version("nccl");
  if (backend == "mpi") return "open_mpi " + version("open_mpi");
  if (backend == "gloo") return "gloo " + version("gloo");
  return backend + " " + version("dsperf");  // shm and anything of ours: our own version
}

void sweepSamples(const RunFile& run, std::vector<Sample>& out) {
  const SweepRun& s = *run.sweep;
  const SweepMetadata& m = s.metadata;
  const bool oneHost = m.hosts.size() == 1;
  std::string host = oneHost ? m.hosts.front() : std::string{};
  if (!oneHost) {
    // A job is named by its Slurm hostlist; names that cannot stand in one (',' '[' ']') are listed
    // with spaces instead of failing the whole run.
    try {
      host = slurmHostlist(m.hosts);
    } catch (const ConfigError&) {
      for (const auto& h : m.hosts) host += (host.empty() ? "" : " ") + h;
    }
  }
  // A job's SKU is its hosts' when they all agree, else "mixed".
  std::string sku = "unknown";
  if (!m.hosts.empty()) {
    sku = hardwareSku(m.hardware, m.hosts.front());
    for (const auto& h : m.hosts)
      if (hardwareSku(m.hardware, h) != sku) sku = "mixed";
  }
  for (const auto& row : s.results) {
    const PlaceResult* p = row.outOfPlace.measured ? &row.outOfPlace
                           : row.inPlace.measured  ? &row.inPlace
                                                   : nullptr;
    if (!p || p->wrong > 0 || p->busBw <= 0) continue;
    Sample x;
    x.scope = oneHost ? "host" : "job";
    x.host = host;
    x.runId = run.runId;
    x.time = m.startTime;
    x.label = run.label;
    x.metric = "busbw";
    x.collective = row.collective;
    x.backend = row.backend;
    x.dtype = row.dtype;
    x.op = row.op;
    x.bytes = row.bytes;
    x.worldSize = row.worldSize;
    x.place = p == &row.outOfPlace ? "out" : "in";
    x.value = p->busBw;
    x.unit = "GB/s";
    x.sku = sku;
    x.stack = stackOf(row.backend, m.versions);
    if (RowBound b = rowBound(row, m); b.known()) {
      x.boundGBps = b.gbps;
      x.boundName = b.name;
    }
    out.push_back(std::move(x));
  }
}

void fleetSamples(const RunFile& run, std::vector<Sample>& out) {
  const FleetReport& f = *run.diag->fleet;
  const auto& ranks = f.input.ranks;
  auto hostOf = [&](int r) {
    return r >= 0 && static_cast<std::size_t>(r) < ranks.size() ? ranks[r].host : std::string{};
  };
  const std::string time = run.raw.is_object() ? run.raw.value("start_time", std::string{}) : std::string{};
  Sample base;
  base.runId = run.runId;
  base.time = time;
  base.label = run.label;
  base.collective = "pair";
  base.backend = "tcp";
  base.worldSize = f.input.worldSize;
  base.stack = "tcp";
  std::map<std::string, std::vector<double>> bw, lat;  // host -> its links' figures
  std::map<std::string, int> firstRank;
  for (const auto& p : f.input.pairs) {
    if (p.outcome != PairOutcome::kOk) continue;
    const std::string a = hostOf(p.a), b = hostOf(p.b);
    if (a.empty() || b.empty() || a == b) continue;  // links within a host say nothing of its NIC
    for (int side = 0; side < 2; ++side) {
      const std::string& host = side ? b : a;
      const std::string& peer = side ? a : b;
      if (p.bandwidthGBps > 0) {
        Sample x = base;
        x.scope = "link";
        x.host = host;
        x.peer = peer;
        x.rank = p.a;
        x.metric = "link_bw";
        x.value = p.bandwidthGBps;
        x.unit = "GB/s";
        out.push_back(x);
        bw[host].push_back(p.bandwidthGBps);
      }
      if (p.latencyUs > 0) {
        Sample x = base;
        x.scope = "link";
        x.host = host;
        x.peer = peer;
        x.rank = p.a;
        x.metric = "link_latency";
        x.value = p.latencyUs;
        x.unit = "us";
        x.higherIsBetter = false;
        out.push_back(x);
        lat[host].push_back(p.latencyUs);
      }
      firstRank.emplace(host, side ? p.b : p.a);
    }
  }
  for (const auto& [host, v] : bw) {
    Sample x = base;
    x.scope = "host";
    x.host = host;
    x.rank = firstRank[host];
    x.metric = "link_bw";
    x.value = median(v);
    x.unit = "GB/s";
    out.push_back(x);
  }
  for (const auto& [host, v] : lat) {
    Sample x = base;
    x.scope = "host";
    x.host = host;
    x.rank = firstRank[host];
    x.metric = "link_latency";
    x.value = median(v);
    x.unit = "us";
    x.higherIsBetter = false;
    out.push_back(x);
  }
}

}  // namespace

std::vector<Sample> samplesOf(const RunFile& run) {
  std::vector<Sample> out;
  if (run.kind == RunKind::kSweep && run.sweep) sweepSamples(run, out);
  if (run.kind == RunKind::kDiag && run.diag && run.diag->fleet) fleetSamples(run, out);
  return out;
}

std::string patternKey(const Sample& s) {
  if (s.metric == "busbw")
    return fmt::format("{} {} {} {} {} {} {} w{}", s.metric, s.collective, s.backend, s.dtype, s.op, s.bytes,
                       s.place, s.worldSize);
  return fmt::format("{} {} {} w{}", s.metric, s.collective, s.backend, s.worldSize);
}

}  // namespace ds::report
