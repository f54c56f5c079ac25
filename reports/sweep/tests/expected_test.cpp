// Bounds from the hardware (expected.h) on the records of real machines: an 8xH100 node with 8x400G
// InfiniBand and NVLink 18x25 GB/s, a 2-NIC 100G Ethernet node, this project's VM (virtio, no speed);
// every rule (NICs across hosts, NVLink, PCIe, memory), the topology factors, the unknown states, and
// the three outputs (text, JSON, HTML) and the samples.
#include "reports/sweep/expected.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/host/tests/hardware_fixtures.h"
#include "reports/html/run_report.h"
#include "reports/run/run_file.h"
#include "reports/sample/sample.h"
#include "reports/sweep/sweep_text.h"

namespace ds::report {
namespace {

using testing::ethernet2x100;
using testing::h100;
using testing::thisVm;

SweepMetadata meta(std::vector<hw::HostHardware> hw, int ranksPerHost) {
  SweepMetadata m;
  int rank = 0;
  for (const auto& h : hw) {
    m.hosts.push_back(h.host);
    for (int l = 0; l < ranksPerHost; ++l) {
      SweepRank r;
      r.rank = rank++;
      r.localRank = l;
      r.host = h.host;
      m.ranks.push_back(r);
    }
  }
  m.worldSize = rank;
  m.hardware = std::move(hw);
  return m;
}

double busFactorOf(const std::string& coll, int n) {
  if (coll == "allreduce") return 2.0 * (n - 1) / n;
  if (coll == "allgather" || coll == "reduce_scatter" || coll == "alltoall")
    return static_cast<double>(n - 1) / n;
  return 1;
}

SweepMeasurement row(const std::string& backend, const std::string& coll, int n, double busBw,
                     std::size_t bytes = std::size_t{1} << 30) {
  SweepMeasurement m;
  m.backend = backend;
  m.collective = coll;
  m.dtype = "f32";
  m.op = "sum";
  m.worldSize = n;
  m.bytes = m.requestedBytes = bytes;
  m.count = bytes / 4;
  m.busFactor = busFactorOf(coll, n);
  m.outOfPlace.measured = true;
  m.outOfPlace.busBw = busBw;
  m.outOfPlace.algBw = busBw / m.busFactor;
  m.outOfPlace.wrong = 0;
  return m;
}

TEST(Expected, TwoH100NodesAcrossEightNdrRails) {
  auto m = meta({h100("dgx01"), h100("dgx02")}, 8);
  RowBound b = rowBound(row("nccl", "allreduce", 16, 371.2), m);
  ASSERT_TRUE(b.known()) << b.why;
  EXPECT_EQ(b.kind, "nic");
  EXPECT_DOUBLE_EQ(b.gbps, 400);  // 8 x 400 Gb/s / 8; the 1G management port is not NCCL's
  EXPECT_DOUBLE_EQ(b.practicalGBps, 384);
  EXPECT_EQ(b.name, "8x400 Gb/s InfiniBand line rate");
  EXPECT_NEAR(b.fraction, 0.928, 1e-9);
  EXPECT_EQ(b.why, "");
  // Allgather and reduce_scatter are rings too: the same bound.
  EXPECT_DOUBLE_EQ(rowBound(row("nccl", "allgather", 16, 300), m).gbps, 400);
  EXPECT_DOUBLE_EQ(rowBound(row("nccl", "broadcast", 16, 300), m).gbps, 400);
  // Alltoall: 8 ranks per host each send 8/16 of their data off it: 400 x 15 / (8 x 8).
  RowBound a2a = rowBound(row("nccl", "alltoall", 16, 80), m);
  EXPECT_DOUBLE_EQ(a2a.gbps, 400 * 15.0 / 64);
  EXPECT_NE(a2a.name.find("alltoall"), std::string::npos) << a2a.name;
  // Sendrecv: one stream per host boundary, one NIC.
  EXPECT_DOUBLE_EQ(rowBound(row("nccl", "sendrecv", 16, 40), m).gbps, 50);
  // A CPU backend can use every wire a socket reaches, the management port included.
  RowBound gloo = rowBound(row("gloo", "allreduce", 16, 5), m);
  EXPECT_DOUBLE_EQ(gloo.gbps, 3201 / 8.0);
  EXPECT_EQ(gloo.name, "8x400 Gb/s InfiniBand + 1x1 Gb/s Ethernet line rate");
}

TEST(Expected, OneH100NodeIsBoundByItsNvlinks) {
  auto m = meta({h100("dgx01")}, 8);
  RowBound b = rowBound(row("nccl", "allreduce", 8, 360), m);
  ASSERT_TRUE(b.known()) << b.why;
  EXPECT_EQ(b.kind, "nvlink");
  EXPECT_DOUBLE_EQ(b.gbps, 450);
  EXPECT_EQ(b.name, "NVLink 18x25 GB/s");
  EXPECT_DOUBLE_EQ(b.fraction, 0.8);
  EXPECT_DOUBLE_EQ(b.practicalGBps, 0);
  EXPECT_EQ(b.host, "");
  // NVLS reduces in the switch: busbw above the link rate is said, not capped.
  RowBound nvls = rowBound(row("nccl", "allreduce", 8, 480), m);
  EXPECT_NEAR(nvls.fraction, 480.0 / 450, 1e-12);
  EXPECT_NE(nvls.why.find("in-network reduction"), std::string::npos) << nvls.why;
}

TEST(Expected, WithoutNvlinkTheSlowestGpuPcieLinkBounds) {
  hw::HostHardware h = h100("pcie01");
  h.nvlink = {0, 0};
  h.pcie[2] = {"gpu1", "0000:11:00.0", 4, 16, 31.508};  // one GPU in a Gen4 slot
  auto m = meta({h}, 8);
  RowBound b = rowBound(row("nccl", "allreduce", 8, 25), m);
  ASSERT_TRUE(b.known()) << b.why;
  EXPECT_EQ(b.kind, "pcie");
  EXPECT_DOUBLE_EQ(b.gbps, 31.508);
  EXPECT_EQ(b.name, "PCIe Gen4 x16 GPU link (gpu1)");
  // Without NVML nobody knows whether NVLink is there: unknown, not a PCIe guess.
  h.gpuName = "";
  RowBound u = rowBound(row("nccl", "allreduce", 8, 25), meta({h}, 8));
  EXPECT_FALSE(u.known());
  EXPECT_NE(u.why.find("NVML was not available on pcie01"), std::string::npos) << u.why;
  // NVLinks of an unknown speed.
  h = h100("new01");
  h.nvlink.gBpsPerLink = 0;
  EXPECT_NE(rowBound(row("nccl", "allreduce", 8, 25), meta({h}, 8)).why.find("NVLink speed"),
            std::string::npos);
}

TEST(Expected, TwoEthernetNodes) {
  auto m = meta({ethernet2x100("eth01"), ethernet2x100("eth02")}, 1);
  RowBound b = rowBound(row("gloo", "allreduce", 2, 21.3), m);
  ASSERT_TRUE(b.known()) << b.why;
  EXPECT_DOUBLE_EQ(b.gbps, 25);
  EXPECT_DOUBLE_EQ(b.practicalGBps, 24);
  EXPECT_EQ(b.name, "2x100 Gb/s Ethernet line rate");
  EXPECT_NEAR(b.fraction, 0.852, 1e-9);
  // nccl on a node without RDMA uses its sockets over the same NICs.
  EXPECT_DOUBLE_EQ(rowBound(row("nccl", "allreduce", 2, 20), m).gbps, 25);
}

TEST(Expected, TheSlowestHostBounds) {
  hw::HostHardware slow = ethernet2x100("eth07");
  slow.nics[1].up = false;
  auto m = meta({ethernet2x100("eth01"), slow, ethernet2x100("eth03")}, 2);
  RowBound b = rowBound(row("mpi", "allreduce", 6, 10), m);
  ASSERT_TRUE(b.known()) << b.why;
  EXPECT_DOUBLE_EQ(b.gbps, 12.5);
  EXPECT_EQ(b.host, "eth07");
  EXPECT_EQ(b.name, "1x100 Gb/s Ethernet line rate");
  EXPECT_DOUBLE_EQ(b.fraction, 0.8);
}

TEST(Expected, ANicOnANarrowPcieLinkCountsAtItsPcieRate) {
  hw::HostHardware h = h100("gen4");
  for (auto& l : h.pcie)
    if (l.device.rfind("mlx5_", 0) == 0) l = {l.device, l.address, 4, 16, 31.508};
  auto m = meta({h, h100("dgx02")}, 8);
  RowBound b = rowBound(row("nccl", "allreduce", 16, 200), m);
  ASSERT_TRUE(b.known()) << b.why;
  EXPECT_NEAR(b.gbps, 8 * 31.508, 1e-9);
  EXPECT_EQ(b.host, "gen4");
  EXPECT_NE(b.name.find("capped: mlx5_0/1 by its PCIe Gen4 x16"), std::string::npos) << b.name;
}

TEST(Expected, ThisVmSaysPlainlyThatItsBoundIsUnknown) {
  hw::HostHardware vm2 = thisVm();
  vm2.host = "vm2";
  RowBound b = rowBound(row("gloo", "allreduce", 2, 1.2), meta({thisVm(), vm2}, 1));
  EXPECT_FALSE(b.known());
  EXPECT_EQ(
      b.why,
      "the line rate of vm's NIC eth0 is unknown (it reports no speed, as virtio and some virtual NICs do)");
  EXPECT_DOUBLE_EQ(b.fraction, 0);
  EXPECT_DOUBLE_EQ(b.busBw, 1.2);
  // On the one VM, a CPU backend's bound is memory, which this run did not measure.
  RowBound shm = rowBound(row("shm", "allreduce", 2, 3), meta({thisVm()}, 2));
  EXPECT_FALSE(shm.known());
  EXPECT_EQ(shm.why, "the memory bandwidth of vm was not measured");
}

// The project's zero-copy limit (docs/dev/benchmarks.md): allreduce busbw <= B x 2(n-1)/n².
TEST(Expected, CpuBackendsOnOneHostAreBoundByMemory) {
  hw::HostHardware h = thisVm();
  h.memBwGBps = 20;
  for (int n : {2, 3, 4, 8}) {
    auto m = meta({h}, n);
    RowBound b = rowBound(row("shm", "allreduce", n, 1), m);
    ASSERT_TRUE(b.known()) << b.why;
    EXPECT_EQ(b.kind, "memory");
    EXPECT_NEAR(b.gbps, 20 * 2.0 * (n - 1) / (n * n), 1e-12) << n;
    EXPECT_EQ(b.name, "zero-copy limit of a 20 GB/s memory copy");
    // The others: B x busFactor / copy traffic.
    EXPECT_NEAR(rowBound(row("shm", "allgather", n, 1), m).gbps, 20.0 / n, 1e-12);
    EXPECT_NEAR(rowBound(row("gloo", "alltoall", n, 1), m).gbps, 20.0 / n, 1e-12);
    EXPECT_NEAR(rowBound(row("shm", "broadcast", n, 1), m).gbps, 20.0 / (n - 1), 1e-12);
    EXPECT_NEAR(rowBound(row("mpi", "reduce_scatter", n, 1), m).gbps, 20.0 * (n - 1) / n * 2 / (n + 1),
                1e-12);
    EXPECT_NEAR(rowBound(row("shm", "reduce", n, 1), m).gbps, 20.0 * 2 / (n + 1), 1e-12);
    EXPECT_NEAR(rowBound(row("shm", "sendrecv", n, 1), m).gbps, 20.0 / n, 1e-12);
  }
}

TEST(Expected, UnknownStates) {
  SweepMetadata none;
  none.hosts = {"a"};
  EXPECT_NE(rowBound(row("nccl", "allreduce", 8, 1), none).why.find("recorded no hardware"),
            std::string::npos);
  auto one = meta({h100("dgx01")}, 1);
  SweepMeasurement solo = row("nccl", "allreduce", 1, 0);
  solo.busFactor = 0;
  EXPECT_NE(rowBound(solo, one).why.find("one rank"), std::string::npos);
  auto missing = meta({h100("dgx01"), h100("dgx02")}, 8);
  missing.hardware.pop_back();
  EXPECT_EQ(rowBound(row("nccl", "allreduce", 16, 1), missing).why,
            "no hardware was recorded for host dgx02");
  hw::HostHardware down = ethernet2x100("eth09");
  for (auto& n : down.nics) n.up = false;
  EXPECT_EQ(rowBound(row("gloo", "allreduce", 2, 1), meta({ethernet2x100("eth01"), down}, 1)).why,
            "no NIC of eth09 is up");
  hw::HostHardware pod;
  pod.host = "pod";
  pod.nics.push_back({"eth0", "virtual", "", 10, true});
  EXPECT_NE(rowBound(row("gloo", "allreduce", 2, 1), meta({pod, ethernet2x100("eth01")}, 1))
                .why.find("only virtual"),
            std::string::npos);
  // Not measured: the bound is known, the fraction is not.
  SweepMeasurement unmeasured = row("nccl", "allreduce", 8, 0);
  unmeasured.outOfPlace.measured = false;
  RowBound u = rowBound(unmeasured, meta({h100("dgx01")}, 8));
  EXPECT_TRUE(u.known());
  EXPECT_DOUBLE_EQ(u.fraction, 0);
  EXPECT_TRUE(boundToJson(u)["fraction"].is_null());
  // In-place stands in when out-of-place was not measured.
  unmeasured.inPlace.measured = true;
  unmeasured.inPlace.busBw = 225;
  EXPECT_DOUBLE_EQ(rowBound(unmeasured, meta({h100("dgx01")}, 8)).fraction, 0.5);
}

TEST(Expected, JsonObjectPerRow) {
  auto m = meta({h100("dgx01"), h100("dgx02")}, 8);
  nlohmann::json j = boundToJson(rowBound(row("nccl", "allreduce", 16, 371.2), m));
  EXPECT_EQ(j["name"], "8x400 Gb/s InfiniBand line rate");
  EXPECT_EQ(j["kind"], "nic");
  EXPECT_DOUBLE_EQ(j["gbps"].get<double>(), 400);
  EXPECT_NEAR(j["fraction"].get<double>(), 0.928, 1e-9);
  EXPECT_DOUBLE_EQ(j["practical_gbps"].get<double>(), 384);
  EXPECT_FALSE(j.contains("host")) << "hosts alike: none is the slowest";
  nlohmann::json u = boundToJson(rowBound(row("gloo", "allreduce", 1, 0), meta({thisVm()}, 1)));
  EXPECT_EQ(u["name"], "unknown");
  EXPECT_TRUE(u["fraction"].is_null());
  EXPECT_FALSE(u["why"].get<std::string>().empty());

  // In the sweep document: a "bound" per row when hardware was recorded, none otherwise; read back
  // unchanged (it is derived).
  SweepRun run;
  run.metadata = m;
  run.results = {row("nccl", "allreduce", 16, 100, 1 << 20), row("nccl", "allreduce", 16, 371.2)};
  nlohmann::json doc = sweepToJson(run);
  ASSERT_TRUE(doc["results"][1].contains("bound"));
  EXPECT_NEAR(doc["results"][1]["bound"]["fraction"].get<double>(), 0.928, 1e-9);
  EXPECT_NEAR(doc["results"][0]["bound"]["fraction"].get<double>(), 0.25, 1e-9);
  SweepRun back = sweepFromJson(doc, "test");
  EXPECT_EQ(back.metadata.hardware, m.hardware);
  run.metadata.hardware.clear();
  EXPECT_FALSE(sweepToJson(run)["results"][1].contains("bound"));
}

TEST(Expected, TextLinesAfterTheTable) {
  auto m = meta({ethernet2x100("eth01"), ethernet2x100("eth02")}, 1);
  std::vector<SweepMeasurement> rows;
  for (int p = 20; p <= 30; p += 2)
    rows.push_back(row("gloo", "allreduce", 2, 5.0 + p - 20, std::size_t{1} << p));
  EXPECT_EQ(formatBoundLines(rows, m),
            "# bound: 25 GB/s busbw = 2x100 Gb/s Ethernet line rate (practical ~24 GB/s: "
            "~24 GB/s per 200G NIC)\n"
            "# bound: busbw 11.00 GB/s at 64 MiB = 44% of 2x100 Gb/s Ethernet line rate\n"
            "# bound: busbw 13.00 GB/s at 256 MiB = 52% of 2x100 Gb/s Ethernet line rate\n"
            "# bound: busbw 15.00 GB/s at 1 GiB = 60% of 2x100 Gb/s Ethernet line rate\n");
  // Only 32 MiB and up count; a sweep of small sizes gets its largest, with a remark.
  std::vector<SweepMeasurement> small(rows.begin(), rows.begin() + 2);
  EXPECT_NE(formatBoundLines(small, m).find(
                "# bound: busbw 7.00 GB/s at 4 MiB = 28% of 2x100 Gb/s Ethernet line rate (a small size: "
                "latency, not bandwidth, decides it; compare from 32 MiB up)\n"),
            std::string::npos)
      << formatBoundLines(small, m);
  // Above the memory bound at a size that fits in the caches: said as such.
  hw::HostHardware cached = thisVm();
  cached.memBwGBps = 13.5;
  RowBound c = rowBound(row("shm", "allreduce", 2, 10.3, std::size_t{4} << 20), meta({cached}, 2));
  EXPECT_NE(c.why.find("fit in the caches"), std::string::npos) << c.why;
  EXPECT_EQ(
      formatBoundLines(rows, meta({thisVm(), thisVm()}, 1)),
      "# bound: unknown: the line rate of vm's NIC eth0 is unknown (it reports no speed, as virtio and some "
      "virtual NICs do)\n");
  SweepMetadata none;
  EXPECT_EQ(formatBoundLines(rows, none), "");
  // Every line is a comment: nccl-tests parsers skip it.
  for (const auto& mm : {m, meta({h100("a")}, 8)}) {
    std::string text = formatBoundLines(rows, mm);
    for (std::size_t at = 0; at < text.size(); at = text.find('\n', at) + 1) EXPECT_EQ(text[at], '#');
  }
  // The preamble names each host's hardware.
  std::string pre = formatSweepPreamble({}, meta({h100("dgx01")}, 1));
  EXPECT_NE(
      pre.find("# hardware of dgx01: 8x400G infiniband + 1x1G ethernet; 8x NVIDIA H100 80GB HBM3, NVLink "
               "18x25 GB/s, PCIe Gen5 x16; Intel(R) Xeon(R) Platinum 8480C\n"),
      std::string::npos)
      << pre;
  EXPECT_EQ(describeHardware(thisVm()), "1x ethernet of unknown speed; AMD EPYC");
}

RunFile sweepFile(SweepRun run) { return classifyRun(sweepToJson(run), "test.json"); }

TEST(Expected, SamplesCarryTheBound) {
  SweepRun run;
  run.metadata = meta({h100("dgx01"), h100("dgx02")}, 8);
  run.args.collectives = {"allreduce"};
  run.args.backends = {"nccl"};
  run.results = {row("nccl", "allreduce", 16, 371.2)};
  auto samples = samplesOf(sweepFile(run));
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0].boundGBps, 400);
  EXPECT_EQ(samples[0].boundName, "8x400 Gb/s InfiniBand line rate");
  run.metadata.hardware.clear();
  samples = samplesOf(sweepFile(run));
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0].boundGBps, 0);
  EXPECT_EQ(samples[0].boundName, "");
}

TEST(Expected, HtmlReportShowsTheBoundAndTheFraction) {
  SweepRun run;
  run.metadata = meta({h100("dgx01"), h100("dgx02")}, 8);
  run.args.collectives = {"allreduce"};
  run.args.backends = {"nccl"};
  run.results = {row("nccl", "allreduce", 16, 371.2)};
  std::string page = html::renderRunReport({sweepFile(run)});
  EXPECT_NE(page.find("busbw / bound"), std::string::npos);
  EXPECT_NE(page.find("93% of 400 GB/s"), std::string::npos);
  EXPECT_NE(page.find("Bound: 400 GB/s of busbw, the 8x400 Gb/s InfiniBand line rate (practical ~384 GB/s"),
            std::string::npos);
  EXPECT_NE(page.find("hardware: dgx02"), std::string::npos);
  run.metadata.hardware.clear();
  page = html::renderRunReport({sweepFile(run)});
  EXPECT_EQ(page.find("busbw / bound"), std::string::npos);
}

}  // namespace
}  // namespace ds::report
