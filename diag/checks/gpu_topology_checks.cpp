// Family "gpu", topology part: gpu.topology, the matrix `nvidia-smi topo -m` prints (each GPU pair's
// path: NV#, PIX, PXB, PHB, NODE, SYS; each NIC against each GPU; the GPUs' CPU and NUMA affinity), from
// NVML (read in the probe child, probes.h: NVLink far ends, common ancestors) and sysfs (where each GPU
// and NIC sits in the PCI tree: engine/host/pci_topology.h). It warns where a GPU's nearest NIC is
// across sockets and where NVLink counts between GPU pairs are uneven (a link down). The links' own
// width and generation are gpu.pcie_link's.
#include <algorithm>
#include <map>
#include <set>

#include "diag/check.h"
#include "diag/probes.h"
#include "diag/util.h"
#include "engine/host/hardware_reader.h"
#include "engine/host/nvml_api.h"
#include "engine/host/pci_topology.h"

namespace ds::diag {
// A namespace of its own inside the anonymous one: the unity build compiles the check files together.
namespace {
namespace gpu_topology {

using hw::PathKind;

std::string gpuLabel(const hw::TopoGpu& g) {
  return fmt::format("GPU {} ({})", g.index, g.busId.empty() ? "bus id unknown" : g.busId);
}

std::string numaText(int node) { return node >= 0 ? fmt::format("NUMA node {}", node) : "NUMA node unknown"; }

// NCCL_IB_HCA's selection of RDMA devices (REFERENCE.md §6), or nullopt when it is unset or malformed
// (net.nccl_ib_hca reports that): NCCL then picks among all of them.
std::optional<IfnameSpec> ibHcaSpec(Context& c) {
  auto v = c.get("NCCL_IB_HCA");
  if (!v || trim(*v).empty()) return std::nullopt;
  IfnameSpec spec = parseIfnameSpec(trim(*v));
  if (!spec.error.empty()) return std::nullopt;
  return spec;
}

bool selected(const IfnameSpec& spec, const std::string& name) {
  bool any = std::any_of(spec.entries.begin(), spec.entries.end(),
                         [&](const IfnameSpec::Entry& e) { return ifnameEntryMatches(spec, e, name); });
  return spec.exclude ? !any : any;
}

struct Facts {
  hw::TopologyFacts topo;
  std::vector<std::string> missingPlaces;  // GPUs sysfs does not list
};

Facts gatherFacts(Context& c, const GpuProbe& g) {
  Facts out;
  auto& f = out.topo;
  std::map<std::string, std::size_t> byBus;  // sysfs address -> position
  for (const auto& d : g.nvmlDevices) {
    hw::TopoGpu t;
    t.index = d.index;
    t.busId = d.busId;
    t.place = hw::readPciPlace(c.paths().sysfs, d.busId);
    if (!t.place) out.missingPlaces.push_back(fmt::format("GPU {}", d.index));
    const std::string addr = hw::sysfsPciAddress(d.busId);
    if (!addr.empty()) byBus[addr] = f.gpus.size();
    f.gpus.push_back(std::move(t));
  }
  const std::size_t n = f.gpus.size();
  f.directLinks.assign(n, std::vector<int>(n, 0));
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto& r : g.nvmlDevices[i].nvlinkRemote) {
      auto peer = byBus.find(hw::sysfsPciAddress(r.busId));
      const bool isGpu = peer != byBus.end() && peer->second != i;
      if (r.type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
        ++f.gpus[i].fabricLinks;
      } else if (isGpu && (r.type == NVML_NVLINK_DEVICE_TYPE_GPU || r.type < 0)) {
        ++f.directLinks[i][peer->second];
      } else if (r.type < 0 && !r.busId.empty() && peer == byBus.end()) {
        // A driver without nvmlDeviceGetNvLinkRemoteDeviceType: a far end that is no GPU of this host
        // is the NVSwitch fabric.
        ++f.gpus[i].fabricLinks;
      }
    }
  }
  std::map<int, std::size_t> byIndex;
  for (std::size_t i = 0; i < n; ++i) byIndex[f.gpus[i].index] = i;
  f.nvmlLevel.assign(n, std::vector<int>(n, -1));
  for (const auto& l : g.nvmlTopologyLevels) {
    auto a = byIndex.find(l.a), b = byIndex.find(l.b);
    if (a == byIndex.end() || b == byIndex.end()) continue;
    f.nvmlLevel[a->second][b->second] = f.nvmlLevel[b->second][a->second] = l.level;
  }
  // NICs: the RDMA devices when the host has any (GPUDirect RDMA's NICs, those topo -m lists), else the
  // physical netdevs. Virtual interfaces have no PCI function and are not listed.
  auto devices = hw::readNicPciDevices({c.paths().sysfs, c.paths().procfs});
  const bool anyRdma = std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d.rdma; });
  for (const auto& d : devices) {
    if (anyRdma && !d.rdma) continue;
    auto place = hw::pciPlaceOf(d.path);
    if (!place) continue;
    f.nics.push_back({d.name, d.rdma, *place});
  }
  return out;
}

