#include "reports/gpu/gpu_copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "engine/common/error.h"
#include "engine/host/gpu_query.h"
#include "engine/host/hardware_reader.h"
#include "reports/input_file.h"
#include "reports/json_io.h"
#include "reports/schema/schema_version.h"

namespace ds::report {

using nlohmann::json;

namespace gpu_copy_detail {

// Three significant figures, no exponent: 63.0 -> "63", 3352.3 -> "3352", 0.984 -> "0.984".
std::string gbNum(double v) {
  std::string s = fmt::format("{:.3g}", v);
  if (s.find('e') != std::string::npos) s = fmt::format("{:.0f}", v);
  return s;
}

const GpuCopyDevice* deviceOf(const std::vector<GpuCopyDevice>& devices, int index) {
  for (const auto& d : devices)
    if (d.index == index) return &d;
  return nullptr;
}

struct Bound {
  double gBps = 0;
  std::string name, why;
};

Bound unknown(std::string why) { return Bound{0, "", std::move(why)}; }

Bound pcieBound(const GpuCopyDevice& d) {
  if (d.pcieGen <= 0 || d.pcieWidth <= 0)
    return unknown(
        fmt::format("the PCIe link of GPU {}{} is unknown: neither sysfs nor NVML gave its generation "
                    "and width",
                    d.index, d.busId.empty() ? "" : " (" + d.busId + ")"));
  const double g = hw::pcieGBps(d.pcieGen, d.pcieWidth);
  if (g <= 0)
    return unknown(
        fmt::format("PCIe Gen{} of GPU {} is not a generation this dsperf knows", d.pcieGen, d.index));
  return Bound{g, fmt::format("PCIe Gen{} x{}", d.pcieGen, d.pcieWidth), ""};
}

Bound localBound(const GpuCopyDevice& d) {
  const double mem = memoryGBps(d);
  if (mem <= 0)
    return unknown(fmt::format(
        "the memory clock or bus width of GPU {} is unknown, so its memory bandwidth is", d.index));
  return Bound{mem / 2, fmt::format("memory {} GB/s / 2 (read + write)", gbNum(mem)), ""};
}

Bound peerBound(const GpuCopyDevice& a, const GpuCopyDevice& b) {
  for (const GpuCopyDevice* g : {&a, &b}) {
    if (g->nvlinks < 0)
      return unknown(
          fmt::format("NVML did not answer for GPU {}, so whether NVLink joins GPUs {} and {} (and at what "
                      "rate) is unknown",
                      g->index, a.index, b.index));
    if (g->nvlinks > 0 && g->nvlinkRemotes.empty())
      return unknown(
          fmt::format("NVML did not say where the {} NVLinks of GPU {} go, so the links between GPUs {} "
                      "and {} are unknown",
                      g->nvlinks, g->index, a.index, b.index));
  }
  auto count = [](const GpuCopyDevice& g, const std::string& remote) {
    if (remote.empty()) return 0;
    return static_cast<int>(std::count(g.nvlinkRemotes.begin(), g.nvlinkRemotes.end(), remote));
  };
  const int links = count(a, b.busId) + std::min(count(a, "switch"), count(b, "switch"));
  if (links > 0) {
    const double rate = hw::nvlinkGBpsPerLink(a.arch, a.name);
    if (rate <= 0)
      return unknown(
          fmt::format("the rate of one NVLink of GPU {} ({}, architecture {}) is not known to this dsperf",
                      a.index, a.name.empty() ? "name unknown" : a.name, a.arch));
    return Bound{links * rate, fmt::format("NVLink {}x{} GB/s", links, gbNum(rate)), ""};
  }
  Bound pa = pcieBound(a), pb = pcieBound(b);
  if (pa.gBps <= 0) return pa;
  if (pb.gBps <= 0) return pb;
  const Bound& slower = pa.gBps <= pb.gBps ? pa : pb;
  return Bound{slower.gBps, fmt::format("{} (no NVLink between them)", slower.name), ""};
}

Bound rowBound(const GpuCopyRow& r, const std::vector<GpuCopyDevice>& devices) {
  const GpuCopyDevice* d = deviceOf(devices, r.device);
  if (d == nullptr)
    return unknown(fmt::format("GPU {} is not among the devices this run recorded", r.device));
  switch (r.path) {
    case CopyPath::kHostToDevice:
    case CopyPath::kDeviceToHost:
      return pcieBound(*d);
    case CopyPath::kDeviceLocal:
      return localBound(*d);
    case CopyPath::kPeerRead:
    case CopyPath::kPeerWrite: {
      const GpuCopyDevice* p = deviceOf(devices, r.peer);
      if (p == nullptr)
        return unknown(fmt::format("GPU {} is not among the devices this run recorded", r.peer));
      return peerBound(*d, *p);
    }
  }
  return unknown("unknown copy path");
}

std::string hostMemory(const GpuCopyRow& r) {
  if (r.path != CopyPath::kHostToDevice && r.path != CopyPath::kDeviceToHost) return "-";
  return r.pageable ? "pageable" : "pinned";
}

std::string sizeText(std::size_t bytes) {
  if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= (1ULL << 10) && bytes % (1ULL << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

CopyPath pathFromJson(const json& j) {
  const std::string s = j.get<std::string>();
  for (CopyPath p : {CopyPath::kHostToDevice, CopyPath::kDeviceToHost, CopyPath::kDeviceLocal,
                     CopyPath::kPeerRead, CopyPath::kPeerWrite})
    if (s == copyPathName(p)) return p;
  throw json::type_error::create(302,
                                 "path must be host_to_device, device_to_host, device_local, peer_read or "
                                 "peer_write, but is \"" +
                                     s + "\"",
                                 &j);
}

}  // namespace gpu_copy_detail

namespace gcd =
    gpu_copy_detail;  // named, not anonymous: a unity batch must not mix these helpers with another file's

const char* copyPathName(CopyPath p) {
  switch (p) {
    case CopyPath::kHostToDevice:
      return "host_to_device";
    case CopyPath::kDeviceToHost:
      return "device_to_host";
    case CopyPath::kDeviceLocal:
      return "device_local";
    case CopyPath::kPeerRead:
      return "peer_read";
    case CopyPath::kPeerWrite:
      return "peer_write";
  }
  return "?";
}

const char* copyMethodName(CopyMethod m) { return m == CopyMethod::kKernel ? "sm" : "ce"; }

double memoryGBps(const GpuCopyDevice& d) {
  if (d.memClockMHz <= 0 || d.memBusWidthBits <= 0) return 0;
  return 2.0 * d.memClockMHz * 1e6 * (d.memBusWidthBits / 8.0) / 1e9;
}

void boundCopyRows(std::vector<GpuCopyRow>& rows, const std::vector<GpuCopyDevice>& devices) {
  for (auto& r : rows) {
    gcd::Bound b = gcd::rowBound(r, devices);
    r.boundGBps = b.gBps;
    r.boundName = b.name;
    r.boundWhy = b.why;
    r.fraction = (b.gBps > 0 && !r.skipped && r.medianGBps > 0) ? r.medianGBps / b.gBps : 0;
  }
}

std::string formatGpuCopyTable(const GpuCopyRun& run) {
  std::string out;
  out += fmt::format(
      "# dsbench gpu: {} GPU(s) on {}, {} bytes ({}) per copy, median of {} timed repetitions after {} "
      "warm-up; GB/s = 1e9 bytes/s, bytes copied once\n",
      run.devices.size(), run.host.empty() ? "this host" : run.host, run.bytes, gcd::sizeText(run.bytes),
      run.iters, run.warmup);
  for (const auto& d : run.devices) {
    const double mem = memoryGBps(d);
    out += fmt::format(
        "# gpu {}: {}{}, PCIe {}, memory {}, NVLinks {}\n", d.index, d.name.empty() ? "?" : d.name,
        d.busId.empty() ? "" : " (" + d.busId + ")",
        d.pcieGen > 0 && d.pcieWidth > 0 ? fmt::format("Gen{} x{}", d.pcieGen, d.pcieWidth) : "unknown",
        mem > 0 ? gcd::gbNum(mem) + " GB/s" : "unknown",
        d.nvlinks >= 0 ? std::to_string(d.nvlinks) : "unknown");
  }
  out += "#\n";
  out += fmt::format("# {:<37} {:>3} {:>4} {:>8} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>5}  {}\n",
                     "testcase", "gpu", "peer", "host", "size", "time(us)", "median", "min", "max", "bound",
                     "%", "bound is");
  out += fmt::format("# {:<37} {:>3} {:>4} {:>8} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9}\n", "", "", "",
                     "memory", "", "", "GB/s", "GB/s", "GB/s", "GB/s");
  std::map<std::string, std::vector<std::string>> unknownWhy;  // why -> rows
  for (const auto& r : run.rows) {
    const std::string peer = r.peer >= 0 ? std::to_string(r.peer) : "-";
    const std::string bound = r.boundGBps > 0 ? fmt::format("{:.2f}", r.boundGBps) : "-";
    const std::string pct = r.fraction > 0 ? fmt::format("{:.0f}", r.fraction * 100) : "-";
    if (r.boundGBps <= 0 && !r.boundWhy.empty())
      unknownWhy[r.boundWhy].push_back(
          fmt::format("{} gpu {}{}", r.testcase, r.device, r.peer >= 0 ? fmt::format("->{}", r.peer) : ""));
    if (r.skipped) {
      out += fmt::format("  {:<37} {:>3} {:>4} {:>8} {:>6} {:>10}  skipped: {}\n", r.testcase, r.device, peer,
                         gcd::hostMemory(r), gcd::sizeText(r.bytes), "-", r.note);
      continue;
    }
    out +=
        fmt::format("  {:<37} {:>3} {:>4} {:>8} {:>6} {:>10.1f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9} {:>5}  {}\n",
                    r.testcase, r.device, peer, gcd::hostMemory(r), gcd::sizeText(r.bytes), r.medianUs,
                    r.medianGBps, r.minGBps, r.maxGBps, bound, pct, r.boundGBps > 0 ? r.boundName : "-");
  }
  for (const auto& [why, rows] : unknownWhy) {
    out += fmt::format("# bound -: {} ({} row(s): {}{})\n", why, rows.size(), rows.front(),
                       rows.size() > 1 ? ", ..." : "");
  }
  for (const auto& n : run.notes) out += "# note: " + n + "\n";
  return out;
}

json gpuCopyRunToJson(const GpuCopyRun& run) {
  json devices = json::array();
  for (const auto& d : run.devices) {
    const double mem = memoryGBps(d);
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"bus_id", d.busId},
                       {"arch", d.arch},
                       {"pcie_gen", d.pcieGen},
                       {"pcie_width", d.pcieWidth},
                       {"mem_clock_mhz", d.memClockMHz},
                       {"mem_bus_width_bits", d.memBusWidthBits},
                       {"memory_gbps", mem > 0 ? json(mem) : json(nullptr)},
                       {"nvlinks", d.nvlinks},
                       {"nvlink_remotes", d.nvlinkRemotes}});
  }
  json rows = json::array();
  for (const auto& r : run.rows) {
    json bound = r.boundGBps > 0
                     ? json{{"name", r.boundName},
                            {"gbps", r.boundGBps},
                            {"fraction", r.fraction > 0 ? json(r.fraction) : json(nullptr)},
                            {"why", ""}}
                     : json{{"name", "unknown"}, {"gbps", 0}, {"fraction", nullptr}, {"why", r.boundWhy}};
    const bool hostRow = r.path == CopyPath::kHostToDevice || r.path == CopyPath::kDeviceToHost;
    rows.push_back({{"testcase", r.testcase},
                    {"path", copyPathName(r.path)},
                    {"method", copyMethodName(r.method)},
                    {"host_memory", hostRow ? json(r.pageable ? "pageable" : "pinned") : json(nullptr)},
                    {"device", r.device},
                    {"peer", r.peer >= 0 ? json(r.peer) : json(nullptr)},
                    {"bytes", r.bytes},
                    {"iters", r.iters},
                    {"skipped", r.skipped},
                    {"note", r.note},
                    {"median_gbps", r.medianGBps},
                    {"min_gbps", r.minGBps},
                    {"max_gbps", r.maxGBps},
                    {"median_us", r.medianUs},
                    {"bound", std::move(bound)}});
  }
  json meta = {{"host", run.host},
               {"start_time", run.startTime},
               {"version", run.version},
               {"cuda_runtime", run.cudaRuntime},
               {"cuda_driver", run.cudaDriver}};
  if (!run.label.empty()) meta["label"] = run.label;
  return {{"schema", kGpuSchemaName},
          {"schema_version", kSchemaVersion},
          {"metadata", std::move(meta)},
          {"args", {{"bytes", run.bytes}, {"iters", run.iters}, {"warmup", run.warmup}}},
          {"devices", std::move(devices)},
          {"rows", std::move(rows)},
          {"notes", run.notes}};
}

