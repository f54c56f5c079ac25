#include "bench/gpu/gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "bench/coll/coll_options.h"
#include "bench/exit_codes.h"
#include "engine/common/cli.h"
#include "engine/common/error.h"
#include "engine/common/iso_time.h"
#include "engine/common/version.h"
#include "engine/host/hardware_reader.h"
#include "engine/host/net.h"
#include "reports/json_io.h"
#include "reports/schema/label.h"

namespace ds::bench::gpu {

using report::CopyMethod;
using report::CopyPath;
using report::GpuCopyDevice;
using report::GpuCopyRow;

GpuOptions resolveGpuOptions(const GpuFlags& f) {
  GpuOptions o;
  o.bytes = coll::parseSize(f.size, "--size");
  if (o.bytes < 16 || o.bytes > (64ULL << 30)) {
    throw ConfigError(
        fmt::format("--size {}: give from 16 bytes to 64G per copy (nvbandwidth's default is 512M; "
                    "each row holds two buffers of this size)",
                    cli::shown(f.size)));
  }
  if (f.iters < 1) throw ConfigError(fmt::format("--iters {}: give at least 1 timed copy per row", f.iters));
  if (f.warmup < 0) throw ConfigError(fmt::format("--warmup {}: give 0 or more warm-up copies", f.warmup));
  o.iters = f.iters;
  o.warmup = f.warmup;
  o.devices = f.devices;
  o.jsonPath = f.jsonPath;
  o.label = f.labelGiven || !f.label.empty() ? report::checkLabel(f.label, "--label") : "";
  return o;
}

std::vector<int> resolveDevices(const std::string& text, int count) {
  std::vector<int> out;
  if (text.empty()) {
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  const std::string range = count > 0 ? fmt::format("0-{}", count - 1) : "none";
  for (const auto& item : coll::splitList(text)) {
    const bool digits =
        !item.empty() && item.size() <= 4 &&
        std::all_of(item.begin(), item.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits)
      throw ConfigError(
          fmt::format("--device {}: '{}' is not a GPU number; give CUDA device numbers separated by "
                      "commas, e.g. --device 0,1 (this host has {} GPU(s): {})",
                      cli::shown(text), item, count, range));
    const int d = std::stoi(item);
    if (d >= count)
      throw ConfigError(
          fmt::format("--device {}: there is no GPU {} here; CUDA sees {} GPU(s) ({}), numbered as "
                      "CUDA_VISIBLE_DEVICES leaves them",
                      cli::shown(text), d, count, range));
    if (std::find(out.begin(), out.end(), d) != out.end())
      throw ConfigError(fmt::format("--device {}: GPU {} is named twice", cli::shown(text), d));
    out.push_back(d);
  }
  if (out.empty()) throw ConfigError(fmt::format("--device {}: names no GPU", cli::shown(text)));
  return out;
}

std::vector<GpuCopyRow> planCopyRows(const std::vector<int>& devices, std::size_t bytes, int iters) {
  std::vector<GpuCopyRow> rows;
  auto add = [&](const char* testcase, CopyPath path, CopyMethod method, int device, int peer,
                 bool pageable) {
    GpuCopyRow r;
    r.testcase = testcase;
    r.path = path;
    r.method = method;
    r.device = device;
    r.peer = peer;
    r.pageable = pageable;
    r.bytes = bytes;
    r.iters = iters;
    rows.push_back(std::move(r));
  };
  const auto ce = CopyMethod::kCopyEngine;
  const auto sm = CopyMethod::kKernel;
  for (int d : devices) {
    add("host_to_device_memcpy_ce", CopyPath::kHostToDevice, ce, d, -1, false);
    add("host_to_device_memcpy_ce_pageable", CopyPath::kHostToDevice, ce, d, -1, true);
    add("host_to_device_memcpy_sm", CopyPath::kHostToDevice, sm, d, -1, false);
    add("device_to_host_memcpy_ce", CopyPath::kDeviceToHost, ce, d, -1, false);
    add("device_to_host_memcpy_ce_pageable", CopyPath::kDeviceToHost, ce, d, -1, true);
    add("device_to_host_memcpy_sm", CopyPath::kDeviceToHost, sm, d, -1, false);
    add("device_local_copy", CopyPath::kDeviceLocal, ce, d, -1, false);
    add("device_local_copy_sm", CopyPath::kDeviceLocal, sm, d, -1, false);
  }
  for (int a : devices) {
    for (int b : devices) {
      if (a == b) continue;
      add("device_to_device_memcpy_read_ce", CopyPath::kPeerRead, ce, a, b, false);
      add("device_to_device_memcpy_write_ce", CopyPath::kPeerWrite, ce, a, b, false);
      add("device_to_device_memcpy_read_sm", CopyPath::kPeerRead, sm, a, b, false);
      add("device_to_device_memcpy_write_sm", CopyPath::kPeerWrite, sm, a, b, false);
    }
  }
  return rows;
}

void summariseTimes(GpuCopyRow& row, std::vector<double> timesUs) {
  std::erase_if(timesUs, [](double t) { return !(t > 0); });
  if (timesUs.empty()) {
    row.skipped = true;
    if (row.note.empty()) row.note = "no copy was timed";
    return;
  }
  std::sort(timesUs.begin(), timesUs.end());
  const std::size_t n = timesUs.size();
  const double median = n % 2 ? timesUs[n / 2] : (timesUs[n / 2 - 1] + timesUs[n / 2]) / 2;
  const auto gbps = [&](double us) { return static_cast<double>(row.bytes) / (us * 1e3); };
  row.medianUs = median;
  row.medianGBps = gbps(median);
  row.maxGBps = gbps(timesUs.front());
  row.minGBps = gbps(timesUs.back());
}

void addHostFacts(std::vector<GpuCopyDevice>& devices, const hw::GpuView& nvml,
                  const hw::HostHardware& hardware, std::vector<std::string>& notes) {
  if (!nvml.loaded)
    notes.push_back(fmt::format("NVML gave no facts ({}), so NVLink bounds are unknown",
                                nvml.error.empty() ? "not asked" : nvml.error));
  for (auto& d : devices) {
    const hw::GpuFacts* facts = nullptr;
    for (const auto& g : nvml.gpus)
      if (!d.busId.empty() && g.busId == d.busId) facts = &g;
    if (facts != nullptr) {
      d.arch = facts->arch;
      d.nvlinks = facts->nvlinksActive;
      d.nvlinkRemotes = facts->nvlinkRemotes;
      if (d.name.empty()) d.name = facts->name;
    } else {
      d.nvlinks = -1;
      if (nvml.loaded)
        notes.push_back(fmt::format("NVML does not list GPU {} ({}), so its NVLinks are unknown", d.index,
                                    d.busId.empty() ? "PCI address unknown" : d.busId));
    }
    for (const auto& l : hardware.pcie) {
      if (!d.busId.empty() && l.address == d.busId) {
        d.pcieGen = l.gen;
        d.pcieWidth = l.width;
      }
    }
  }
}

namespace {

void printLine(std::FILE* f, const std::string& s) {
  std::fputs(s.c_str(), f);
  std::fflush(f);
}

}  // namespace

int runGpuWith(const GpuOptions& o, GpuRunEnv& env) {
  if (env.measurer == nullptr) {
    printLine(
        env.err,
        "dsbench gpu: this dsbench was built without CUDA, so it cannot measure GPU copies; use a build "
        "configured with the CUDA toolkit (DS_WITH_CUDA=ON).\n");
    return kExitCuda;
  }
  CopyMeasurer& m = *env.measurer;
  int count = 0;
  try {
    count = m.deviceCount();
  } catch (const Error& e) {
    printLine(env.err, fmt::format("dsbench gpu: no GPU can be measured on this host: {}\n", e.what()));
    return kExitCuda;
  }
  if (count <= 0) {
    printLine(env.err,
              "dsbench gpu: no GPU can be measured on this host: cudaGetDeviceCount found 0 devices.\n");
    return kExitCuda;
  }
  const std::vector<int> devices = resolveDevices(o.devices, count);

  report::GpuCopyRun run;
  run.host = env.host;
  run.startTime = isoUtcNowMs();
  run.version = versionWithCommit();
  run.cudaRuntime = m.runtimeVersion();
  run.cudaDriver = m.driverVersion();
  run.bytes = o.bytes;
  run.iters = o.iters;
  run.warmup = o.warmup;
  run.label = o.label;
  for (int d : devices) run.devices.push_back(m.describe(d));
  hw::GpuView view;
  if (env.nvml != nullptr) view = env.nvml->query();
  auto fixed = hw::fixedGpuQuery(view);
  const hw::HostHardware hardware = hw::readHostHardware(env.roots, fixed.get(), env.host);
  addHostFacts(run.devices, view, hardware, run.notes);

  run.rows = planCopyRows(devices, o.bytes, o.iters);
  std::set<std::pair<int, int>> refused, enabled;
  for (auto& r : run.rows) {
    if (r.peer >= 0) {
      const auto pair = std::make_pair(std::min(r.device, r.peer), std::max(r.device, r.peer));
      if (!enabled.contains(pair) && !refused.contains(pair)) {
        std::string why;
        if (m.enablePeer(pair.first, pair.second, why)) {
          enabled.insert(pair);
        } else {
          refused.insert(pair);
          run.notes.push_back(fmt::format("GPUs {} and {}: no peer rows, {}", pair.first, pair.second, why));
          r.note = why;
        }
      }
      if (refused.contains(pair)) {
        r.skipped = true;
        if (r.note.empty())
          r.note = fmt::format("no peer access between GPUs {} and {}", pair.first, pair.second);
        continue;
      }
    }
    try {
      summariseTimes(r, m.time(r, o.warmup, o.iters));
    } catch (const BackendError& e) {
      // A CUDA error mid-run: nccl-tests' code for it, the row named (a sticky error would fail every
      // row after it, so the run stops here).
      printLine(env.err,
                fmt::format("dsbench gpu: {} (row {} on GPU {}{}); nothing was written.\n", e.what(),
                            r.testcase, r.device, r.peer >= 0 ? fmt::format(" with GPU {}", r.peer) : ""));
      return kExitCuda;
    }
  }
  report::boundCopyRows(run.rows, run.devices);
  printLine(env.out, report::formatGpuCopyTable(run));
  if (!o.jsonPath.empty()) report::writeJsonAtomic(o.jsonPath, report::gpuCopyRunToJson(run));
  return kExitOk;
}

int runGpu(const GpuOptions& o) {
  auto measurer = makeCudaCopyMeasurer();
  auto nvml = hw::nvmlGpuQuery();
  GpuRunEnv env;
  env.measurer = measurer.get();
  env.nvml = nvml.get();
  env.roots = hw::hardwareRootsFromEnv("DSBENCH");
  env.host = net::hostName();
  return runGpuWith(o, env);
}

}  // namespace ds::bench::gpu