// Every GPU pair's NV count; the findings about uneven ones.
struct NvlinkVerdict {
  std::vector<std::string> problems;
  int most = 0;  // the largest NV count of any pair
};

NvlinkVerdict judgeNvlinks(const hw::TopologyFacts& f, const hw::Topology& t) {
  NvlinkVerdict v;
  const std::size_t n = f.gpus.size();
  int pairs = 0, linked = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      ++pairs;
      const auto& p = t.matrix[i][j];
      if (p.kind == PathKind::kNvLink) {
        ++linked;
        v.most = std::max(v.most, p.nvlinks);
      }
    }
  }
  if (v.most == 0) return v;
  // A pair without NVLink is a fault only where the host is built all-to-all: at least half of its
  // pairs linked (an NVSwitch box, a 4-GPU mesh), not bridged pairs of PCIe cards.
  const bool allToAll = 2 * linked >= pairs;
  std::vector<std::pair<std::size_t, std::size_t>> bad;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      const auto& p = t.matrix[i][j];
      const bool fewer = p.kind == PathKind::kNvLink && p.nvlinks < v.most;
      const bool none = p.kind != PathKind::kNvLink && allToAll;
      if (!fewer && !none) continue;
      bad.emplace_back(i, j);
      v.problems.push_back(fewer ? fmt::format("GPU {} - GPU {}: NV{} ({} link(s) fewer)", f.gpus[i].index,
                                               f.gpus[j].index, p.nvlinks, v.most - p.nvlinks)
                                 : fmt::format("GPU {} - GPU {}: no NVLink ({})", f.gpus[i].index,
                                               f.gpus[j].index, hw::pathText(p)));
    }
  }
  if (bad.empty()) return v;
  // One GPU in every uneven pair, and all its pairs alike: name it, it is where the links are down.
  for (std::size_t k = 0; k < n && n > 2; ++k) {
    const bool inAll =
        std::all_of(bad.begin(), bad.end(), [&](const auto& b) { return b.first == k || b.second == k; });
    if (!inAll || bad.size() != n - 1) continue;
    auto links = [&](const auto& b) {
      const auto& p = t.matrix[b.first][b.second];
      return p.kind == PathKind::kNvLink ? p.nvlinks : 0;
    };
    const int have = links(bad[0]);
    if (!std::all_of(bad.begin(), bad.end(), [&](const auto& b) { return links(b) == have; })) break;
    v.problems = {
        fmt::format("{} has {} to each of the other {} GPUs, where the other pairs have NV{} ({} link(s) "
                    "down or missing)",
                    gpuLabel(f.gpus[k]), have > 0 ? fmt::format("NV{}", have) : "no NVLink", n - 1, v.most,
                    v.most - have)};
    break;
  }
  return v;
}

