// The topology matrix (pci_topology.h) on hand-made machines, and the sysfs reading behind it on fake
// trees: an 8-GPU NVSwitch box, a 2-socket PCIe box with NICs under switches, a NIC on the other socket.
#include "engine/host/pci_topology.h"

#include <gtest/gtest.h>

#include "engine/host/hardware_reader.h"
#include "engine/host/nvml_api.h"
#include "engine/host/tests/fake_hardware.h"

namespace ds::hw {
namespace {

PciPlace place(const std::string& address, const std::string& hostBridge, std::vector<std::string> bridges,
               int numa) {
  return {address, hostBridge, std::move(bridges), numa, ""};
}

std::vector<std::string> texts(const Topology& t, std::size_t row) {
  std::vector<std::string> out;
  for (const auto& p : t.matrix[row]) out.push_back(pathText(p));
  return out;
}

// DGX H100-like: 8 GPUs, each with a ConnectX-7 under the same Gen5 switch (switch upstream port
// 0000:X1:00.0, downstream ports X2:0Y.0), GPUs 0-3 on socket 0, 4-7 on socket 1, 18 NVLinks each to
// the NVSwitch fabric.
TopologyFacts nvswitchBox(int gpu3FabricLinks = 18) {
  TopologyFacts f;
  for (int i = 0; i < 8; ++i) {
    const int bus = 0x10 * (i + 1);
    const std::string hostBridge = fmt::format("pci0000:{:02x}", bus);
    const std::string root = fmt::format("0000:{:02x}:01.0", bus),
                      up = fmt::format("0000:{:02x}:00.0", bus + 1);
    const int numa = i < 4 ? 0 : 1;
    TopoGpu g;
    g.index = i;
    g.busId = fmt::format("00000000:{:02X}:00.0", bus + 3);
    g.place = place(fmt::format("0000:{:02x}:00.0", bus + 3), hostBridge,
                    {root, up, fmt::format("0000:{:02x}:00.0", bus + 2)}, numa);
    g.fabricLinks = i == 3 ? gpu3FabricLinks : 18;
    f.gpus.push_back(g);
    f.nics.push_back({fmt::format("mlx5_{}", i), true,
                      place(fmt::format("0000:{:02x}:00.0", bus + 4), hostBridge,
                            {root, up, fmt::format("0000:{:02x}:01.0", bus + 2)}, numa)});
  }
  return f;
}

TEST(PciTopology, NvSwitchBoxIsNv18EverywhereAndEachNicIsPixToItsGpu) {
  Topology t = buildTopology(nvswitchBox());
  ASSERT_EQ(t.matrix.size(), 16u);
  for (std::size_t i = 0; i < 8; ++i) {
    for (std::size_t j = 0; j < 8; ++j)
      EXPECT_EQ(pathText(t.matrix[i][j]), i == j ? "X" : "NV18") << i << "," << j;
    EXPECT_EQ(t.gpuNearestKind[i], PathKind::kPix);
    EXPECT_EQ(t.gpuNearestNics[i], std::vector<int>{static_cast<int>(i)});
    EXPECT_EQ(t.nicNearestGpus[i], std::vector<int>{static_cast<int>(i)});
  }
  // GPU 0 against the NICs: its own PIX, the other NICs of socket 0 NODE, socket 1's SYS.
  EXPECT_EQ(texts(t, 0),
            (std::vector<std::string>{"X", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "NV18", "PIX",
                                      "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"}));
  // The matrix is symmetric.
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t j = 0; j < 16; ++j) EXPECT_EQ(t.matrix[i][j], t.matrix[j][i]);
}

TEST(PciTopology, FewerFabricLinksOnOneGpuLowerItsPairs) {
  Topology t = buildTopology(nvswitchBox(16));
  EXPECT_EQ(pathText(t.matrix[3][0]), "NV16");
  EXPECT_EQ(pathText(t.matrix[0][1]), "NV18");
  Topology none = buildTopology(nvswitchBox(0));
  EXPECT_EQ(none.matrix[3][0].kind, PathKind::kNode);  // from the PCIe tree: same socket, other host bridge
  EXPECT_EQ(none.matrix[3][7].kind, PathKind::kSys);
}

// Two sockets of PCIe GPUs: host bridge pci0000:00 (socket 0) holds a switch with GPU0, GPU1 and NIC0,
// and on another root port GPU2; pci0000:40 (socket 0 too) holds GPU3 behind two levels of switches;
// pci0000:80 (socket 1) holds GPU4 and NIC1 under one switch.
TopologyFacts twoSocketPcieBox() {
  TopologyFacts f;
  auto gpu = [&](int i, PciPlace p) {
    TopoGpu g;
    g.index = i;
    g.busId = p.address;
    g.place = std::move(p);
    f.gpus.push_back(g);
  };
  const std::vector<std::string> sw0{"0000:00:01.0", "0000:01:00.0"};
  auto under = [](std::vector<std::string> v, const std::string& b) {
    v.push_back(b);
    return v;
  };
  gpu(0, place("0000:03:00.0", "pci0000:00", under(sw0, "0000:02:00.0"), 0));
  gpu(1, place("0000:04:00.0", "pci0000:00", under(sw0, "0000:02:01.0"), 0));
  gpu(2, place("0000:11:00.0", "pci0000:00", {"0000:00:03.0"}, 0));
  gpu(3, place("0000:45:00.0", "pci0000:40",
               {"0000:40:01.0", "0000:41:00.0", "0000:42:00.0", "0000:43:00.0", "0000:44:00.0"}, 0));
  gpu(4, place("0000:83:00.0", "pci0000:80", {"0000:80:01.0", "0000:81:00.0", "0000:82:00.0"}, 1));
  f.nics.push_back({"mlx5_0", true, place("0000:05:00.0", "pci0000:00", under(sw0, "0000:02:02.0"), 0)});
  f.nics.push_back(
      {"mlx5_1", true,
       place("0000:84:00.0", "pci0000:80", {"0000:80:01.0", "0000:81:00.0", "0000:82:01.0"}, 1)});
  // GPU3's second-level switch also holds a NIC function two levels below GPU3's common bridge.
  f.nics.push_back(
      {"ens5", false,
       place("0000:46:00.0", "pci0000:40", {"0000:40:01.0", "0000:41:00.0", "0000:42:01.0"}, 0)});
  return f;
}

TEST(PciTopology, TwoSocketPcieBoxFollowsTheTree) {
  Topology t = buildTopology(twoSocketPcieBox());
  // Without NVLink or NVML levels the GPU pairs come from the tree too.
  EXPECT_EQ(texts(t, 0), (std::vector<std::string>{"X", "PIX", "PHB", "NODE", "SYS", "PIX", "SYS", "NODE"}));
  EXPECT_EQ(texts(t, 3),
            (std::vector<std::string>{"NODE", "NODE", "NODE", "X", "SYS", "NODE", "SYS", "PXB"}));
  EXPECT_EQ(texts(t, 4), (std::vector<std::string>{"SYS", "SYS", "SYS", "SYS", "X", "SYS", "PIX", "SYS"}));
  EXPECT_EQ(t.nicNearestGpus[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(t.nicNearestGpus[1], std::vector<int>{4});
  EXPECT_EQ(t.gpuNearestKind[2], PathKind::kPhb);
  EXPECT_EQ(t.gpuNearestKind[3], PathKind::kPxb);
  EXPECT_EQ(t.gpuNearestNics[3], std::vector<int>{2});
}

TEST(PciTopology, NvmlLevelsAndDirectLinksDecideGpuPairs) {
  TopologyFacts f = twoSocketPcieBox();
  f.nvmlLevel.assign(5, std::vector<int>(5, -1));
  f.nvmlLevel[0][2] = f.nvmlLevel[2][0] = NVML_TOPOLOGY_HOSTBRIDGE;
  f.nvmlLevel[0][4] = f.nvmlLevel[4][0] = NVML_TOPOLOGY_NODE;  // NVML's word wins over the tree's
  f.directLinks.assign(5, std::vector<int>(5, 0));
  f.directLinks[0][1] = 4;
  f.directLinks[1][0] = 3;  // one end sees a link fewer: the larger count
  Topology t = buildTopology(f);
  EXPECT_EQ(pathText(t.matrix[0][1]), "NV4");
  EXPECT_EQ(pathText(t.matrix[1][0]), "NV4");
  EXPECT_EQ(pathText(t.matrix[0][2]), "PHB");
  EXPECT_EQ(pathText(t.matrix[0][4]), "NODE");
  EXPECT_EQ(pathText(t.matrix[1][4]), "SYS");
}

TEST(PciTopology, ANicOnTheOtherSocketIsSysAndUnknownPlacesStayUnknown) {
  TopologyFacts f;
  TopoGpu g;
  g.busId = "00000000:19:00.0";
  g.place = place("0000:19:00.0", "pci0000:15", {"0000:15:01.0"}, 0);
  f.gpus.push_back(g);
  TopoGpu lost;
  lost.index = 1;
  lost.busId = "00000000:3B:00.0";  // not in sysfs (a container)
  f.gpus.push_back(lost);
  f.nics.push_back({"mlx5_0", true, place("0000:d1:00.0", "pci0000:d0", {"0000:d0:01.0"}, 1)});
  Topology t = buildTopology(f);
  EXPECT_EQ(t.matrix[0][2].kind, PathKind::kSys);
  EXPECT_EQ(t.gpuNearestKind[0], PathKind::kSys);
  EXPECT_EQ(t.matrix[1][2].kind, PathKind::kUnknown);
  EXPECT_EQ(pathText(t.matrix[0][1]), "?");
  EXPECT_EQ(t.gpuNearestKind[1], PathKind::kUnknown);
  EXPECT_TRUE(t.gpuNearestNics[1].empty());
  EXPECT_EQ(t.nicNearestGpus[0], std::vector<int>{0});
  // NUMA nodes unknown on either side: across host bridges is NODE, not a guessed SYS.
  f.nics[0].place.numaNode = -1;
  EXPECT_EQ(buildTopology(f).matrix[0][2].kind, PathKind::kNode);
}

TEST(PciTopology, BusIdsInNvmlsSpellingMatchSysfs) {
  EXPECT_EQ(sysfsPciAddress("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(sysfsPciAddress("0000:3b:00.0"), "0000:3b:00.0");
  EXPECT_EQ(sysfsPciAddress("3b:00.0"), "");
  EXPECT_EQ(sysfsPciAddress("00010000:3B:00.0"), "");
  EXPECT_EQ(sysfsPciAddress("0000:3g:00.0"), "");
  EXPECT_EQ(sysfsPciAddress(""), "");
}

TEST(PciTopology, ReadsPlacesAndNicsFromSysfs) {
  fake::FakeTree t;
  const std::string sw = "pci0000:16/0000:16:01.0/0000:17:00.0";
  t.pci(sw + "/0000:18:00.0", "0000:19:00.0", "0x10de", "0x2335", "0x030200", "", "32.0 GT/s PCIe", "16");
  t.file("sys/devices/" + sw + "/0000:18:00.0/0000:19:00.0/numa_node", "0");
  t.file("sys/devices/" + sw + "/0000:18:00.0/0000:19:00.0/local_cpulist", "0-55,112-167");
  std::string hca = t.pci(sw + "/0000:18:01.0", "0000:1a:00.0", "0x15b3", "0x1021", "0x020700", "", "", "16");
  t.file(hca + "/numa_node", "0");
  t.ibPort("mlx5_0", 1, "400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand", hca);
  t.netdev("ibp26s0", "400000", "up", "32", hca);  // the same function: listed once, as mlx5_0
  std::string eth =
      t.pci("pci0000:b0/0000:b0:02.0", "0000:b1:00.0", "0x8086", "0x1592", "0x020000", "", "", "16");
  t.file(eth + "/numa_node", "-1");
  t.netdev("ens7", "100000", "up", "1", eth);
  std::string virtio = t.pci("pci0000:00", "0000:00:03.0", "0x1af4", "0x1000", "0x020000", "", "", "");
  t.netdev("eth0", "", "up", "1", virtio + "/virtio2");
  t.netdev("veth1a2b", "10000", "up", "1", "");
  t.netdev("docker0", "", "up", "1", "");
  t.netdev("lo", "", "unknown", "772", "");

  auto gpu = readPciPlace(t.roots().sysfs, "00000000:19:00.0");
  ASSERT_TRUE(gpu.has_value());
  EXPECT_EQ(gpu->address, "0000:19:00.0");
  EXPECT_EQ(gpu->hostBridge, "pci0000:16");
  EXPECT_EQ(gpu->bridges, (std::vector<std::string>{"0000:16:01.0", "0000:17:00.0", "0000:18:00.0"}));
  EXPECT_EQ(gpu->numaNode, 0);
  EXPECT_EQ(gpu->cpus, "0-55,112-167");
  EXPECT_FALSE(readPciPlace(t.roots().sysfs, "00000000:3B:00.0").has_value());
  EXPECT_FALSE(readPciPlace(t.roots().sysfs, "garbage").has_value());

  auto nics = readNicPciDevices(t.roots());
  std::vector<std::string> names;
  for (const auto& n : nics) names.push_back(n.name + (n.rdma ? " rdma" : ""));
  EXPECT_EQ(names, (std::vector<std::string>{"mlx5_0 rdma", "ens7", "eth0"}));
  auto hcaPlace = pciPlaceOf(nics[0].path);
  ASSERT_TRUE(hcaPlace.has_value());
  EXPECT_EQ(pciPath(*gpu, *hcaPlace), PathKind::kPix);
  auto virtioPlace = pciPlaceOf(nics[2].path);
  ASSERT_TRUE(virtioPlace.has_value());
  EXPECT_EQ(virtioPlace->address, "0000:00:03.0");
  EXPECT_EQ(virtioPlace->hostBridge, "pci0000:00");
  EXPECT_TRUE(virtioPlace->bridges.empty());
  auto ethPlace = pciPlaceOf(nics[1].path);
  ASSERT_TRUE(ethPlace.has_value());
  EXPECT_EQ(ethPlace->numaNode, -1);
  EXPECT_EQ(pciPath(*gpu, *ethPlace), PathKind::kNode);
}

// The link state gpu.pcie_link judges NICs by: lanes against the device's, speed against the lesser of
// the device's and its slot's best.
TEST(PciTopology, LinkStateAgainstTheDeviceAndItsSlot) {
  fake::FakeTree t;
  t.file("sys/devices/pci0000:16/0000:16:01.0/max_link_speed", "16.0 GT/s PCIe");  // a Gen4 slot
  std::string gen5InGen4 = t.pci("pci0000:16/0000:16:01.0", "0000:17:00.0", "0x15b3", "0x1021", "0x020700",
                                 "16.0 GT/s PCIe", "32.0 GT/s PCIe", "8");
  auto s = readPcieLinkState(std::filesystem::path(t.root()) / gen5InGen4);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->gen, 4);
  EXPECT_EQ(s->maxGen, 4);  // the slot's best, not a degraded link
  EXPECT_EQ(s->width, 8);
  EXPECT_EQ(s->maxWidth, 16);  // but half its lanes
  std::string virtio = t.pci("pci0000:00", "0000:00:03.0", "0x1af4", "0x1000", "0x020000", "", "", "");
  EXPECT_FALSE(readPcieLinkState(std::filesystem::path(t.root()) / virtio).has_value());
}

}  // namespace
}  // namespace ds::hw
