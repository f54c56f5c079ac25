#include "reports/sweep/expected.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "engine/common/collectives.h"
#include "reports/sweep/sweep_reporter.h"

namespace ds::report {

namespace {

// From this size up, bandwidth rather than latency (or the caches) decides a row: the text names the
// fraction there (docs/dev/benchmarks.md: compare against the memory limit at 32 MiB and up).
constexpr std::size_t kBandwidthBytes = std::size_t{32} << 20;

// 24 GB/s of busbw per 200 Gb/s NIC (25 GB/s line rate): the field's rule of thumb (nccl-tests#40, #293).
constexpr double kPracticalNicShare = 24.0 / 25.0;

const char* kindText(const std::string& kind) {
  if (kind == "infiniband") return "InfiniBand";
  if (kind == "roce") return "RoCE";
  if (kind == "ethernet") return "Ethernet";
  return "NIC";
}

std::string num(double v) {
  // 400 -> "400", 21.25 -> "21.2", 0.984 -> "0.98": three significant figures, no trailing zeros.
  std::string s = fmt::format("{:.3g}", v);
  if (s.find('e') != std::string::npos) s = fmt::format("{:.0f}", v);
  return s;
}

const hw::HostHardware* hardwareOf(const SweepMetadata& meta, const std::string& host) {
  for (const auto& h : meta.hardware)
    if (h.host == host) return &h;
  return nullptr;
}

bool isRdma(const hw::NicInfo& n) { return n.kind == "infiniband" || n.kind == "roce"; }

// What one host's NICs let busbw reach, for `backend`. `single`: only the fastest NIC counts
// (sendrecv). Unknown: gbps 0 and why.
struct HostNicBound {
  double gbps = 0;   // GB/s
  std::string name;  // "8x400 Gb/s InfiniBand line rate"
  std::string why;
};

HostNicBound nicBound(const hw::HostHardware& h, const std::string& backend, bool single) {
  HostNicBound b;
  std::vector<const hw::NicInfo*> usable;
  bool anyRdmaUp = false;
  for (const auto& n : h.nics) anyRdmaUp = anyRdmaUp || (n.up && isRdma(n));
  for (const auto& n : h.nics) {
    if (!n.up || n.kind == "virtual") continue;
    if (backend == "nccl" && anyRdmaUp && !isRdma(n)) continue;  // NCCL's IB transport, not its sockets
    usable.push_back(&n);
  }
  if (usable.empty()) {
    bool onlyVirtual = !h.nics.empty() && std::all_of(h.nics.begin(), h.nics.end(), [](const hw::NicInfo& n) {
      return n.kind == "virtual";
    });
    b.why = onlyVirtual ? fmt::format(
                              "{} has only virtual interfaces (veth, bridges): the wire under them, and "
                              "its line rate, is not visible from there",
                              h.host)
            : h.nics.empty() ? fmt::format("no NIC of {} was recorded", h.host)
                             : fmt::format("no NIC of {} is up", h.host);
    return b;
  }
  std::vector<std::string> unknown;
  for (const auto* n : usable)
    if (n->gbps <= 0) unknown.push_back(n->name);
  if (!unknown.empty()) {
    b.why = fmt::format(
        "the line rate of {}'s {} {} is unknown (it reports no speed, as virtio and some "
        "virtual NICs do)",
        h.host, unknown.size() == 1 ? "NIC" : "NICs", fmt::join(unknown, ", "));
    return b;
  }
  if (single) {
    const hw::NicInfo* best =
        *std::max_element(usable.begin(), usable.end(),
                          [](const hw::NicInfo* a, const hw::NicInfo* c) { return a->gbps < c->gbps; });
    usable = {best};
  }
  // Each NIC at its line rate, or at its PCIe link's rate where that is less.
  std::map<std::pair<double, std::string>, int, std::greater<>> groups;
  std::vector<std::string> capped;
  for (const auto* n : usable) {
    double g = n->gbps / 8.0;
    const std::string dev = n->name.substr(0, n->name.find('/'));
    for (const auto& l : h.pcie) {
      if (l.device == dev && l.gBps > 0 && l.gBps < g) {
        capped.push_back(
            fmt::format("{} by its PCIe Gen{} x{} ({} GB/s)", n->name, l.gen, l.width, num(l.gBps)));
        g = l.gBps;
      }
    }
    b.gbps += g;
    ++groups[{n->gbps, n->kind}];
  }
  std::vector<std::string> parts;
  for (const auto& [key, count] : groups)
    parts.push_back(fmt::format("{}x{} Gb/s {}", count, num(key.first), kindText(key.second)));
  b.name = fmt::format("{} line rate", fmt::join(parts, " + "));
  if (!capped.empty()) b.name += fmt::format(" (capped: {})", fmt::join(capped, ", "));
  return b;
}

double measuredBusBw(const SweepMeasurement& row) {
  if (row.outOfPlace.measured) return row.outOfPlace.busBw;
  if (row.inPlace.measured) return row.inPlace.busBw;
  return 0;
}

// Copy traffic of an ideal in-place collective over shared memory, all ranks together, in units of the
// size S (see the header); 0 for a collective this dsperf does not know.
double copyTraffic(const std::string& collective, int n) {
  const CollectiveFacts* c = collectiveFacts(collective);
  return c != nullptr ? c->copyTraffic(n) : 0;
}

void finish(RowBound& b, const SweepMeasurement& row) {
  b.busBw = measuredBusBw(row);
  if (!b.known()) return;
  b.fraction = b.busBw > 0 ? b.busBw / b.gbps : 0;
  if (b.fraction > 1.02) {
    if (b.kind == "memory" && row.bytes < kBandwidthBytes)
      b.why = "above the bound: at this size the buffers fit in the caches, which copy faster than memory";
    else if (b.kind == "nvlink" || b.kind == "nic")
      b.why =
          "above the bound: in-network reduction (NVLink SHARP, InfiniBand SHARP) moves fewer bytes than "
          "busbw counts, or the hardware was misread";
    else
      b.why = "above the bound: the hardware was misread, or the bytes did not all move (check -c 1)";
  }
}

}  // namespace

RowBound rowBound(const SweepMeasurement& row, const SweepMetadata& meta) {
  RowBound b;
  const int n = row.worldSize > 0 ? row.worldSize : meta.worldSize;
  if (meta.hardware.empty()) {
    b.why = "the run recorded no hardware (an import, or a dsbench from before hardware was recorded)";
    finish(b, row);
    return b;
  }
  if (n < 2 || row.busFactor <= 0) {
    b.why = "one rank moves nothing between ranks: no bus bandwidth to bound";
    finish(b, row);
    return b;
  }
  std::vector<std::string> hosts = meta.hosts;
  if (hosts.empty())
    for (const auto& h : meta.hardware) hosts.push_back(h.host);
  std::map<std::string, int> perHost;
  for (const auto& r : meta.ranks) ++perHost[r.host];
  int g = 0;
  for (const auto& [host, count] : perHost) g = std::max(g, count);
  if (g == 0)
    g = static_cast<int>(std::ceil(static_cast<double>(n) / std::max<std::size_t>(1, hosts.size())));

  if (hosts.size() > 1) {
    // Across hosts: the slowest host's NICs.
    const bool single = row.collective == "sendrecv";
    double factor = 1;
    std::string factorText;
    if (row.collective == "alltoall" && g > 1 && g < n) {
      factor = static_cast<double>(n - 1) / (static_cast<double>(g) * (n - g));
      factorText = fmt::format(" x {} (alltoall: {} of {} ranks per host send off it)", num(factor), g, n);
    }
    double best = -1, most = -1;
    for (const auto& host : hosts) {
      const hw::HostHardware* h = hardwareOf(meta, host);
      if (!h) {
        b = RowBound{};
        b.why = fmt::format("no hardware was recorded for host {}", host);
        finish(b, row);
        return b;
      }
      HostNicBound hb = nicBound(*h, row.backend, single);
      if (hb.gbps <= 0) {
        b = RowBound{};
        b.why = hb.why;
        finish(b, row);
        return b;
      }
      most = std::max(most, hb.gbps);
      if (best < 0 || hb.gbps < best) {
        best = hb.gbps;
        b.kind = "nic";
        b.name = hb.name + factorText;
        b.host = host;
      }
    }
    if (most == best) b.host.clear();  // hosts alike: none is "the slowest"
    b.gbps = best * factor;
    b.practicalGBps = b.gbps * kPracticalNicShare;
    finish(b, row);
    return b;
  }

  const std::string& host = hosts.front();
  const hw::HostHardware* h = hardwareOf(meta, host);
  if (!h) {
    b.why = fmt::format("no hardware was recorded for host {}", host);
    finish(b, row);
    return b;
  }
  if (row.backend == "nccl") {
    if (h->nvlink.links > 0) {
      if (h->nvlink.gBpsPerLink <= 0) {
        b.why = fmt::format("the NVLink speed of {}'s {} is not known to dsperf", host,
                            h->gpuName.empty() ? "GPUs" : h->gpuName);
      } else {
        b.kind = "nvlink";
        b.gbps = h->nvlink.links * h->nvlink.gBpsPerLink;
        b.name = fmt::format("NVLink {}x{} GB/s", h->nvlink.links, num(h->nvlink.gBpsPerLink));
      }
    } else if (h->gpuName.empty()) {
      b.why = fmt::format(
          "NVML was not available on {}, so whether its GPUs talk over NVLink or PCIe is not known", host);
    } else {
      const hw::PcieLinkInfo* slowest = nullptr;
      for (const auto& l : h->pcie)
        if (l.device.rfind("gpu", 0) == 0 && l.gBps > 0 && (!slowest || l.gBps < slowest->gBps)) slowest = &l;
      if (!slowest) {
        b.why = fmt::format("the PCIe links of {}'s GPUs are not known", host);
      } else {
        b.kind = "pcie";
        b.gbps = slowest->gBps;
        b.name = fmt::format("PCIe Gen{} x{} GPU link ({})", slowest->gen, slowest->width, slowest->device);
      }
    }
    finish(b, row);
    return b;
  }
  // CPU backends on one host: memory.
  const double a = copyTraffic(row.collective, n);
  if (h->memBwGBps <= 0) {
    b.why = fmt::format("the memory bandwidth of {} was not measured", host);
  } else if (a <= 0) {
    b.why = fmt::format("dsperf has no memory-traffic model for {}", row.collective);
  } else {
    b.kind = "memory";
    b.gbps = h->memBwGBps * row.busFactor / a;
    b.name = fmt::format("zero-copy limit of a {} GB/s memory copy", num(h->memBwGBps));
  }
  finish(b, row);
  return b;
}

nlohmann::json boundToJson(const RowBound& b) {
  if (!b.known()) return {{"name", "unknown"}, {"gbps", 0}, {"fraction", nullptr}, {"why", b.why}};
  nlohmann::json j = {{"name", b.name}, {"kind", b.kind}, {"gbps", b.gbps}};
  j["fraction"] = b.busBw > 0 ? nlohmann::json(b.fraction) : nlohmann::json(nullptr);
  if (b.practicalGBps > 0) j["practical_gbps"] = b.practicalGBps;
  if (!b.host.empty()) j["host"] = b.host;
  if (!b.why.empty()) j["why"] = b.why;
  return j;
}

std::string formatBoundLines(const std::vector<SweepMeasurement>& rows, const SweepMetadata& meta) {
  if (meta.hardware.empty() || rows.empty()) return "";
  // The bound is the same for every size of a table; say it once.
  RowBound first = rowBound(rows.back(), meta);
  if (!first.known()) return fmt::format("# bound: unknown: {}\n", first.why);
  std::string out = fmt::format("# bound: {} GB/s busbw = {}", num(first.gbps), first.name);
  if (!first.host.empty()) out += fmt::format(" of {}, the slowest host", first.host);
  if (first.practicalGBps > 0)
    out += fmt::format(" (practical ~{} GB/s: ~24 GB/s per 200G NIC)", num(first.practicalGBps));
  out += "\n";
  // Per dtype and op, the three largest sizes of 32 MiB and up; the largest alone when none is that large.
  std::map<std::pair<std::string, std::string>, std::vector<const SweepMeasurement*>> variants;
  for (const auto& r : rows) variants[{r.dtype, r.op}].push_back(&r);
  for (auto& [key, v] : variants) {
    std::stable_sort(v.begin(), v.end(), [](const auto* a, const auto* c) { return a->bytes > c->bytes; });
    std::size_t large = 0;
    while (large < v.size() && large < 3 && v[large]->bytes >= kBandwidthBytes) ++large;
    std::vector<const SweepMeasurement*> top(v.begin(), v.begin() + std::max<std::size_t>(1, large));
    std::reverse(top.begin(), top.end());
    for (const auto* r : top) {
      RowBound b = rowBound(*r, meta);
      if (!b.known() || b.busBw <= 0) continue;
      std::string remark = b.why;
      if (remark.empty() && r->bytes < kBandwidthBytes)
        remark = "a small size: latency, not bandwidth, decides it; compare from 32 MiB up";
      out +=
          fmt::format("# bound: busbw {:.2f} GB/s at {}{} = {:.0f}% of {}{}\n", b.busBw, humanBytes(r->bytes),
                      variants.size() > 1 ? fmt::format(" ({} {})", key.first, key.second) : "",
                      b.fraction * 100, b.name, remark.empty() ? "" : " (" + remark + ")");
    }
  }
  return out;
}

std::string describeHardware(const hw::HostHardware& h) {
  std::vector<std::string> parts;
  std::map<std::pair<double, std::string>, int, std::greater<>> groups;
  int down = 0;
  for (const auto& n : h.nics) {
    if (n.up)
      ++groups[{n.gbps, n.kind}];
    else
      ++down;
  }
  std::vector<std::string> nics;
  for (const auto& [key, count] : groups)
    nics.push_back(key.first > 0 ? fmt::format("{}x{}G {}", count, num(key.first), key.second)
                                 : fmt::format("{}x {} of unknown speed", count, key.second));
  if (down > 0) nics.push_back(fmt::format("{} down", down));
  parts.push_back(nics.empty() ? "no NIC" : fmt::format("{}", fmt::join(nics, " + ")));
  if (h.gpus > 0) {
    std::string g = fmt::format("{}x {}", h.gpus, h.gpuName.empty() ? "GPU (no NVML)" : h.gpuName);
    if (h.nvlink.links > 0)
      g += fmt::format(", NVLink {}x{} GB/s", h.nvlink.links,
                       h.nvlink.gBpsPerLink > 0 ? num(h.nvlink.gBpsPerLink) : "?");
    const hw::PcieLinkInfo* slowest = nullptr;
    for (const auto& l : h.pcie)
      if (l.device.rfind("gpu", 0) == 0 && l.gBps > 0 && (!slowest || l.gBps < slowest->gBps)) slowest = &l;
    if (slowest) g += fmt::format(", PCIe Gen{} x{}", slowest->gen, slowest->width);
    parts.push_back(g);
  }
  if (!h.cpuModel.empty()) parts.push_back(h.cpuModel);
  if (h.memBwGBps > 0) parts.push_back(fmt::format("memory copy {} GB/s", num(h.memBwGBps)));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace ds::report
