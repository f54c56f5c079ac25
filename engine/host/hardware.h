// What the hardware of one host can move, as dsbench records it beside a run: its NICs and their line
// rates, its accelerators' PCIe links and NVLinks, and its host memory bandwidth. Plain data, so that
// reports/ can judge a measured row against the bound that applies (reports/baseline/expected.h)
// and key baselines by SKU (reports/baseline/sample.h). Reading a live host is measuring code's job
// (through paths the tests can fake, as dsdiag reads sysfs); this header only describes the record.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ds::hw {

struct NicInfo {
  std::string name;   // "eth0", "mlx5_0/1" (an InfiniBand device and port)
  std::string kind;   // "ethernet", "infiniband", "roce" (RDMA on Ethernet), "virtual" (veth)
  std::string model;  // PCI vendor/device as text when known ("15b3:1021"), else ""
  double gbps = 0;    // line rate in Gb/s (sysfs speed / 1000, or the IB port's rate); 0 = unknown
  bool up = true;     // operstate up / IB port ACTIVE
  bool operator==(const NicInfo&) const = default;
};

struct PcieLinkInfo {
  std::string device;   // what sits on the link: "gpu0", "mlx5_0", or a PCI address
  std::string address;  // PCI address, "0000:17:00.0"
  int gen = 0;          // PCIe generation from the link speed (2.5/5/8/16/32/64 GT/s -> 1..6); 0 unknown
  int width = 0;        // lanes (x16 -> 16); 0 unknown
  double gBps = 0;      // one direction, GB/s after encoding; 0 unknown
  bool operator==(const PcieLinkInfo&) const = default;
};

struct NvlinkInfo {
  int links = 0;           // active NVLinks of one GPU (the least of the node's GPUs)
  double gBpsPerLink = 0;  // one direction, GB/s
  bool operator==(const NvlinkInfo&) const = default;
};

struct HostHardware {
  std::string host;
  std::string cpuModel;  // /proc/cpuinfo "model name" ("" unknown)
  std::string gpuName;   // NVML name of GPU 0 ("" none)
  int gpus = 0;
  std::vector<NicInfo> nics;       // every physical NIC, up or not (engine/host/hardware_reader.h)
  std::vector<PcieLinkInfo> pcie;  // accelerators' and NICs' links
  NvlinkInfo nvlink;
  double memBwGBps = 0;  // host memory bandwidth (the membw probe), 0 unknown
  bool operator==(const HostHardware&) const = default;
};

void to_json(nlohmann::json& j, const NicInfo& v);
void from_json(const nlohmann::json& j, NicInfo& v);
void to_json(nlohmann::json& j, const PcieLinkInfo& v);
void from_json(const nlohmann::json& j, PcieLinkInfo& v);
void to_json(nlohmann::json& j, const NvlinkInfo& v);
void from_json(const nlohmann::json& j, NvlinkInfo& v);
void to_json(nlohmann::json& j, const HostHardware& v);
void from_json(const nlohmann::json& j, HostHardware& v);

// The SKU key of a host, the part of a baseline's key that names the hardware: CPU model, GPU name
// and count, NIC kind, rate and count ("cpu=Intel Xeon 8480C;gpu=8xNVIDIA H100 80GB HBM3;nic=8x400G
// infiniband"). Hosts with the same key are expected to perform alike. "unknown" when nothing is known.
std::string skuKey(const HostHardware& h);

}  // namespace ds::hw
