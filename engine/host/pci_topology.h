// How the GPUs and NICs of a host reach each other, in the words of `nvidia-smi topo -m`: NV# (# bonded
// NVLinks), PIX (at most one PCIe bridge: one switch), PXB (several PCIe bridges, no host bridge), PHB
// (through a PCIe host bridge, the CPU), NODE (across host bridges within one NUMA node) and SYS (across
// the SMP interconnect between NUMA nodes, usually sockets). Where a device sits comes from sysfs (the
// canonical path of <sysfs>/bus/pci/devices/<address>, its numa_node and local_cpulist), read by
// readPciPlace; the rest is a pure function of those facts (buildTopology), which tests feed by hand.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ds::hw {

// Best first: a smaller kind is a shorter path. kUnknown when a device's place is unknown.
enum class PathKind { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys, kUnknown };

struct Path {
  PathKind kind = PathKind::kUnknown;
  int nvlinks = 0;  // kNvLink: the bonded links
  bool operator==(const Path&) const = default;
};

// "X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "?" (unknown).
std::string pathText(const Path& p);
// The same words for a kind ("NV" for kNvLink).
std::string pathKindText(PathKind k);

// Where one PCI function sits.
struct PciPlace {
  std::string address;               // "0000:19:00.0"
  std::string hostBridge;            // "pci0000:16": the root complex it hangs off
  std::vector<std::string> bridges;  // PCI addresses of the bridges above it, root port first
  int numaNode = -1;                 // sysfs numa_node; -1 unknown (one-node hosts often say -1)
  std::string cpus;                  // sysfs local_cpulist ("0-55,112-167"); "" unknown
  bool operator==(const PciPlace&) const = default;
};

// "0000:17:00.0" (lower-case hex, as sysfs names devices).
bool isPciAddress(const std::string& s);
// A bus id as NVML prints it ("00000000:3B:00.0": 8 hex digits of domain, upper case) or as sysfs
// names it, in sysfs' form ("0000:3b:00.0"); "" when it is not a PCI address.
std::string sysfsPciAddress(const std::string& busId);

// The place of the PCI function at `resolved` (a canonical path under <sysfs>/devices, or one below
// the function, as a virtio netdev's device link leads to .../0000:00:03.0/virtio2); nullopt when no
// PCI function is on the path (a platform device).
std::optional<PciPlace> pciPlaceOf(const std::filesystem::path& resolved);
// The place of <sysfs>/bus/pci/devices/<address> (either spelling of the address); nullopt when sysfs
// does not list it (a container without /sys/bus/pci, a bus id from another host).
std::optional<PciPlace> readPciPlace(const std::string& sysfs, const std::string& busId);

// The PCIe path between two functions as topo -m words it: the same function, or both within one
// switch below their deepest common bridge: PIX; a common bridge further up: PXB; the same host bridge
// only: PHB; different host bridges: SYS when their NUMA nodes are known and differ, else NODE.
PathKind pciPath(const PciPlace& a, const PciPlace& b);
// NVML's nvmlGpuTopologyLevel_t (0, 10, 20, 30, 40, 50) as a path kind; kUnknown for other values.
PathKind pathFromNvmlLevel(int level);

struct TopoGpu {
  int index = 0;
  std::string busId;              // as NVML gives it; named in findings
  std::optional<PciPlace> place;  // nullopt: not in sysfs
  int fabricLinks = 0;            // active NVLinks whose far end is an NVSwitch
};

struct TopoNic {
  std::string name;  // "mlx5_0" (an RDMA device), "ens1f0" (a netdev)
  bool rdma = false;
  PciPlace place;
};

struct TopologyFacts {
  std::vector<TopoGpu> gpus;  // in NVML's order
  std::vector<TopoNic> nics;
  // directLinks[i][j]: active NVLinks of GPU i whose far end is GPU j. nvmlLevel[i][j]: NVML's common
  // ancestor level of the pair, -1 unknown. Each gpus x gpus, or empty when unknown.
  std::vector<std::vector<int>> directLinks;
  std::vector<std::vector<int>> nvmlLevel;
};

struct Topology {
  // Square, GPUs first then NICs, in the facts' order; the diagonal is kSelf.
  std::vector<std::vector<Path>> matrix;
  // Per GPU: the NICs with its best known path (empty when no NIC path is known), and that path.
  std::vector<std::vector<int>> gpuNearestNics;
  std::vector<PathKind> gpuNearestKind;
  // Per NIC: the GPUs with its best known path (topo -m's "nearest GPU").
  std::vector<std::vector<int>> nicNearestGpus;
};

// The matrix. GPU pairs: NV# when NVLinks join them (direct links, the larger of the two ends' counts,
// plus, when both reach an NVSwitch fabric, the lesser of their fabric links: every GPU on the fabric
// reaches every other), else NVML's level, else the sysfs path. GPU-NIC and NIC pairs: the sysfs path.
Topology buildTopology(const TopologyFacts& facts);

}  // namespace ds::hw
