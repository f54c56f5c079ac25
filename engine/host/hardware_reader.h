// Reads what this host's hardware can move into the HostHardware record (engine/host/hardware.h):
// NIC line rates, InfiniBand ports, the PCIe links of GPUs and NICs, NVLinks, the CPU model. Every
// path hangs off two roots that tests point at fake trees of real machines (as dsdiag's DSDIAG_SYSFS
// and DSDIAG_PROCFS do); GPUs come through a GpuQuery (gpu_query.h), NVML on a live host.
//
// What is read, and what is left out:
// - NICs: <sysfs>/class/net/<if>/{speed,operstate,carrier,type,device/vendor,device/device}. Left out:
//   loopback; virtual interfaces (no device/ link: bridges, bonds, veth, VLANs, ifb), since their
//   "speed" is the kernel's invention and a bond's slaves are counted themselves; SR-IOV virtual
//   functions seen from the host (device/physfn), which share their PF's wire; netdevs that are the
//   Ethernet or IPoIB face of an RDMA port listed below (the same PCI device), so that no wire is
//   counted twice. When a host has only virtual interfaces (a container's veth, a netns test bed), they
//   are listed with kind "virtual" so that the record says what the host saw; no bound is drawn from
//   them.
// - RDMA ports: <sysfs>/class/infiniband/<dev>/ports/<p>/{rate,state,link_layer}, named "<dev>/<p>",
//   kind "infiniband" (link layer InfiniBand) or "roce" (Ethernet); soft RDMA devices without a PCI
//   device (rxe, siw) are left out, their netdev is the wire.
// - PCIe: <sysfs>/bus/pci/devices/<addr>/{max,current}_link_{speed,width} of every GPU and NIC. The
//   speed is the link's capability, the lesser of the two ends' max_link_speed (the device's and its
//   upstream port's), because current_link_speed drops while a GPU idles; the width is the one it
//   trained at (current_link_width). current_* alone where max_* is missing.
// - GPUs: NVML's list (name, architecture, active NVLinks); without NVML, the PCI devices of vendor
//   0x10de and class 0x0300/0x0302 give the count, with no name and no NVLink.
// - CPU: the first "model name" of <procfs>/cpuinfo.
// Memory bandwidth is measured, not read: HostHardware::memBwGBps stays 0 here.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/host/gpu_query.h"
#include "engine/host/hardware.h"

namespace ds::hw {

struct HardwareRoots {
  std::string sysfs = "/sys";
  std::string procfs = "/proc";
};

// The roots from <prefix>_SYSFS and <prefix>_PROCFS ("DSBENCH", "DSDIAG") when set and non-empty,
// else /sys and /proc.
HardwareRoots hardwareRootsFromEnv(const std::string& prefix);

// Everything above, for `host` (the record's name; the caller's hostname). `gpus` may be null: no GPU
// query, the sysfs count only. Never throws: what cannot be read stays unknown (0 or "").
HostHardware readHostHardware(const HardwareRoots& roots, GpuQuery* gpus, const std::string& host);

// The PCI function of every physical NIC readHostHardware lists, in its order: each RDMA device once
// ("mlx5_0", rdma), then each netdev that is not an RDMA device's face ("ens1f0"). Virtual interfaces
// (veth, bridges, lo) and soft RDMA have none and are left out. `path` is the function's canonical
// folder under <sysfs>/devices (engine/host/pci_topology.h reads its place from it).
struct NicPciDevice {
  std::string name;
  bool rdma = false;
  std::filesystem::path path;
};
std::vector<NicPciDevice> readNicPciDevices(const HardwareRoots& roots);

// A PCIe link's state against what it should be, from the function's folder (NicPciDevice::path):
// current_link_{speed,width} against max_link_width (the device's lanes) and the lesser of the
// device's and its upstream port's max_link_speed (a Gen5 card in a Gen4 slot runs at the slot's
// best). nullopt when sysfs tells neither (a VM's virtio device has no link). 0: unknown.
struct PcieLinkState {
  int gen = 0, maxGen = 0;
  int width = 0, maxWidth = 0;
};
std::optional<PcieLinkState> readPcieLinkState(const std::filesystem::path& dev);

// The parsers, for tests and for callers that read the files themselves. All return nullopt (or 0) on
// text they do not recognise.
// "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)" -> Gb/s.
std::optional<double> parseIbRate(const std::string& text);
// sysfs net speed in Mb/s ("100000") -> Gb/s; -1, 0, 4294967295 (an unsigned -1) and garbage -> nullopt.
std::optional<double> parseNetSpeed(const std::string& text);
// "16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" -> PCIe generation 1..6; "Unknown" -> 0.
int pcieGenFromSpeed(const std::string& text);
// One direction of a PCIe link in GB/s: GT/s per lane x encoding (8b/10b for Gen 1-2, 128b/130b from
// Gen 3; Gen 6's FLIT mode taken as 128b/130b too, within 2%) / 8 bits x lanes. 0 when unknown.
double pcieGBps(int gen, int width);

}  // namespace ds::hw
