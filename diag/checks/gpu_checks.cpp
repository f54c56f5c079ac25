// Family "gpu": what CUDA will see (REFERENCE.md §6 DCGM variables, §7.5). libcuda and
// libnvidia-ml are dlopen'ed in a child process (probes.h); with no GPU the family says so: a
// failure only when the job asked for cuda/nccl, otherwise a skip with the reason.
#include <algorithm>
#include <set>

#include "diag/check.h"
#include "diag/checks/visible_devices.h"
#include "diag/probes.h"
#include "diag/util.h"

namespace ds::diag {
namespace {

bool isIndex(const std::string& s) { return !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit); }
bool isUuid(const std::string& s) { return s.rfind("GPU-", 0) == 0 && s.size() > 4; }
bool isMig(const std::string& s) { return s.rfind("MIG-", 0) == 0 && s.size() > 4; }

}  // namespace

VisibleSpec parseVisible(const std::optional<std::string>& v) {
  VisibleSpec s;
  if (!v) return s;
  s.set = true;
  if (trim(*v).empty()) {
    s.kind = "none";
    return s;
  }
  std::set<std::string> seen;
  bool bad = false, idx = false, uuid = false, mig = false;
  for (const auto& raw : split(*v, ',')) {
    std::string e = trim(raw);
    if (bad) {
      s.ignored.push_back(e);
      continue;
    }
    if (isIndex(e)) idx = true;
    else if (isUuid(e)) uuid = true;
    else if (isMig(e)) mig = true;
    else {
      // CUDA stops at the first entry it cannot parse ("-1" is the documented way to hide all).
      bad = true;
      s.ignored.push_back(e);
      continue;
    }
    if (!seen.insert(e).second) s.duplicates.push_back(e);
    s.entries.push_back(e);
  }
  int kinds = idx + uuid + mig;
  s.kind = kinds == 0 ? "none" : kinds > 1 ? "mixed" : idx ? "indices" : uuid ? "uuids" : "mig";
  return s;
}