Json topologyData(const Facts& facts, const hw::Topology& t, const GpuProbe& g) {
  const auto& f = facts.topo;
  Json gpus = Json::array(), nics = Json::array(), devices = Json::array(), matrix = Json::array();
  for (std::size_t i = 0; i < f.gpus.size(); ++i) {
    const auto& gpu = f.gpus[i];
    Json nearest = Json::array();
    for (int k : t.gpuNearestNics[i]) nearest.push_back(f.nics[static_cast<std::size_t>(k)].name);
    gpus.push_back({{"index", gpu.index},
                    {"bus_id", gpu.busId},
                    {"numa_node", gpu.place ? gpu.place->numaNode : -1},
                    {"cpu_affinity", gpu.place ? gpu.place->cpus : ""},
                    {"nvlinks_to_switch", gpu.fabricLinks},
                    {"nearest_nics", nearest},
                    {"nearest_nic_path", hw::pathKindText(t.gpuNearestKind[i])}});
    devices.push_back(fmt::format("GPU{}", gpu.index));
  }
  for (std::size_t k = 0; k < f.nics.size(); ++k) {
    const auto& nic = f.nics[k];
    Json nearest = Json::array();
    for (int i : t.nicNearestGpus[k]) nearest.push_back(f.gpus[static_cast<std::size_t>(i)].index);
    nics.push_back({{"name", nic.name},
                    {"bus_id", nic.place.address},
                    {"rdma", nic.rdma},
                    {"numa_node", nic.place.numaNode},
                    {"nearest_gpus", nearest}});
    devices.push_back(fmt::format("NIC{}", k));
  }
  for (const auto& row : t.matrix) {
    Json r = Json::array();
    for (const auto& p : row) r.push_back(hw::pathText(p));
    matrix.push_back(r);
  }
  return {{"gpus", gpus},
          {"nics", nics},
          {"devices", devices},
          {"matrix", matrix},
          {"nvml_topology_missing", g.nvmlTopologyMissing}};
}

