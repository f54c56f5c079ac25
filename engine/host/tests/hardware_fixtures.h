// The hardware records of real machines that the bound and baseline tests judge: an 8xH100 node with
// 8x400G InfiniBand and NVLink 18x25 GB/s, a 2-NIC 100G Ethernet node, and this project's VM (virtio,
// no speed).
#pragma once

#include <fmt/format.h>

#include <string>

#include "engine/host/hardware.h"

namespace ds::report::testing {

inline hw::HostHardware h100(const std::string& host) {
  hw::HostHardware h;
  h.host = host;
  h.cpuModel = "Intel(R) Xeon(R) Platinum 8480C";
  h.gpuName = "NVIDIA H100 80GB HBM3";
  h.gpus = 8;
  for (int i = 0; i < 8; ++i) {
    h.nics.push_back({fmt::format("mlx5_{}/1", i), "infiniband", "15b3:1021", 400, true});
    h.pcie.push_back({fmt::format("gpu{}", i), fmt::format("0000:{:02x}:00.0", 0x10 * i + 1), 5, 16, 63.015});
    h.pcie.push_back(
        {fmt::format("mlx5_{}", i), fmt::format("0000:{:02x}:00.0", 0x10 * i + 2), 5, 16, 63.015});
  }
  h.nics.push_back({"eno1", "ethernet", "8086:1521", 1, true});
  h.nvlink = {18, 25};
  return h;
}

inline hw::HostHardware ethernet2x100(const std::string& host) {
  hw::HostHardware h;
  h.host = host;
  h.cpuModel = "AMD EPYC 7763 64-Core Processor";
  h.nics.push_back({"ens1f0", "ethernet", "8086:1592", 100, true});
  h.nics.push_back({"ens1f1", "ethernet", "8086:1592", 100, true});
  h.pcie.push_back({"ens1f0", "0000:41:00.0", 4, 16, 31.508});
  return h;
}

inline hw::HostHardware thisVm() {
  hw::HostHardware h;
  h.host = "vm";
  h.cpuModel = "AMD EPYC";
  h.nics.push_back({"eth0", "ethernet", "1af4:0001", 0, true});
  return h;
}

}  // namespace ds::report::testing