GpuCopyRun gpuCopyRunFromJson(const json& doc, const std::string& origin) {
  if (!doc.is_object() || textOr(doc, "schema", "") != kGpuSchemaName)
    throw ConfigError(
        fmt::format("{} is not a dsbench gpu result (schema {}); write one with `dsbench gpu -J FILE`",
                    origin, kGpuSchemaName));
  checkSchemaVersion(doc, kGpuSchemaName, origin);
  return readFields(doc, origin, kGpuSchemaName, [&] {
    GpuCopyRun run;
    const json& meta = doc.at("metadata");
    run.host = textOr(meta, "host", "");
    run.startTime = textOr(meta, "start_time", "");
    run.version = textOr(meta, "version", "");
    run.cudaRuntime = textOr(meta, "cuda_runtime", "");
    run.cudaDriver = textOr(meta, "cuda_driver", "");
    run.label = textOr(meta, "label", "");
    const json& args = doc.at("args");
    readTo(args.at("bytes"), run.bytes);
    readTo(args.at("iters"), run.iters);
    readTo(args.at("warmup"), run.warmup);
    for (const auto& j : doc.at("devices")) {
      GpuCopyDevice d;
      readTo(j.at("index"), d.index);
      j.at("name").get_to(d.name);
      j.at("bus_id").get_to(d.busId);
      readTo(j.at("arch"), d.arch);
      readTo(j.at("pcie_gen"), d.pcieGen);
      readTo(j.at("pcie_width"), d.pcieWidth);
      readTo(j.at("mem_clock_mhz"), d.memClockMHz);
      readTo(j.at("mem_bus_width_bits"), d.memBusWidthBits);
      readTo(j.at("nvlinks"), d.nvlinks);
      j.at("nvlink_remotes").get_to(d.nvlinkRemotes);
      run.devices.push_back(std::move(d));
    }
    for (const auto& j : doc.at("rows")) {
      GpuCopyRow r;
      j.at("testcase").get_to(r.testcase);
      r.path = gcd::pathFromJson(j.at("path"));
      r.method = j.at("method").get<std::string>() == "sm" ? CopyMethod::kKernel : CopyMethod::kCopyEngine;
      r.pageable = textOr(j, "host_memory", "") == "pageable";
      readTo(j.at("device"), r.device);
      r.peer = j.at("peer").is_null() ? -1 : readInt<int>(j.at("peer"));
      readTo(j.at("bytes"), r.bytes);
      readTo(j.at("iters"), r.iters);
      j.at("skipped").get_to(r.skipped);
      j.at("note").get_to(r.note);
      j.at("median_gbps").get_to(r.medianGBps);
      j.at("min_gbps").get_to(r.minGBps);
      j.at("max_gbps").get_to(r.maxGBps);
      j.at("median_us").get_to(r.medianUs);
      const json& b = j.at("bound");
      b.at("gbps").get_to(r.boundGBps);
      if (r.boundGBps > 0) b.at("name").get_to(r.boundName);
      r.boundWhy = textOr(b, "why", "");
      r.fraction = b.at("fraction").is_null() ? 0 : b.at("fraction").get<double>();
      run.rows.push_back(std::move(r));
    }
    doc.at("notes").get_to(run.notes);
    return run;
  });
}

std::optional<GpuCopyRun> readGpuCopyRunFile(const std::string& path) {
  const std::string text = readInputFile(path);
  // A cheap look before parsing: some "schema" key whose value is "dsperf.gpu".
  bool names = false;
  for (std::size_t at = text.find("\"schema\""); at != std::string::npos && !names;
       at = text.find("\"schema\"", at + 1)) {
    std::size_t p = text.find_first_not_of(" \t\r\n", at + 8);
    if (p == std::string::npos || text[p] != ':') continue;
    p = text.find_first_not_of(" \t\r\n", p + 1);
    names = p != std::string::npos && text.compare(p, 12, "\"dsperf.gpu\"") == 0;
  }
  if (!names) return std::nullopt;
  const json doc = parseJsonText(text, path);
  if (!doc.is_object() || textOr(doc, "schema", "") != kGpuSchemaName) return std::nullopt;
  return gpuCopyRunFromJson(doc, path);
}

}  // namespace ds::report
