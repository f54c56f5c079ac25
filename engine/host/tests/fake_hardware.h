// Fake sysfs/procfs trees of real machines (an H100 node with 8x400G InfiniBand, ...) for the
// hardware reader's tests and for the bounds' tests above it (reports/sweep/tests).
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/host/hardware_reader.h"
#include "engine/testing/subprocess.h"

namespace ds::hw::fake {

namespace fs = std::filesystem;

// A fake root: files with text, and the relative symlinks sysfs uses between class/, bus/ and devices/.
class FakeTree {
 public:
  FakeTree() : dir_("ds_hw") {}
  const std::string& root() const { return dir_.path(); }
  void file(const std::string& rel, const std::string& text) {
    fs::path p = fs::path(root()) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  // `rel` -> `target` (relative to rel's folder, as the kernel links them).
  void link(const std::string& rel, const std::string& target) {
    fs::path p = fs::path(root()) / rel;
    fs::create_directories(p.parent_path());
    fs::path abs = fs::path(root()) / target;
    fs::create_directories(abs);
    fs::create_symlink(fs::relative(abs, p.parent_path()), p);
  }
  // A PCI device at sys/devices/<parentPath>/<addr>, linked from sys/bus/pci/devices/<addr>.
  std::string pci(const std::string& parentPath, const std::string& addr, const std::string& vendor,
                  const std::string& device, const std::string& cls, const std::string& curSpeed,
                  const std::string& maxSpeed, const std::string& width) {
    std::string dev = "sys/devices/" + parentPath + "/" + addr;
    file(dev + "/vendor", vendor);
    file(dev + "/device", device);
    file(dev + "/class", cls);
    if (!curSpeed.empty()) file(dev + "/current_link_speed", curSpeed);
    if (!maxSpeed.empty()) file(dev + "/max_link_speed", maxSpeed);
    if (!width.empty()) {
      file(dev + "/current_link_width", width);
      file(dev + "/max_link_width", "16");
    }
    link("sys/bus/pci/devices/" + addr, dev);
    return dev;
  }
  void netdev(const std::string& name, const std::string& speed, const std::string& state,
              const std::string& type, const std::string& deviceTarget) {
    std::string p = "sys/class/net/" + name;
    if (!speed.empty()) file(p + "/speed", speed);
    file(p + "/operstate", state);
    file(p + "/type", type);
    if (!deviceTarget.empty())
      link(p + "/device", deviceTarget);
    else
      fs::create_directories(fs::path(root()) / p);
  }
  void ibPort(const std::string& dev, int port, const std::string& rate, const std::string& state,
              const std::string& layer, const std::string& deviceTarget) {
    std::string p = fmt::format("sys/class/infiniband/{}/ports/{}", dev, port);
    file(p + "/rate", rate);
    file(p + "/state", state);
    file(p + "/link_layer", layer);
    if (!deviceTarget.empty() && !fs::exists(fs::path(root()) / ("sys/class/infiniband/" + dev + "/device")))
      link("sys/class/infiniband/" + dev + "/device", deviceTarget);
  }
  HardwareRoots roots() const { return {root() + "/sys", root() + "/proc"}; }

 private:
  testing::TempDir dir_;
};

inline const NicInfo* nic(const HostHardware& h, const std::string& name) {
  for (const auto& n : h.nics)
    if (n.name == name) return &n;
  return nullptr;
}
inline const PcieLinkInfo* link(const HostHardware& h, const std::string& device) {
  for (const auto& l : h.pcie)
    if (l.device == device) return &l;
  return nullptr;
}

// A DGX H100-like node: 8 GPUs and 8 ConnectX-7 NDR ports, each pair behind its own Gen5 switch port,
// IPoIB netdevs on the same functions, a 1G management port, docker0, lo.
struct H100Node {
  FakeTree t;
  GpuView nvml;
  explicit H100Node(int downLinksOnGpu3 = 0) {
    t.file("proc/cpuinfo",
           "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n\nprocessor\t: 1\n"
           "model name\t: Intel(R) Xeon(R) Platinum 8480C\n");
    nvml.loaded = true;
    for (int i = 0; i < 8; ++i) {
      std::string bridge = fmt::format("pci0000:{:02x}/0000:{:02x}:01.0", 0x10 * i, 0x10 * i);
      t.file(fmt::format("sys/devices/{}/max_link_speed", bridge), "32.0 GT/s PCIe");
      std::string gpu = fmt::format("0000:{:02x}:00.0", 0x10 * i + 1);
      // Idle: the GPU's link runs at 2.5 GT/s until it has work.
      t.pci(bridge, gpu, "0x10de", "0x2330", "0x030200", "2.5 GT/s PCIe", "32.0 GT/s PCIe", "16");
      std::string hca = fmt::format("0000:{:02x}:00.0", 0x10 * i + 2);
      std::string hcaDev =
          t.pci(bridge, hca, "0x15b3", "0x1021", "0x020700", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "16");
      t.ibPort(fmt::format("mlx5_{}", i), 1, "400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand", hcaDev);
      t.netdev(fmt::format("ibp{}s0", i), "400000", "up", "32", hcaDev);  // IPoIB: the same wire
      GpuFacts g;
      g.name = "NVIDIA H100 80GB HBM3";
      g.busId = gpu;
      g.arch = 9;
      g.nvlinksActive = i == 3 ? 18 - downLinksOnGpu3 : 18;
      nvml.gpus.push_back(g);
    }
    std::string mgmt = t.pci("pci0000:c0/0000:c0:01.0", "0000:c1:00.0", "0x8086", "0x1521", "0x020000",
                             "5.0 GT/s PCIe", "5.0 GT/s PCIe", "4");
    t.netdev("eno1", "1000", "up", "1", mgmt);
    t.netdev("docker0", "", "up", "1", "");
    t.netdev("lo", "", "unknown", "772", "");
  }
};

}  // namespace ds::hw::fake
