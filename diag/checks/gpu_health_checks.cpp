// Family "gpu", health part: the subset of DCGM's level-1 diagnostics that causes real incidents
// (ECC, PCIe link (and the NICs' links, from sysfs), clock slowdowns, foreign processes, persistence, MIG, compute mode, NVLink), read
// through NVML in the probe child (probes.h). Each finding names the GPU by NVML index (nvidia-smi's),
// PCI bus id and UUID, since indices differ between NVML and CUDA and UUIDs survive reboots.
#include <algorithm>
#include <functional>
#include <set>

#include "diag/check.h"
#include "diag/probes.h"
#include "diag/util.h"
#include "engine/host/hardware_reader.h"
#include "engine/host/nvml_api.h"

namespace ds::diag {
namespace {

// What one GPU shows for one check; nullopt from an inspector: NVML does not report it there.
struct Verdict {
  DiagStatus status = DiagStatus::kPass;
  std::string text;
  std::string remedy;
};
using Inspector = std::function<std::optional<Verdict>(Context&, const NvmlDevice&)>;

std::string label(const NvmlDevice& d) {
  return fmt::format("GPU {} ({}, {})", d.index, d.busId.empty() ? "bus id unknown" : d.busId,
                     d.uuid.empty() ? "UUID unknown" : d.uuid);
}

int rankOf(DiagStatus s) { return s == DiagStatus::kFail ? 2 : s == DiagStatus::kWarn ? 1 : 0; }

// Runs `inspect` on every GPU NVML lists and folds the verdicts: the worst status, the problems
// (or, when all pass, what was seen), each distinct remedy once.
Finding perGpu(Context& c, const std::string& what, const Inspector& inspect) {
  auto& g = c.gpu();
  if (!g.nvmlLoaded || !g.nvmlError.empty()) {
    return skip(fmt::format("NVML is not usable ({}), so the {} cannot be read (gpu.nvml says more)",
                            g.nvmlError.empty() ? "not loaded" : g.nvmlError, what));
  }
  if (g.nvmlDevices.empty()) return skip(fmt::format("NVML lists no GPU, so there is no {} to read", what));
  Json gpus = Json::array();
  std::vector<std::string> problems, passes, remedies, unsupported;
  std::set<std::string> distinctPass;
  DiagStatus worst = DiagStatus::kPass;
  for (const auto& d : g.nvmlDevices) {
    Json entry{{"index", d.index}, {"bus_id", d.busId}, {"uuid", d.uuid}, {"name", d.name}};
    auto v = inspect(c, d);
    if (!v) {
      unsupported.push_back(label(d));
      entry["status"] = "not reported";
      gpus.push_back(entry);
      continue;
    }
    entry["status"] = report::diagStatusName(v->status);
    entry["text"] = v->text;
    gpus.push_back(entry);
    if (v->status == DiagStatus::kPass) {
      passes.push_back(label(d) + ": " + v->text);
      distinctPass.insert(v->text);
      continue;
    }
    if (rankOf(v->status) > rankOf(worst)) worst = v->status;
    problems.push_back(label(d) + ": " + v->text);
    if (std::find(remedies.begin(), remedies.end(), v->remedy) == remedies.end()) remedies.push_back(v->remedy);
  }
  Json data{{"gpus", gpus}};
  if (unsupported.size() == g.nvmlDevices.size()) {
    return skip(fmt::format("NVML does not report the {} on any GPU ({})", what, join(unsupported, "; ")), data);
  }
  if (worst == DiagStatus::kPass) {
    std::string msg = distinctPass.size() == 1 && passes.size() > 1
                          ? fmt::format("All {} GPUs: {}", passes.size(), *distinctPass.begin())
                          : join(passes, "; ");
    if (!unsupported.empty()) msg += fmt::format(" (not reported on {})", join(unsupported, "; "));
    return pass(msg, data);
  }
  return {worst, join(problems, "; "), join(remedies, " "), data};
}

Verdict bad(DiagStatus s, std::string text, std::string remedy) { return {s, std::move(text), std::move(remedy)}; }

std::optional<Verdict> ecc(Context&, const NvmlDevice& d) {
  if (!d.eccEnabled && !d.eccVolatileUncorrected && !d.eccAggregateUncorrected && !d.remapPending &&
      !d.retiredPagesPending) {
    return std::nullopt;
  }
  int i = d.index;
  if (d.remapFailure.value_or(false)) {
    return bad(DiagStatus::kFail, "a row remapping failed: the GPU has no spare memory rows left",
               "Drain the node and have the GPU replaced (nvidia-smi -q -d ROW_REMAPPER shows the same).");
  }
  if (d.eccVolatileUncorrected.value_or(0) > 0) {
    return bad(DiagStatus::kFail,
               fmt::format("{} uncorrectable ECC error(s) since the driver loaded{}", *d.eccVolatileUncorrected,
                           d.remapPending.value_or(false) ? ", and a row remap waits for a GPU reset" : ""),
               fmt::format("Drain the node: an uncorrectable error kills the process touching that memory (Xid 48/94/95 "
                           "in dmesg). Reset the GPU once idle (nvidia-smi -r -i {}); if errors return, replace it.",
                           i));
  }
  if (d.remapPending.value_or(false) || d.retiredPagesPending.value_or(false)) {
    return bad(DiagStatus::kWarn,
               fmt::format("a {} waits for a GPU reset: until then the faulty memory is still in use",
                           d.remapPending.value_or(false) ? "row remap" : "page retirement"),
               fmt::format("Reset the GPU while it is idle (nvidia-smi -r -i {}) or reboot the node before long jobs.", i));
  }
  if (d.eccEnabled && !*d.eccEnabled) {
    return bad(DiagStatus::kWarn, "ECC is disabled: memory errors silently corrupt results",
               fmt::format("Enable it (nvidia-smi -i {} -e 1, as root) and reboot.", i));
  }
  if (d.eccAggregateUncorrected.value_or(0) > 0) {
    return bad(DiagStatus::kWarn,
               fmt::format("{} uncorrectable ECC error(s) over the GPU's lifetime (none since the driver loaded)",
                           *d.eccAggregateUncorrected),
               fmt::format("Watch the count (nvidia-smi -q -d ECC -i {}): if it grows, drain the node and replace the GPU.",
                           i));
  }
  return Verdict{DiagStatus::kPass,
                 fmt::format("ECC {}, 0 uncorrectable errors, no remap pending",
                             d.eccEnabled.value_or(true) ? "on" : "state unknown"),
                 ""};
}

std::optional<Verdict> pcieLink(Context&, const NvmlDevice& d) {
  if (!d.pcieWidth || !d.pcieMaxWidth) return std::nullopt;
  std::string gen = d.pcieGen && d.pcieMaxGen ? fmt::format("Gen{} of Gen{}", *d.pcieGen, *d.pcieMaxGen) : "Gen unknown";
  std::string now = fmt::format("x{} of x{}, {}", *d.pcieWidth, *d.pcieMaxWidth, gen);
  if (*d.pcieWidth < *d.pcieMaxWidth) {
    return bad(DiagStatus::kWarn,
               fmt::format("the PCIe link runs at {}: host-GPU copies and GPUDirect traffic get {}/{} of the bandwidth "
                           "(a classic slow node)",
                           now, *d.pcieWidth, *d.pcieMaxWidth),
               fmt::format("Reseat the GPU or its riser, check the slot's BIOS setting (lspci -vv -s {} shows LnkSta), or "
                           "drain the node.",
                           d.busId.empty() ? "<bus id>" : d.busId));
  }
  // An idle GPU lowers its link generation to save power; only a busy one at a lower generation is degraded.
  bool idle = d.clockEventReasons && (*d.clockEventReasons & nvmlClocksEventReasonGpuIdle) != 0;
  if (d.pcieGen && d.pcieMaxGen && *d.pcieGen < *d.pcieMaxGen) {
    if (idle || !d.clockEventReasons) return Verdict{DiagStatus::kPass, now + " (idle GPUs lower the generation to save power)", ""};
    return bad(DiagStatus::kWarn, fmt::format("the PCIe link runs at {} while the GPU is busy", now),
               fmt::format("Check the slot and riser (lspci -vv -s {} shows LnkSta), or drain the node.",
                           d.busId.empty() ? "<bus id>" : d.busId));
  }
  return Verdict{DiagStatus::kPass, now, ""};
}

// gpu.pcie_link: the GPUs' links (NVML), then the NICs' own (sysfs: engine/host/hardware_reader.h). A NIC
// that trained below its width or generation starves GPUDirect RDMA as a GPU's link would, and NVML does
// not see it.
Finding pcieLinks(Context& c) {
  Finding f = perGpu(c, "PCIe link", pcieLink);
  Json nics = Json::array();
  std::vector<std::string> slow, addresses;
  for (const auto& d : hw::readNicPciDevices({c.paths().sysfs, c.paths().procfs})) {
    auto st = hw::readPcieLinkState(d.path);
    if (!st) continue;
    const std::string addr = d.path.filename().string();
    const bool narrow = st->width > 0 && st->maxWidth > 0 && st->width < st->maxWidth;
    const bool slowGen = st->gen > 0 && st->maxGen > 0 && st->gen < st->maxGen;
    auto num = [](int v) { return v > 0 ? std::to_string(v) : std::string("?"); };
    const std::string now = fmt::format("x{} of x{}, Gen{} of Gen{}", num(st->width), num(st->maxWidth), num(st->gen),
                                        num(st->maxGen));
    nics.push_back({{"name", d.name},
                    {"bus_id", addr},
                    {"link", now},
                    {"status", narrow || slowGen ? "WARN" : "PASS"}});
    if (!narrow && !slowGen) continue;
    slow.push_back(fmt::format("NIC {} ({}): the PCIe link runs at {}", d.name, addr, now));
    addresses.push_back(addr);
  }
  if (!nics.empty()) f.data["nics"] = nics;
  if (slow.empty()) {
    if (!nics.empty()) f.message += fmt::format("; {} NIC link(s) at their full width and generation", nics.size());
    return f;
  }
  std::string problem = fmt::format("{}: its RDMA and GPUDirect traffic gets that share of the bandwidth", join(slow, "; "));
  std::string remedy = fmt::format("Reseat the NIC or move it to a slot of its full width, check the slot's BIOS setting "
                                   "(lspci -vv -s {} shows LnkCap and LnkSta), or drain the node.",
                                   join(addresses, ", "));
  if (f.status == DiagStatus::kWarn || f.status == DiagStatus::kFail) {
    return {f.status, f.message + "; " + problem, f.remedy + " " + remedy, f.data};
  }
  return warn(problem, remedy, f.data);
}

std::optional<Verdict> clocks(Context&, const NvmlDevice& d) {
  if (!d.clockEventReasons) return std::nullopt;
  std::uint64_t r = *d.clockEventReasons;
  struct Reason {
    std::uint64_t bit;
    const char* name;
    bool hardware;
  };
  static const Reason kSlowdowns[] = {
      {nvmlClocksThrottleReasonHwSlowdown, "HW slowdown (power brake or over-temperature signalled by the board)", true},
      {nvmlClocksThrottleReasonHwThermalSlowdown, "HW thermal slowdown", true},
      {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "HW power brake (the power supply asserts it)", true},
      {nvmlClocksEventReasonSwThermalSlowdown, "SW thermal slowdown", false},
      {nvmlClocksEventReasonSwPowerCap, "SW power cap", false},
  };
  std::vector<std::string> hw, sw;
  for (const auto& k : kSlowdowns) {
    if ((r & k.bit) != 0) (k.hardware ? hw : sw).emplace_back(k.name);
  }
  int i = d.index;
  if (!hw.empty()) {
    return bad(DiagStatus::kFail,
               fmt::format("clocks are held down by {} (reasons 0x{:x}): every rank waits for this GPU", join(hw, ", "), r),
               fmt::format("Check cooling and power (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {}); drain the node "
                           "until it is fixed.",
                           i));
  }
  if (!sw.empty()) {
    return bad(DiagStatus::kWarn, fmt::format("clocks are reduced by {} (reasons 0x{:x})", join(sw, ", "), r),
               fmt::format("Check the power limit and temperature (nvidia-smi -q -d PERFORMANCE,POWER -i {}); a lowered "
                           "limit (nvidia-smi -pl) or poor airflow makes this GPU the straggler.",
                           i));
  }
  return Verdict{DiagStatus::kPass,
                 (r & nvmlClocksEventReasonGpuIdle) != 0 ? "no slowdown (idle)" : fmt::format("no slowdown (reasons 0x{:x})", r),
                 ""};
}

std::optional<Verdict> foreignProcesses(Context&, const NvmlDevice& d) {
  if (!d.processes) return std::nullopt;
  if (d.processes->empty()) return Verdict{DiagStatus::kPass, "no process holds GPU memory", ""};
  std::vector<std::string> parts, pids;
  for (const auto& p : *d.processes) {
    parts.push_back(fmt::format("pid {} ({}{})", p.pid, p.name.empty() ? "name unknown" : p.name,
                                p.usedBytes > 0 ? ", " + humanBytes(static_cast<double>(p.usedBytes)) : ""));
    pids.push_back(std::to_string(p.pid));
  }
  return bad(DiagStatus::kWarn,
             fmt::format("{} other process(es) hold GPU memory: {}; the job gets less memory and shares the SMs",
                         d.processes->size(), join(parts, ", ")),
             fmt::format("Stop them if they are leftovers of an earlier job (kill {}), or wait; nvidia-smi "
                         "--query-compute-apps=pid,process_name,used_memory --format=csv lists them.",
                         join(pids, " ")));
}

std::optional<Verdict> persistence(Context&, const NvmlDevice& d) {
  if (!d.persistence) return std::nullopt;
  if (*d.persistence) return Verdict{DiagStatus::kPass, "persistence mode on", ""};
  return bad(DiagStatus::kWarn,
             "persistence mode is off: the driver tears the GPU down whenever no process uses it, so every job start "
             "pays its initialisation again (seconds per GPU) and clock/ECC settings can reset",
             "Run nvidia-persistenced at boot (or nvidia-smi -pm 1 as root).");
}

std::optional<Verdict> migMode(Context& c, const NvmlDevice& d) {
  if (!d.migCurrent) return std::nullopt;
  int i = d.index;
  if (*d.migCurrent == NVML_DEVICE_MIG_ENABLE) {
    return bad(c.wantsGpu() ? DiagStatus::kFail : DiagStatus::kWarn,
               "MIG is on: CUDA sees only MIG instances (MIG-<uuid>), each a slice of the GPU, and NCCL cannot "
               "communicate between instances",
               fmt::format("Disable MIG while the GPU is idle (nvidia-smi -i {} -mig 0, as root, then reset the GPU), "
                           "or run on a node without MIG.",
                           i));
  }
  if (d.migPending && *d.migPending != *d.migCurrent) {
    return bad(DiagStatus::kWarn, "a MIG mode change is pending: it takes effect at the next GPU reset",
               fmt::format("Reset the GPU while idle (nvidia-smi -r -i {}) so that the mode is settled before the job.", i));
  }
  return Verdict{DiagStatus::kPass, "MIG off", ""};
}

std::optional<Verdict> computeMode(Context& c, const NvmlDevice& d) {
  if (!d.computeMode) return std::nullopt;
  int mode = *d.computeMode, i = d.index;
  auto& g = c.gpu();
  std::size_t visible = g.devices.empty() ? g.nvmlDevices.size() : g.devices.size();
  int ranks = c.localWorldSize();
  if (mode == NVML_COMPUTEMODE_PROHIBITED) {
    return bad(c.wantsGpu() ? DiagStatus::kFail : DiagStatus::kWarn,
               "compute mode is Prohibited: no process can create a CUDA context on this GPU",
               fmt::format("Set it back to Default (nvidia-smi -i {} -c DEFAULT, as root).", i));
  }
  if (mode == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS || mode == NVML_COMPUTEMODE_EXCLUSIVE_THREAD) {
    std::string name = mode == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS ? "Exclusive_Process" : "Exclusive_Thread";
    if (static_cast<std::size_t>(ranks) > visible) {
      return bad(DiagStatus::kFail,
                 fmt::format("compute mode is {} but {} ranks on this node share {} visible GPU(s): the second rank "
                             "on a GPU fails with \"all CUDA-capable devices are busy or unavailable\"",
                             name, ranks, visible),
                 fmt::format("Start one rank per GPU, or set the mode to Default (nvidia-smi -i {} -c DEFAULT, as root).", i));
    }
    return Verdict{DiagStatus::kPass, name + " (one process per GPU; fine with one rank per GPU)", ""};
  }
  return Verdict{DiagStatus::kPass, "compute mode Default", ""};
}

std::optional<Verdict> nvlink(Context& c, const NvmlDevice& d) {
  std::vector<std::string> down;
  for (std::size_t k = 0; k < d.nvlinkIds.size(); ++k) {
    if (d.nvlinkActive[k] == 0) down.push_back(std::to_string(d.nvlinkIds[k]));
  }
  std::size_t total = d.nvlinkIds.size();
  if (total == 0) return Verdict{DiagStatus::kPass, "no NVLink (PCIe only)", ""};
  if (down.empty()) return Verdict{DiagStatus::kPass, fmt::format("{} NVLink links active", total), ""};
  // A single GPU sends nothing over NVLink; its links are often down in a VM or a one-GPU slice.
  if (c.gpu().nvmlDevices.size() == 1) {
    return Verdict{DiagStatus::kPass,
                   fmt::format("{} of {} NVLink links down; with one GPU on the node NVLink carries no traffic",
                               down.size(), total),
                   ""};
  }
  std::string which = down.size() == total ? "all its" : fmt::format("{} of its", down.size());
  return bad(DiagStatus::kWarn,
             fmt::format("{} {} NVLink links are down (links {}): NCCL falls back to fewer links or PCIe", which, total,
                         join(down, ", ")),
             fmt::format("Check the links (nvidia-smi nvlink -s -i {}); on NVSwitch systems check the fabric manager "
                         "(systemctl status nvidia-fabricmanager); reset the GPU or have the node serviced.",
                         d.index));
}

}  // namespace

std::vector<CheckDef> gpuHealthChecks() {
  auto def = [](const char* id, const char* what, const char* description, Inspector inspect) {
    return CheckDef{id, "gpu", description, [what, inspect](Context& c) { return perGpu(c, what, inspect); }};
  };
  return {
      def("gpu.ecc", "ECC state", "Per GPU (NVML): uncorrectable ECC errors, volatile and aggregate; row remaps or "
          "page retirements pending", ecc),
      {"gpu.pcie_link", "gpu",
       "Per GPU (NVML) and per NIC (sysfs): PCIe link width and generation against the maximum", pcieLinks},
      def("gpu.clocks", "clock event reasons", "Per GPU (NVML): clocks held down by HW/SW slowdowns or power caps", clocks),
      def("gpu.foreign_processes", "process list", "Per GPU (NVML): other processes holding GPU memory (pid, name)",
          foreignProcesses),
      def("gpu.persistence_mode", "persistence mode", "Per GPU (NVML): persistence mode on", persistence),
      def("gpu.mig_mode", "MIG mode", "Per GPU (NVML): MIG off (NCCL cannot use MIG instances together)", migMode),
      def("gpu.compute_mode", "compute mode",
          "Per GPU (NVML): compute mode allows the ranks per GPU (Exclusive_Process breaks two ranks on one GPU)",
          computeMode),
      def("gpu.nvlink", "NVLink state", "Per GPU (NVML): every NVLink link active", nvlink),
  };
}

}  // namespace ds::diag
