// dsbench gpu on a CPU: the flags, the plan, the summaries, the facts and the whole run with a fake
// measurer (fake GPUs, fake times, fake NVML); what it says where CUDA is missing.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "bench/exit_codes.h"
#include "bench/gpu/gpu.h"
#include "engine/common/error.h"
#include "reports/json_io.h"

namespace ds::bench::gpu {
namespace {

using report::CopyMethod;
using report::CopyPath;

std::string readAll(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) s.append(buf, n);
  return s;
}

TEST(GpuBenchFlags, SizeTakesBinarySuffixesAndRefusesGarbage) {
  GpuFlags f;
  EXPECT_EQ(resolveGpuOptions(f).bytes, 512ULL << 20);
  f.size = "64K";
  EXPECT_EQ(resolveGpuOptions(f).bytes, 65536u);
  f.size = "1G";
  EXPECT_EQ(resolveGpuOptions(f).bytes, 1ULL << 30);
  for (const char* bad : {"lots", "12Q", "", "-1M", "8", "65G"}) {
    f.size = bad;
    try {
      resolveGpuOptions(f);
      FAIL() << "--size '" << bad << "' was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--size"), std::string::npos) << e.what();
    }
  }
}

TEST(GpuBenchFlags, DevicesMustExistBeNumbersAndNotRepeat) {
  EXPECT_EQ(resolveDevices("", 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(resolveDevices("2,0", 3), (std::vector<int>{2, 0}));
  try {
    resolveDevices("0,4", 2);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("there is no GPU 4 here; CUDA sees 2 GPU(s) (0-1)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(resolveDevices("one", 2), ConfigError);
  EXPECT_THROW(resolveDevices("-1", 2), ConfigError);
  EXPECT_THROW(resolveDevices("1,1", 2), ConfigError);
  EXPECT_THROW(resolveDevices(",", 2), ConfigError);
}

TEST(GpuBenchPlan, EveryGpuGetsItsHostAndLocalRowsAndEveryOrderedPairItsPeerRows) {
  auto one = planCopyRows({0}, 1 << 20, 5);
  ASSERT_EQ(one.size(), 8u);
  EXPECT_EQ(one[0].testcase, "host_to_device_memcpy_ce");
  EXPECT_FALSE(one[0].pageable);
  EXPECT_TRUE(one[1].pageable);
  EXPECT_EQ(one[2].method, CopyMethod::kKernel);
  EXPECT_EQ(one[6].testcase, "device_local_copy");
  for (const auto& r : one) {
    EXPECT_EQ(r.peer, -1);
    EXPECT_EQ(r.bytes, 1u << 20);
    EXPECT_EQ(r.iters, 5);
  }
  auto three = planCopyRows({0, 1, 2}, 1 << 20, 5);
  EXPECT_EQ(three.size(), 3 * 8 + 3 * 2 * 4u);
  int reads = 0;
  for (const auto& r : three)
    if (r.testcase == "device_to_device_memcpy_read_ce") {
      ++reads;
      EXPECT_NE(r.device, r.peer);
      EXPECT_EQ(r.path, CopyPath::kPeerRead);
    }
  EXPECT_EQ(reads, 6);
}

TEST(GpuBenchPlan, TheMedianAndTheExtremesComeFromTheTimes) {
  report::GpuCopyRow r;
  r.bytes = 1000000000;                                // 1 GB
  summariseTimes(r, {40000, 20000, 25000, 0, 30000});  // a zero (never timed) is dropped
  EXPECT_DOUBLE_EQ(r.medianUs, 27500);
  EXPECT_NEAR(r.medianGBps, 1e9 / 27500e3, 1e-9);
  EXPECT_DOUBLE_EQ(r.maxGBps, 50);
  EXPECT_DOUBLE_EQ(r.minGBps, 25);
  report::GpuCopyRow none;
  summariseTimes(none, {});
  EXPECT_TRUE(none.skipped);
}

// Two fake H100s joined through NVSwitches; GPU 2 cannot reach the others.
class FakeMeasurer : public CopyMeasurer {
 public:
  int count = 3;
  std::string countError;
  std::string timeError;  // thrown as a BackendError by time() when set
  std::vector<report::GpuCopyRow> timed;
  int deviceCount() override {
    if (!countError.empty()) throw BackendError(countError);
    return count;
  }
  report::GpuCopyDevice describe(int device) override {
    report::GpuCopyDevice d;
    d.index = device;
    d.name = "NVIDIA H100 80GB HBM3";
    d.busId = fmt::format("0000:{:02x}:00.0", 0x19 + device);
    d.memClockMHz = 2619;
    d.memBusWidthBits = 5120;
    return d;
  }
  bool enablePeer(int a, int b, std::string& why) override {
    if (a == 2 || b == 2) {
      why = fmt::format("cudaDeviceCanAccessPeer says GPU {} cannot reach GPU {}", a, b);
      return false;
    }
    return true;
  }
  std::vector<double> time(const report::GpuCopyRow& row, int, int iters) override {
    if (!timeError.empty()) throw BackendError(timeError);
    timed.push_back(row);
    const double gbps = row.path == CopyPath::kDeviceLocal ? 1400
                        : row.peer >= 0                    ? 380
                        : row.pageable                     ? 20
                                                           : 55;
    return std::vector<double>(static_cast<std::size_t>(iters),
                               static_cast<double>(row.bytes) / (gbps * 1e3));
  }
  std::string runtimeVersion() override { return "13.0"; }
  std::string driverVersion() override { return "13.0"; }
};

hw::GpuView fakeNvml() {
  hw::GpuView v;
  v.loaded = true;
  for (int i = 0; i < 3; ++i) {
    hw::GpuFacts g;
    g.name = "NVIDIA H100 80GB HBM3";
    g.busId = fmt::format("0000:{:02x}:00.0", 0x19 + i);
    g.arch = 9;
    g.nvlinksActive = 18;
    g.nvlinkRemotes.assign(18, "switch");
    g.pcieMaxGen = 5;
    g.pcieWidth = 16;
    v.gpus.push_back(g);
  }
  return v;
}

struct Captured {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  ~Captured() {
    std::fclose(out);
    std::fclose(err);
  }
};

TEST(GpuBenchRun, MeasuresBoundsPrintsAndWritesTheJson) {
  FakeMeasurer m;
  auto nvml = hw::fixedGpuQuery(fakeNvml());
  Captured c;
  GpuRunEnv env;
  env.measurer = &m;
  env.nvml = nvml.get();
  env.roots = {"/nonexistent-sysfs", "/nonexistent-procfs"};  // PCIe from NVML's figures
  env.host = "fakehost";
  env.out = c.out;
  env.err = c.err;
  GpuFlags f;
  f.size = "1M";
  f.iters = 4;
  f.devices = "0,1,2";
  f.jsonPath = ::testing::TempDir() + "/gpu_bench_test.json";
  ASSERT_EQ(runGpuWith(resolveGpuOptions(f), env), kExitOk) << readAll(c.err);
  const std::string out = readAll(c.out);
  std::printf("%s", out.c_str());
  EXPECT_NE(out.find("# dsbench gpu: 3 GPU(s) on fakehost, 1048576 bytes (1M) per copy"), std::string::npos);
  EXPECT_NE(out.find("PCIe Gen5 x16"), std::string::npos);
  EXPECT_NE(out.find("NVLink 18x25 GB/s"), std::string::npos);
  EXPECT_NE(out.find("skipped: cudaDeviceCanAccessPeer says GPU 0 cannot reach GPU 2"), std::string::npos)
      << out;
  // Nothing was timed for a pair without peer access.
  for (const auto& r : m.timed) EXPECT_FALSE(r.peer == 2 || (r.peer >= 0 && r.device == 2));
  const auto j = report::readJson(f.jsonPath);
  const auto run = report::gpuCopyRunFromJson(j, f.jsonPath);
  EXPECT_EQ(run.rows.size(), 3 * 8 + 6 * 4u);
  EXPECT_EQ(run.devices[1].nvlinks, 18);
  EXPECT_NEAR(run.rows[0].medianGBps, 55, 1e-9);
  EXPECT_NEAR(run.rows[0].fraction, 55 / 63.01538, 1e-5);
  std::remove(f.jsonPath.c_str());
}

TEST(GpuBenchRun, ADeviceThatDoesNotExistIsRefusedBeforeAnythingIsTimed) {
  FakeMeasurer m;
  m.count = 1;
  Captured c;
  GpuRunEnv env;
  env.measurer = &m;
  env.out = c.out;
  env.err = c.err;
  GpuFlags f;
  f.devices = "1";
  EXPECT_THROW(runGpuWith(resolveGpuOptions(f), env), ConfigError);
  EXPECT_TRUE(m.timed.empty());
}

TEST(GpuBenchRun, WithoutCudaItSaysSoInOneSentenceAndExitsTwo) {
  Captured c;
  GpuRunEnv env;  // no measurer: a build without CUDA
  env.out = c.out;
  env.err = c.err;
  EXPECT_EQ(runGpuWith(resolveGpuOptions(GpuFlags{}), env), kExitCuda);
  EXPECT_EQ(readAll(c.err),
            "dsbench gpu: this dsbench was built without CUDA, so it cannot measure GPU copies; use a build "
            "configured with the CUDA toolkit (DS_WITH_CUDA=ON).\n");
  EXPECT_EQ(readAll(c.out), "");
}

TEST(GpuBenchRun, WithoutADriverOrDeviceItNamesCudasErrorAndExitsTwo) {
  FakeMeasurer m;
  m.countError = "cudaGetDeviceCount failed with cudaErrorNoDevice (no CUDA-capable device is detected).";
  Captured c;
  GpuRunEnv env;
  env.measurer = &m;
  env.out = c.out;
  env.err = c.err;
  EXPECT_EQ(runGpuWith(resolveGpuOptions(GpuFlags{}), env), kExitCuda);
  EXPECT_NE(readAll(c.err).find("no GPU can be measured on this host: cudaGetDeviceCount failed with "
                                "cudaErrorNoDevice"),
            std::string::npos);
  m.countError.clear();
  m.count = 0;
  EXPECT_EQ(runGpuWith(resolveGpuOptions(GpuFlags{}), env), kExitCuda);
  EXPECT_NE(readAll(c.err).find("found 0 devices"), std::string::npos);
}

TEST(GpuBenchRun, ACudaErrorWhileMeasuringNamesTheRowAndExitsTwo) {
  FakeMeasurer m;
  m.timeError =
      "CUDA error in cudaMemcpyAsync: cudaErrorIllegalAddress (an illegal memory access was encountered)";
  Captured c;
  GpuRunEnv env;
  env.measurer = &m;
  env.out = c.out;
  env.err = c.err;
  GpuFlags f;
  f.devices = "0";
  EXPECT_EQ(runGpuWith(resolveGpuOptions(f), env), kExitCuda);
  EXPECT_NE(readAll(c.err).find("cudaErrorIllegalAddress (an illegal memory access was encountered) (row "
                                "host_to_device_memcpy_ce on GPU 0)"),
            std::string::npos)
      << readAll(c.err);
}

TEST(GpuBenchFacts, NvmlAndSysfsFactsJoinByPciAddressAndMissingOnesStayUnknown) {
  std::vector<report::GpuCopyDevice> devs(2);
  devs[0].index = 0;
  devs[0].busId = "0000:19:00.0";
  devs[1].index = 1;
  devs[1].busId = "0000:99:00.0";  // not in NVML's list
  hw::HostHardware h;
  h.pcie.push_back({"gpu0", "0000:19:00.0", 4, 16, 31.5});
  std::vector<std::string> notes;
  addHostFacts(devs, fakeNvml(), h, notes);
  EXPECT_EQ(devs[0].arch, 9u);
  EXPECT_EQ(devs[0].nvlinks, 18);
  EXPECT_EQ(devs[0].pcieGen, 4);
  EXPECT_EQ(devs[1].nvlinks, -1);
  EXPECT_EQ(devs[1].pcieGen, 0);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("NVML does not list GPU 1 (0000:99:00.0)"), std::string::npos);
  hw::GpuView none;
  none.error = "NVML not loaded: libnvidia-ml.so.1: cannot open shared object file";
  notes.clear();
  addHostFacts(devs, none, h, notes);
  EXPECT_EQ(devs[0].nvlinks, -1);
  EXPECT_NE(notes[0].find("NVML gave no facts (NVML not loaded"), std::string::npos);
}

}  // namespace
}  // namespace ds::bench::gpu
