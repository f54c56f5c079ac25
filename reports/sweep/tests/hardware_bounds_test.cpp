// From fake tree to bound: what the hardware reader reads (engine/host) is what the bounds of each
// sweep row need (reports/sweep/expected.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/host/tests/fake_hardware.h"
#include "reports/sweep/expected.h"

namespace ds::hw {
namespace {

using namespace ds::hw::fake;

report::SweepMetadata jobOf(const std::vector<HostHardware>& hosts, int ranksPerHost) {
  report::SweepMetadata m;
  for (const auto& h : hosts) {
    m.hosts.push_back(h.host);
    for (int l = 0; l < ranksPerHost; ++l) {
      report::SweepRank r;
      r.rank = static_cast<int>(m.ranks.size());
      r.localRank = l;
      r.host = h.host;
      m.ranks.push_back(r);
    }
  }
  m.worldSize = static_cast<int>(m.ranks.size());
  m.hardware = hosts;
  return m;
}

report::SweepMeasurement allreduce(const std::string& backend, int n, double busBw) {
  report::SweepMeasurement m;
  m.backend = backend;
  m.collective = "allreduce";
  m.worldSize = n;
  m.bytes = std::size_t{1} << 30;
  m.busFactor = 2.0 * (n - 1) / n;
  m.outOfPlace.measured = true;
  m.outOfPlace.busBw = busBw;
  return m;
}

TEST(HardwareBounds, FromFakeTreesOfRealMachines) {
  H100Node node;
  auto q = fixedGpuQuery(node.nvml);
  auto a = readHostHardware(node.t.roots(), q.get(), "dgx01");
  auto b = readHostHardware(node.t.roots(), q.get(), "dgx02");
  report::RowBound across = report::rowBound(allreduce("nccl", 16, 371.2), jobOf({a, b}, 8));
  EXPECT_EQ(across.name, "8x400 Gb/s InfiniBand line rate");
  EXPECT_DOUBLE_EQ(across.gbps, 400);
  EXPECT_NEAR(across.fraction, 0.928, 1e-9);
  report::RowBound inside = report::rowBound(allreduce("nccl", 8, 360), jobOf({a}, 8));
  EXPECT_EQ(inside.name, "NVLink 18x25 GB/s");
  EXPECT_DOUBLE_EQ(inside.gbps, 450);

  FakeTree e;
  for (int i = 0; i < 2; ++i) {
    std::string dev = e.pci("pci0000:40/0000:40:01.1", fmt::format("0000:41:00.{}", i), "0x8086", "0x1592",
                            "0x020000", "16.0 GT/s PCIe", "16.0 GT/s PCIe", "16");
    e.netdev(fmt::format("ens1f{}", i), "100000", "up", "1", dev);
  }
  auto e1 = readHostHardware(e.roots(), nullptr, "eth01"), e2 = readHostHardware(e.roots(), nullptr, "eth02");
  report::RowBound eth = report::rowBound(allreduce("gloo", 2, 21.3), jobOf({e1, e2}, 1));
  EXPECT_EQ(eth.name, "2x100 Gb/s Ethernet line rate");
  EXPECT_DOUBLE_EQ(eth.gbps, 25);
  EXPECT_NEAR(eth.fraction, 0.852, 1e-9);

  FakeTree v;
  std::string virtioPci = v.pci("pci0000:00", "0000:00:03.0", "0x1af4", "0x1041", "0x020000", "", "", "");
  v.netdev("eth0", "-1", "up", "1", virtioPci + "/virtio2");
  auto vm1 = readHostHardware(v.roots(), nullptr, "vm1"), vm2 = readHostHardware(v.roots(), nullptr, "vm2");
  report::RowBound vm = report::rowBound(allreduce("gloo", 2, 1.1), jobOf({vm1, vm2}, 1));
  EXPECT_FALSE(vm.known());
  EXPECT_EQ(
      vm.why,
      "the line rate of vm1's NIC eth0 is unknown (it reports no speed, as virtio and some virtual NICs do)");
}

}  // namespace
}  // namespace ds::hw
