// The hardware reader against fake sysfs/procfs trees of real machines: an 8xH100 node with 8x400G
// InfiniBand, a 2-NIC 100G Ethernet node, this project's VM (a virtio NIC without a speed) and a
// container with only a veth; then damaged trees, the parsers, and the real NVML path through the fake
// libnvidia-ml.so.1 of diag/tests.
#include "engine/host/hardware_reader.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/host/tests/fake_hardware.h"
#include "engine/testing/paths.h"

namespace ds::hw {
namespace {

using namespace ds::hw::fake;

TEST(HardwareReader, H100NodeWith8x400GInfiniBand) {
  H100Node node;
  auto q = fixedGpuQuery(node.nvml);
  auto h = readHostHardware(node.t.roots(), q.get(), "dgx01");
  EXPECT_EQ(h.host, "dgx01");
  EXPECT_EQ(h.cpuModel, "Intel(R) Xeon(R) Platinum 8480C");
  EXPECT_EQ(h.gpus, 8);
  EXPECT_EQ(h.gpuName, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h.nvlink.links, 18);
  EXPECT_DOUBLE_EQ(h.nvlink.gBpsPerLink, 25);
  ASSERT_EQ(h.nics.size(), 9u) << "8 NDR ports and eno1; IPoIB twins, docker0 and lo left out";
  for (int i = 0; i < 8; ++i) {
    const auto* n = nic(h, fmt::format("mlx5_{}/1", i));
    ASSERT_NE(n, nullptr) << i;
    EXPECT_EQ(n->kind, "infiniband");
    EXPECT_EQ(n->model, "15b3:1021");
    EXPECT_DOUBLE_EQ(n->gbps, 400);
    EXPECT_TRUE(n->up);
  }
  ASSERT_NE(nic(h, "eno1"), nullptr);
  EXPECT_EQ(nic(h, "eno1")->kind, "ethernet");
  EXPECT_DOUBLE_EQ(nic(h, "eno1")->gbps, 1);
  EXPECT_EQ(nic(h, "eno1")->model, "8086:1521");
  EXPECT_EQ(nic(h, "docker0"), nullptr);
  EXPECT_EQ(nic(h, "lo"), nullptr);
  // GPUs: Gen5 x16 although idle at 2.5 GT/s; 32 GT/s x 128/130 / 8 x 16 = 63.0 GB/s.
  for (int i = 0; i < 8; ++i) {
    const auto* l = link(h, fmt::format("gpu{}", i));
    ASSERT_NE(l, nullptr) << i;
    EXPECT_EQ(l->gen, 5);
    EXPECT_EQ(l->width, 16);
    EXPECT_NEAR(l->gBps, 63.015, 0.01);
    EXPECT_EQ(l->address, fmt::format("0000:{:02x}:00.0", 0x10 * i + 1));
  }
  ASSERT_NE(link(h, "mlx5_0"), nullptr);
  EXPECT_EQ(link(h, "mlx5_0")->gen, 5);
  ASSERT_NE(link(h, "eno1"), nullptr);
  EXPECT_EQ(link(h, "eno1")->gen, 2);
  EXPECT_EQ(link(h, "eno1")->width, 4);
  EXPECT_DOUBLE_EQ(link(h, "eno1")->gBps, 2.0);  // 5 GT/s x 8/10 / 8 x 4
  EXPECT_EQ(
      skuKey(h),
      "cpu=Intel(R) Xeon(R) Platinum 8480C;gpu=8xNVIDIA H100 80GB HBM3;nic=8x400G infiniband+1x1G ethernet");
}

TEST(HardwareReader, TheLeastGpuSetsTheNvlinkCountAndAGen4SlotLimitsAGen5Gpu) {
  H100Node node(/*downLinksOnGpu3=*/2);
  node.t.file("sys/devices/pci0000:30/0000:30:01.0/max_link_speed", "16.0 GT/s PCIe");  // GPU 3's port
  node.t.file("sys/devices/pci0000:30/0000:30:01.0/0000:31:00.0/current_link_width", "8");
  auto q = fixedGpuQuery(node.nvml);
  auto h = readHostHardware(node.t.roots(), q.get(), "dgx02");
  EXPECT_EQ(h.nvlink.links, 16);
  const auto* l = link(h, "gpu3");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->gen, 4);
  EXPECT_EQ(l->width, 8);
  EXPECT_NEAR(l->gBps, 15.75, 0.01);
}

TEST(HardwareReader, WithoutNvmlTheGpusAreCountedFromSysfs) {
  H100Node node;
  GpuView absent;
  absent.error = "NVML not loaded: libnvidia-ml.so.1: cannot open shared object file";
  auto q = fixedGpuQuery(absent);
  auto h = readHostHardware(node.t.roots(), q.get(), "dgx03");
  EXPECT_EQ(h.gpus, 8);
  EXPECT_EQ(h.gpuName, "");
  EXPECT_EQ(h.nvlink.links, 0);
  EXPECT_DOUBLE_EQ(h.nvlink.gBpsPerLink, 0);
  ASSERT_NE(link(h, "gpu7"), nullptr);
  EXPECT_EQ(link(h, "gpu7")->gen, 5);
  // And with no query at all, the same.
  EXPECT_EQ(readHostHardware(node.t.roots(), nullptr, "dgx03").gpus, 8);
}

TEST(HardwareReader, TwoNic100GEthernetNode) {
  FakeTree t;
  t.file("proc/cpuinfo", "model name\t: AMD EPYC 7763 64-Core Processor\n");
  for (int i = 0; i < 2; ++i) {
    std::string dev = t.pci("pci0000:40/0000:40:01.1", fmt::format("0000:41:00.{}", i), "0x8086", "0x1592",
                            "0x020000", "16.0 GT/s PCIe", "16.0 GT/s PCIe", "16");
    t.netdev(fmt::format("ens{}f{}", 1, i), "100000", "up", "1", dev);
  }
  t.netdev("bond0", "200000", "up", "1", "");  // a bond: its slaves are the wires
  auto h = readHostHardware(t.roots(), nullptr, "eth01");
  EXPECT_EQ(h.cpuModel, "AMD EPYC 7763 64-Core Processor");
  EXPECT_EQ(h.gpus, 0);
  ASSERT_EQ(h.nics.size(), 2u);
  for (const auto& n : h.nics) {
    EXPECT_EQ(n.kind, "ethernet");
    EXPECT_DOUBLE_EQ(n.gbps, 100);
    EXPECT_TRUE(n.up);
    EXPECT_EQ(n.model, "8086:1592");
  }
  ASSERT_NE(link(h, "ens1f0"), nullptr);
  EXPECT_EQ(link(h, "ens1f0")->gen, 4);
  EXPECT_EQ(skuKey(h), "cpu=AMD EPYC 7763 64-Core Processor;nic=2x100G ethernet");
}

TEST(HardwareReader, RoceNetdevsAreCountedOnceAndVirtualFunctionsNotAtAll) {
  FakeTree t;
  std::string pf = t.pci("pci0000:40/0000:40:01.1", "0000:41:00.0", "0x15b3", "0x1017", "0x020000",
                         "8.0 GT/s PCIe", "8.0 GT/s PCIe", "16");
  t.ibPort("mlx5_0", 1, "100 Gb/sec (4X EDR)", "4: ACTIVE", "Ethernet", pf);
  t.netdev("enp65s0f0", "100000", "up", "1", pf);
  std::string vf =
      t.pci("pci0000:40/0000:40:01.1", "0000:41:00.2", "0x15b3", "0x1018", "0x020000", "", "", "");
  t.link("sys/devices/pci0000:40/0000:40:01.1/0000:41:00.2/physfn", pf);
  t.netdev("enp65s0f0v0", "100000", "up", "1", vf);
  t.ibPort("rxe0", 1, "100 Gb/sec (4X EDR)", "4: ACTIVE", "Ethernet", "");  // soft RoCE: no PCI device
  auto h = readHostHardware(t.roots(), nullptr, "roce01");
  ASSERT_EQ(h.nics.size(), 1u);
  EXPECT_EQ(h.nics[0].name, "mlx5_0/1");
  EXPECT_EQ(h.nics[0].kind, "roce");
  EXPECT_DOUBLE_EQ(h.nics[0].gbps, 100);
  ASSERT_NE(link(h, "mlx5_0"), nullptr);
  EXPECT_NEAR(link(h, "mlx5_0")->gBps, 15.75, 0.01);  // Gen3 x16
}

// This project's VM: virtio-net says -1 for its speed, its PCI function has no link, ifb's are virtual.
TEST(HardwareReader, ThisVmHasOneNicOfUnknownSpeed) {
  FakeTree t;
  t.file("proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n");
  std::string virtioPci = t.pci("pci0000:00", "0000:00:03.0", "0x1af4", "0x1041", "0x020000", "", "", "");
  t.file(virtioPci + "/virtio2/vendor", "0x1af4");
  t.file(virtioPci + "/virtio2/device", "0x0001");
  t.pci("pci0000:00", "0000:00:00.0", "0x8086", "0x29c0", "0x060000", "", "", "");
  t.netdev("eth0", "-1", "up", "1", virtioPci + "/virtio2");
  t.netdev("ifb0", "", "down", "1", "");
  t.netdev("ifb1", "", "down", "1", "");
  t.netdev("lo", "", "unknown", "772", "");
  auto h = readHostHardware(t.roots(), nullptr, "vm");
  EXPECT_EQ(h.cpuModel, "AMD EPYC");
  ASSERT_EQ(h.nics.size(), 1u);
  EXPECT_EQ(h.nics[0].name, "eth0");
  EXPECT_EQ(h.nics[0].kind, "ethernet");
  EXPECT_EQ(h.nics[0].model, "1af4:0001");
  EXPECT_DOUBLE_EQ(h.nics[0].gbps, 0);
  EXPECT_TRUE(h.nics[0].up);
  EXPECT_TRUE(h.pcie.empty()) << "a virtio function has no PCIe link";
  EXPECT_EQ(h.gpus, 0);
  EXPECT_EQ(skuKey(h), "cpu=AMD EPYC;nic=1x0G ethernet");
}

TEST(HardwareReader, AContainerWithOnlyAVethListsItAsVirtual) {
  FakeTree t;
  t.netdev("eth0", "10000", "up", "1", "");
  t.netdev("lo", "", "unknown", "772", "");
  auto h = readHostHardware(t.roots(), nullptr, "pod");
  ASSERT_EQ(h.nics.size(), 1u);
  EXPECT_EQ(h.nics[0].kind, "virtual");
  EXPECT_DOUBLE_EQ(h.nics[0].gbps, 10);
}

TEST(HardwareReader, DamagedTreesGiveUnknownsNeverACrash) {
  FakeTree t;
  t.file("proc/cpuinfo", "model name\n\x01\x02 garbage without a colon\n");
  std::string dev =
      t.pci("pci0000:40", "0000:41:00.0", "banana", "0xZZ", "0x020000", "Unknown", "fast", "x16");
  t.netdev("eth0", "fast", "up", "1", dev);
  t.netdev("eth1", "4294967295", "down", "1", dev);  // unsigned -1, and the same device
  t.netdev("eth2", "", "up", "1", "sys/devices/gone");
  fs::remove_all(fs::path(t.root()) / "sys/devices/gone");  // a dangling device link
  t.ibPort("mlx5_0", 1, "lots of Gb/sec", "", "", dev);
  t.file("sys/class/infiniband/mlx5_0/ports/2", "a file where a folder belongs");
  fs::create_directories(fs::path(t.root()) / "sys/class/net/eth3/speed");  // a folder where a file belongs
  t.file("sys/class/net/eth3/operstate", "up");
  auto h = readHostHardware(t.roots(), nullptr, "broken");
  EXPECT_EQ(h.cpuModel, "");
  for (const auto& n : h.nics) EXPECT_DOUBLE_EQ(n.gbps, 0) << n.name;
  const auto* ib = nic(h, "mlx5_0/1");
  ASSERT_NE(ib, nullptr);
  EXPECT_FALSE(ib->up);
  EXPECT_EQ(ib->kind, "infiniband");
  EXPECT_EQ(ib->model, "");
  EXPECT_EQ(nic(h, "eth0"), nullptr) << "the netdev of an RDMA device's function is that port";
  for (const auto& l : h.pcie) {
    EXPECT_EQ(l.gen, 0);
    EXPECT_DOUBLE_EQ(l.gBps, 0);
  }
  // A root that does not exist: an empty record with the host's name.
  auto none = readHostHardware({"/nonexistent/sys", "/nonexistent/proc"}, nullptr, "ghost");
  EXPECT_EQ(none.host, "ghost");
  EXPECT_TRUE(none.nics.empty());
  EXPECT_EQ(none.gpus, 0);
  EXPECT_EQ(skuKey(none), "unknown");
}

TEST(HardwareReader, Parsers) {
  EXPECT_EQ(parseIbRate("400 Gb/sec (4X NDR)"), 400);
  EXPECT_EQ(parseIbRate("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_EQ(parseIbRate("56 Gb/sec (4X FDR)"), 56);
  EXPECT_EQ(parseIbRate(""), std::nullopt);
  EXPECT_EQ(parseIbRate("400"), std::nullopt);
  EXPECT_EQ(parseIbRate("fast Gb/sec"), std::nullopt);
  EXPECT_EQ(parseIbRate("-400 Gb/sec"), std::nullopt);
  EXPECT_EQ(parseNetSpeed("100000"), 100);
  EXPECT_EQ(parseNetSpeed("25000\n"), 25);
  EXPECT_EQ(parseNetSpeed("-1"), std::nullopt);
  EXPECT_EQ(parseNetSpeed("0"), std::nullopt);
  EXPECT_EQ(parseNetSpeed("4294967295"), std::nullopt);
  EXPECT_EQ(parseNetSpeed("10G"), std::nullopt);
  EXPECT_EQ(parseNetSpeed("99999999999999999999999"), std::nullopt);
  EXPECT_EQ(pcieGenFromSpeed("2.5 GT/s PCIe"), 1);
  EXPECT_EQ(pcieGenFromSpeed("5.0 GT/s PCIe"), 2);
  EXPECT_EQ(pcieGenFromSpeed("8 GT/s"), 3);
  EXPECT_EQ(pcieGenFromSpeed("16.0 GT/s PCIe"), 4);
  EXPECT_EQ(pcieGenFromSpeed("32.0 GT/s PCIe"), 5);
  EXPECT_EQ(pcieGenFromSpeed("64.0 GT/s PCIe"), 6);
  EXPECT_EQ(pcieGenFromSpeed("Unknown"), 0);
  EXPECT_EQ(pcieGenFromSpeed("12 GT/s"), 0);
  EXPECT_EQ(pcieGenFromSpeed("16.0"), 0);
  EXPECT_DOUBLE_EQ(pcieGBps(1, 16), 4.0);  // 2.5 x 0.8 / 8 x 16
  EXPECT_DOUBLE_EQ(pcieGBps(2, 16), 8.0);
  EXPECT_NEAR(pcieGBps(3, 16), 15.754, 0.001);
  EXPECT_NEAR(pcieGBps(4, 16), 31.508, 0.001);
  EXPECT_NEAR(pcieGBps(5, 16), 63.015, 0.001);
  EXPECT_DOUBLE_EQ(pcieGBps(0, 16), 0);
  EXPECT_DOUBLE_EQ(pcieGBps(7, 16), 0);
  EXPECT_DOUBLE_EQ(pcieGBps(4, 0), 0);
  EXPECT_DOUBLE_EQ(nvlinkGBpsPerLink(9, "NVIDIA H100 80GB HBM3"), 25);
  EXPECT_DOUBLE_EQ(nvlinkGBpsPerLink(7, "NVIDIA A100-SXM4-80GB"), 25);
  EXPECT_DOUBLE_EQ(nvlinkGBpsPerLink(7, "NVIDIA A40"), 14.0625);
  EXPECT_DOUBLE_EQ(nvlinkGBpsPerLink(10, "NVIDIA B200"), 50);
  EXPECT_DOUBLE_EQ(nvlinkGBpsPerLink(4, "Tesla P100-SXM2-16GB"), 20);
  EXPECT_DOUBLE_EQ(nvlinkGBpsPerLink(0, "?"), 0);
  EXPECT_DOUBLE_EQ(nvlinkGBpsPerLink(0xffffffffu, "?"), 0);
}

TEST(HardwareReader, RootsFromTheEnvironment) {
  ::setenv("DSTESTHW_SYSFS", "/tmp/a", 1);
  ::setenv("DSTESTHW_PROCFS", "", 1);
  auto r = hardwareRootsFromEnv("DSTESTHW");
  EXPECT_EQ(r.sysfs, "/tmp/a");
  EXPECT_EQ(r.procfs, "/proc");
  ::unsetenv("DSTESTHW_SYSFS");
  ::unsetenv("DSTESTHW_PROCFS");
}

// The live machine: whatever it has, the reader neither throws nor lists loopback, and every NIC has
// a kind the bounds know.
TEST(HardwareReader, ReadsThisHost) {
  auto h = readHostHardware({}, nullptr, "here");
  for (const auto& n : h.nics) {
    EXPECT_NE(n.name, "lo");
    EXPECT_TRUE(n.kind == "ethernet" || n.kind == "infiniband" || n.kind == "roce" || n.kind == "virtual")
        << n.kind;
    EXPECT_GE(n.gbps, 0);
  }
  for (const auto& l : h.pcie) EXPECT_GE(l.gBps, 0);
}

// The real NVML code (dlopen, dlsym, the calls) against the fake libnvidia-ml.so.1: two H200s.
TEST(NvmlGpuQuery, ReadsTheFakeDriver) {
  ::unsetenv("DS_FAKE_NVML_SCENARIO");
  auto q = nvmlGpuQuery({std::string(DS_FAKE_NVML_DIR) + "/libnvidia-ml.so.1"});
  GpuView v = q->query();
  ASSERT_TRUE(v.loaded) << v.error;
  ASSERT_EQ(v.gpus.size(), 2u);
  EXPECT_EQ(v.gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(v.gpus[0].busId, "0000:19:00.0");
  EXPECT_EQ(v.gpus[1].busId, "0000:3b:00.0");
  EXPECT_EQ(v.gpus[0].arch, 9u);
  EXPECT_EQ(v.gpus[0].nvlinksActive, 18);
  // Where they go (dsbench gpu's peer bounds): all to NVSwitches on this board.
  EXPECT_EQ(v.gpus[0].nvlinkRemotes, std::vector<std::string>(18, "switch"));
  EXPECT_EQ(v.gpus[0].pcieMaxGen, 5);
  EXPECT_EQ(v.gpus[0].pcieWidth, 16);

  ::setenv("DS_FAKE_NVML_SCENARIO", "nvlink_down", 1);
  v = q->query();
  ::unsetenv("DS_FAKE_NVML_SCENARIO");
  ASSERT_TRUE(v.loaded);
  EXPECT_EQ(v.gpus[0].nvlinksActive, 17);
  EXPECT_EQ(v.gpus[0].nvlinkRemotes.size(), 17u);
  EXPECT_EQ(v.gpus[1].nvlinksActive, 18);

  // Through the reader, on a tree without those PCI devices: NVML's own PCIe figures stand in.
  FakeTree t;
  auto h = readHostHardware(t.roots(), q.get(), "h200");
  EXPECT_EQ(h.gpus, 2);
  EXPECT_EQ(h.gpuName, "NVIDIA H200");
  EXPECT_EQ(h.nvlink.links, 18);
  EXPECT_DOUBLE_EQ(h.nvlink.gBpsPerLink, 25);
  ASSERT_NE(link(h, "gpu0"), nullptr);
  EXPECT_EQ(link(h, "gpu0")->gen, 5);
}

TEST(NvmlGpuQuery, AMissingOrBrokenLibraryIsAReasonNotACrash) {
  auto missing = nvmlGpuQuery({"/nonexistent/libnvidia-ml.so.1"})->query();
  EXPECT_FALSE(missing.loaded);
  EXPECT_NE(missing.error.find("NVML not loaded"), std::string::npos) << missing.error;
  testing::TempDir d("ds_hw_nvml");
  std::ofstream(d.file("libnvidia-ml.so.1")) << "not an ELF file\n";
  auto broken = nvmlGpuQuery({d.file("libnvidia-ml.so.1")})->query();
  EXPECT_FALSE(broken.loaded);
  EXPECT_NE(broken.error.find("broken"), std::string::npos) << broken.error;
}

}  // namespace
}  // namespace ds::hw