namespace {

// No usable GPU: the finding, graded by whether the job needs one.
Finding noGpu(Context& c, const std::string& why) {
  std::string msg = "No GPU visible: " + why;
  if (c.wantsGpu()) {
    return fail(msg + ". The job asked for cuda/nccl, so init_distributed stops",
                "Run on a GPU node with the NVIDIA driver loaded (nvidia-smi must work), check CUDA_VISIBLE_DEVICES, "
                "or use DS_ACCELERATOR=cpu / backend gloo.",
                {{"reason", why}});
  }
  return skip(msg + "; the job runs on cpu (gloo), so this is not needed", {{"reason", why}});
}

std::string noGpuReason(GpuProbe& g) {
  if (!g.cudaLoaded) return "libcuda cannot be loaded (" + g.cudaError + ")";
  if (!g.cudaError.empty()) return g.cudaError;
  if (g.devices.empty()) return "the driver reports 0 devices";
  return "";
}

Finding visibleDevices(Context& c) {
  auto v = c.get("CUDA_VISIBLE_DEVICES");
  auto s = parseVisible(v);
  auto& g = c.gpu();
  Json data{{"set", s.set}, {"entries", s.entries}, {"ignored", s.ignored}, {"kind", s.kind},
            {"visible_count", g.devices.size()}};
  if (!s.duplicates.empty()) {
    return fail(fmt::format("CUDA_VISIBLE_DEVICES={} lists {} twice: CUDA refuses duplicate devices and reports none",
                            quoteValue(*v), join(s.duplicates, ", ")),
                "List each device once.", data);
  }
  if (!s.ignored.empty() && !(s.entries.empty() && s.ignored.size() == 1 && s.ignored[0] == "-1")) {
    return warn(fmt::format("CUDA_VISIBLE_DEVICES={}: CUDA stops at the first entry it cannot parse ({}), so {} and "
                            "everything after it are silently dropped; {} device(s) remain",
                            quoteValue(*v), quoteValue(s.ignored.front()), quoteValue(s.ignored.front()), s.entries.size()),
                "Use comma-separated indices (0,1), GPU-<uuid> or MIG-<uuid> only; no spaces or ranges.", data);
  }
  if (s.kind == "mixed") {
    return warn(fmt::format("CUDA_VISIBLE_DEVICES={} mixes indices and UUIDs", quoteValue(*v)),
                "Use one form throughout (UUIDs are stable across reboots).", data);
  }
  std::string what = !s.set ? "unset (all devices visible)"
                     : s.kind == "none" ? "set but empty/-1 (no device visible)"
                                        : fmt::format("{} ({} {})", *v, s.entries.size(), s.kind);
  if (g.devices.empty()) {
    auto f = noGpu(c, noGpuReason(g).empty() ? "the driver reports 0 devices" : noGpuReason(g));
    f.message = "CUDA_VISIBLE_DEVICES " + what + ". " + f.message;
    f.data = data;
    return f;
  }
  return pass(fmt::format("CUDA_VISIBLE_DEVICES {}; the driver shows {} device(s)", what, g.devices.size()), data);
}

Finding localRankDevice(Context& c) {
  auto& g = c.gpu();
  if (g.devices.empty()) return noGpu(c, noGpuReason(g).empty() ? "0 devices" : noGpuReason(g));
  if (!c.world()) return skip("Discovery failed (see env.world_info), so LOCAL_RANK is unknown");
  int lr = c.world()->localRank.value, n = static_cast<int>(g.devices.size());
  int lws = c.world()->localWorldSize.value;
  Json data{{"local_rank", lr}, {"visible", n}, {"local_world_size", lws}};
  if (lr >= n) {
    return fail(fmt::format("LOCAL_RANK={} but only {} device(s) are visible: cuda:{} gives \"invalid device ordinal\"",
                            lr, n, lr),
                "Start at most as many ranks per node as visible GPUs (--nproc-per-node), or fix CUDA_VISIBLE_DEVICES.",
                data);
  }
  // This rank's device, in the warning too: world.gpu_unique compares it across ranks, and a node with
  // more ranks than GPUs is where two ranks land on one (seen on one H200 with two ranks at LOCAL_RANK=0:
  // without it world.gpu_unique skipped with "No rank has a GPU").
  const auto& d = g.devices[static_cast<size_t>(lr)];
  data["device"] = {{"name", d.name}, {"bus_id", d.busId}, {"uuid", d.uuid}};
  if (lws > n) {
    return warn(
        fmt::format(
            "{} ranks on this node share {} GPU(s): ranks beyond {} will fail with invalid device ordinal "
            "or collide on one GPU (this rank: LOCAL_RANK={} -> cuda:{} {})",
            lws, n, n - 1, lr, lr, d.busId),
        "Match --nproc-per-node to the number of visible GPUs.", data);
  }
  return pass(fmt::format("LOCAL_RANK={} -> cuda:{} {} ({})", lr, lr, d.name, d.busId), data);
}

Finding libcuda(Context& c) {
  auto& g = c.gpu();
  Json data{{"path", g.cudaPath}, {"error", g.cudaError}, {"candidates", c.libs().cuda}};
  if (!g.cudaLoaded) return noGpu(c, "libcuda cannot be loaded: " + g.cudaError);
  if (!g.cudaError.empty() && g.initResult != 100) {
    return fail(fmt::format("{} loads but {}: CUDA cannot start on this node", g.cudaPath, g.cudaError),
                "Check the driver (nvidia-smi, dmesg for NVRM/Xid errors); a driver older than the CUDA runtime also "
                "fails here.",
                data);
  }
  if (!g.cudaError.empty()) return noGpu(c, g.cudaError);
  return pass(fmt::format("{} loaded; cuInit ok", g.cudaPath), data);
}

Finding nvml(Context& c) {
  auto& g = c.gpu();
  Json data{{"path", g.nvmlPath}, {"error", g.nvmlError}, {"driver_version", g.nvmlDriverVersion}};
  if (g.nvmlProbeBroken) {
    return fail(fmt::format("{}: nvidia-smi, DCGM and NCCL's topology detection call the same library and will "
                            "crash or hang the same way",
                            g.nvmlError),
                "Check the driver (nvidia-smi, dmesg for NVRM/Xid errors); a hung NVML usually means a GPU fell off the "
                "bus or the driver needs a reload: drain the node and reboot it.",
                data);
  }
  if (!g.nvmlLoaded || !g.nvmlError.empty()) {
    if (!g.cudaLoaded || g.devices.empty()) return noGpu(c, "libnvidia-ml: " + (g.nvmlError.empty() ? "not loaded" : g.nvmlError));
    return warn("libnvidia-ml is missing or fails (" + g.nvmlError + ") while CUDA works: nvidia-smi, DCGM and NCCL's "
                "topology detection lose information",
                "Install the driver's NVML (same version as the kernel module).", data);
  }
  return pass(fmt::format("{} loaded; driver {}", g.nvmlPath, g.nvmlDriverVersion), data);
}

Finding driverVersions(Context& c) {
  auto& g = c.gpu();
  Json data{{"driver_cuda_version", cudaVersionText(g.driverVersion)},
            {"built_cuda_version", cudaVersionText(g.builtCudaVersion)},
            {"nvml_driver_version", g.nvmlDriverVersion}};
  if (!g.cudaLoaded) return noGpu(c, "libcuda cannot be loaded, so the driver version is unknown");
  if (g.builtCudaVersion > 0 && g.driverVersion > 0 && g.driverVersion / 1000 < g.builtCudaVersion / 1000) {
    return fail(fmt::format("The driver supports CUDA {} but dsperf was built with CUDA {}: the runtime refuses to start "
                            "(\"driver version is insufficient\")",
                            cudaVersionText(g.driverVersion), cudaVersionText(g.builtCudaVersion)),
                "Upgrade the driver, or use a build against an older CUDA toolkit.", data);
  }
  return pass(fmt::format("Driver supports CUDA {}{}; built with CUDA {}", cudaVersionText(g.driverVersion),
                          g.nvmlDriverVersion.empty() ? "" : " (driver " + g.nvmlDriverVersion + ")",
                          cudaVersionText(g.builtCudaVersion)),
              data);
}

Finding devices(Context& c) {
  auto& g = c.gpu();
  if (g.devices.empty()) return noGpu(c, noGpuReason(g).empty() ? "0 devices" : noGpuReason(g));
  Json arr = Json::array();
  std::vector<std::string> parts;
  for (const auto& d : g.devices) {
    arr.push_back({{"index", d.index}, {"name", d.name}, {"memory_bytes", d.memoryBytes}, {"bus_id", d.busId},
                   {"uuid", d.uuid}});
    parts.push_back(fmt::format("cuda:{} {} {} {}", d.index, d.name, humanBytes(static_cast<double>(d.memoryBytes)), d.busId));
  }
  return pass(join(parts, "; "), {{"devices", arr}});
}

Finding dcgmEnv(Context& c) {
  static const char* kVars[] = {"NSIGHT_CUDA_DEBUGGER",          "CUDA_INJECTION32_PATH",
                                "CUDA_INJECTION64_PATH",         "CUDA_AUTO_BOOST",
                                "CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "CUDA_COREDUMP_FILE",
                                "CUDA_DEVICE_WAITS_ON_EXCEPTION", "CUDA_PROFILE",
                                "COMPUTE_PROFILE",               "OPENCL_PROFILE"};
  std::vector<std::string> found, names;
  Json data = Json::object();
  for (const char* v : kVars) {
    if (auto val = c.get(v)) {
      found.push_back(fmt::format("{}={}", v, quoteValue(*val, 40)));
      data[v] = *val;
      names.emplace_back(v);
    }
  }
  if (found.empty()) return pass("None of the CUDA debugging/profiling variables DCGM flags is set");
  return warn(fmt::format("Set: {}. DCGM flags these on production nodes: they inject debuggers/profilers, dump cores "
                          "or make kernels wait on exceptions (slow or stuck jobs)",
                          join(found, ", ")),
              fmt::format("unset {} in the job environment (and the node's profile scripts).", join(names, " ")),
              data);
}

}  // namespace

std::vector<CheckDef> gpuChecks() {
  return {
      {"gpu.libcuda", "gpu", "libcuda loads (dlopen) and cuInit works", libcuda},
      {"gpu.nvml", "gpu", "libnvidia-ml loads (dlopen) and initialises", nvml},
      {"gpu.visible_devices", "gpu", "CUDA_VISIBLE_DEVICES parsed (indices, UUIDs, MIG) and the visible count", visibleDevices},
      {"gpu.local_rank_device", "gpu", "LOCAL_RANK below the visible devices", localRankDevice},
      {"gpu.driver_version", "gpu", "Driver and runtime CUDA versions", driverVersions},
      {"gpu.devices", "gpu", "Per device: name, memory, PCI bus id, UUID", devices},
      {"gpu.dcgm_env", "gpu", "CUDA debugging/profiling variables DCGM flags", dcgmEnv},
  };
}

}  // namespace ds::diag