Finding topology(Context& c) {
  auto& g = c.gpu();
  if (!g.nvmlLoaded || !g.nvmlError.empty()) {
    return skip(
        fmt::format("NVML is not usable ({}), so the GPU topology cannot be read (gpu.nvml says more)",
                    g.nvmlError.empty() ? "not loaded" : g.nvmlError));
  }
  if (g.nvmlDevices.empty()) return skip("NVML lists no GPU, so there is no GPU topology to read");
  Facts facts = gatherFacts(c, g);
  const auto& f = facts.topo;
  if (f.gpus.size() == 1 && f.nics.empty()) {
    return skip(
        fmt::format("one GPU ({}) and no NIC with a PCI function: no path to judge", gpuLabel(f.gpus[0])));
  }
  const hw::Topology t = hw::buildTopology(f);
  Json data = topologyData(facts, t, g);
  const std::size_t n = f.gpus.size();

  std::vector<std::string> problems, remedies, notes;
  // GPUs whose nearest NIC is across sockets, among the NICs NCCL may use.
  auto spec = ibHcaSpec(c);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& gpu = f.gpus[i];
    if (!gpu.place) continue;
    PathKind best = PathKind::kUnknown, bestAny = PathKind::kUnknown;
    std::size_t bestNic = 0, bestAnyNic = 0;
    for (std::size_t k = 0; k < f.nics.size(); ++k) {
      PathKind kind = t.matrix[i][n + k].kind;
      if (kind < bestAny) {
        bestAny = kind;
        bestAnyNic = k;
      }
      const bool usable = !spec || !f.nics[k].rdma || selected(*spec, f.nics[k].name);
      if (usable && kind < best) {
        best = kind;
        bestNic = k;
      }
    }
    if (best != PathKind::kSys) continue;
    const auto& nic = f.nics[bestNic];
    problems.push_back(
        fmt::format("{}, {}: its nearest NIC{} {} ({}, {}) is across sockets (SYS): its GPUDirect RDMA "
                    "traffic crosses the CPU "
                    "interconnect and gets a fraction of the NIC's bandwidth",
                    gpuLabel(gpu), numaText(gpu.place->numaNode), spec ? " that NCCL_IB_HCA allows," : "",
                    nic.name, nic.place.address, numaText(nic.place.numaNode)));
    if (bestAny < PathKind::kSys) {
      const auto& near = f.nics[bestAnyNic];
      remedies.push_back(
          fmt::format("NCCL_IB_HCA leaves out {}, which is {} to {}: add it (NCCL_IB_HCA={}...).", near.name,
                      hw::pathKindText(bestAny), gpuLabel(gpu), near.name));
    } else {
      remedies.push_back(fmt::format(
          "No NIC of this host sits on {} ({}'s): check that the NICs are in the slots the board pairs with "
          "the GPUs "
          "(nvidia-smi topo -m, lspci -tv) and move one there; until then bind that GPU's rank to its socket "
          "(numactl --cpunodebind={}) and list the nearest NICs first in NCCL_IB_HCA.",
          numaText(gpu.place->numaNode), gpuLabel(gpu), gpu.place->numaNode));
    }
  }
  // Uneven NVLink counts.
  NvlinkVerdict nv = judgeNvlinks(f, t);
  if (!nv.problems.empty()) {
    problems.push_back(
        fmt::format("NVLink counts between GPU pairs are uneven: {}; NCCL's rings and trees over "
                    "those pairs run slower or fall back to PCIe",
                    join(nv.problems, ", ")));
    remedies.push_back(
        "Check the links (nvidia-smi nvlink -s; gpu.nvlink names the down ones); on NVSwitch systems check "
        "the fabric "
        "manager (systemctl status nvidia-fabricmanager); reset the GPU or have the node serviced.");
  }

  if (!facts.missingPlaces.empty()) {
    notes.push_back(fmt::format("{} not under {}/bus/pci/devices (a container?): their NIC paths are unknown",
                                join(facts.missingPlaces, ", "), c.paths().sysfs));
  }
  if (!g.nvmlTopologyMissing.empty()) {
    notes.push_back(fmt::format("this driver lacks {}: GPU pairs from NVLink states and sysfs only",
                                join(g.nvmlTopologyMissing, ", ")));
  }
  if (!problems.empty()) {
    std::vector<std::string> distinct;
    for (auto& r : remedies)
      if (std::find(distinct.begin(), distinct.end(), r) == distinct.end()) distinct.push_back(r);
    return warn(join(problems, "; "), join(distinct, " "), data);
  }
  // PASS: one line.
  std::set<std::string> pairKinds;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) pairKinds.insert(hw::pathText(t.matrix[i][j]));
  std::string summary = fmt::format("{} GPU(s), {} NIC(s)", n, f.nics.size());
  if (!pairKinds.empty()) summary += fmt::format("; GPU pairs {}", join(pairKinds, "/"));
  std::set<std::string> nearestKinds;
  for (std::size_t i = 0; i < n; ++i)
    if (t.gpuNearestKind[i] != PathKind::kUnknown) nearestKinds.insert(hw::pathKindText(t.gpuNearestKind[i]));
  if (!nearestKinds.empty()) summary += fmt::format("; each GPU's nearest NIC {}", join(nearestKinds, "/"));
  if (!notes.empty()) summary += " (" + join(notes, "; ") + ")";
  return pass(summary, data);
}

}  // namespace gpu_topology
}  // namespace

std::vector<CheckDef> gpuTopologyChecks() {
  return {
      {"gpu.topology", "gpu",
       "GPU/NIC topology (NVML + sysfs, as nvidia-smi topo -m): a GPU whose nearest NIC is across sockets, "
       "uneven NVLink counts between GPU pairs",
       gpu_topology::topology}};
}

}  // namespace ds::diag
