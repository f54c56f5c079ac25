// dsbench gpu's pure part (reports/gpu/gpu_copy.h): each row's bound and fraction from fake GPUs, the
// table, the JSON round trip and its errors, and the HTML page (reports/html/gpu_html.h).
#include "reports/gpu/gpu_copy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "engine/common/error.h"
#include "reports/html/gpu_html.h"
#include "reports/json_io.h"

namespace ds::report {
namespace {

// An H100 SXM as CUDA, NVML and sysfs describe it: PCIe Gen5 x16, HBM3 at 2619 MHz on 5120 bits,
// 18 NVLinks, all to NVSwitches.
GpuCopyDevice h100(int index, const std::string& busId) {
  GpuCopyDevice d;
  d.index = index;
  d.name = "NVIDIA H100 80GB HBM3";
  d.busId = busId;
  d.arch = 9;
  d.pcieGen = 5;
  d.pcieWidth = 16;
  d.memClockMHz = 2619;
  d.memBusWidthBits = 5120;
  d.nvlinks = 18;
  d.nvlinkRemotes.assign(18, "switch");
  return d;
}

GpuCopyRow row(const char* testcase, CopyPath path, CopyMethod method, int device, int peer, double gbps,
               bool pageable = false) {
  GpuCopyRow r;
  r.testcase = testcase;
  r.path = path;
  r.method = method;
  r.pageable = pageable;
  r.device = device;
  r.peer = peer;
  r.bytes = 512ULL << 20;
  r.iters = 20;
  r.medianGBps = gbps;
  r.minGBps = gbps * 0.98;
  r.maxGBps = gbps * 1.01;
  r.medianUs = gbps > 0 ? static_cast<double>(r.bytes) / (gbps * 1e3) : 0;
  return r;
}

GpuCopyRun twoH100s() {
  GpuCopyRun run;
  run.host = "node1";
  run.startTime = "2026-12-07T15:00:00Z";
  run.version = "dsperf 0.9.0";
  run.cudaRuntime = "13.0";
  run.cudaDriver = "13.0";
  run.bytes = 512ULL << 20;
  run.iters = 20;
  run.warmup = 3;
  run.devices = {h100(0, "0000:19:00.0"), h100(1, "0000:3b:00.0")};
  run.rows = {row("host_to_device_memcpy_ce", CopyPath::kHostToDevice, CopyMethod::kCopyEngine, 0, -1, 55.1),
              row("host_to_device_memcpy_ce_pageable", CopyPath::kHostToDevice, CopyMethod::kCopyEngine, 0,
                  -1, 21.4, true),
              row("device_to_host_memcpy_ce", CopyPath::kDeviceToHost, CopyMethod::kCopyEngine, 0, -1, 55.3),
              row("device_local_copy", CopyPath::kDeviceLocal, CopyMethod::kCopyEngine, 0, -1, 1410),
              row("device_local_copy_sm", CopyPath::kDeviceLocal, CopyMethod::kKernel, 0, -1, 1480),
              row("device_to_device_memcpy_read_ce", CopyPath::kPeerRead, CopyMethod::kCopyEngine, 0, 1, 390),
              row("device_to_device_memcpy_write_sm", CopyPath::kPeerWrite, CopyMethod::kKernel, 1, 0, 370)};
  boundCopyRows(run.rows, run.devices);
  return run;
}

TEST(GpuCopyBounds, HostRowsAreBoundByThePcieLinkAfterEncoding) {
  GpuCopyRun run = twoH100s();
  // Gen5: 32 GT/s x 128/130 / 8 x 16 lanes = 63.015 GB/s per direction.
  for (int i : {0, 1, 2}) {
    EXPECT_NEAR(run.rows[i].boundGBps, 63.015, 0.01) << run.rows[i].testcase;
    EXPECT_EQ(run.rows[i].boundName, "PCIe Gen5 x16");
  }
  EXPECT_NEAR(run.rows[0].fraction, 55.1 / (32 * 128.0 / 130 / 8 * 16), 1e-9);
}

TEST(GpuCopyBounds, LocalCopyIsHalfTheMemoryPeakSinceEachByteIsReadAndWritten) {
  GpuCopyRun run = twoH100s();
  // deviceQuery's formula: 2 x 2619 MHz x 5120 / 8 bytes = 3352.3 GB/s.
  EXPECT_NEAR(memoryGBps(run.devices[0]), 3352.32, 0.01);
  EXPECT_NEAR(run.rows[3].boundGBps, 1676.16, 0.01);
  EXPECT_EQ(run.rows[3].boundName, "memory 3352 GB/s / 2 (read + write)");
  EXPECT_NEAR(run.rows[4].fraction, 1480 / 1676.16, 1e-6);
}

TEST(GpuCopyBounds, PeersThroughNvSwitchGetTheFewerLinksTimesTheRate) {
  GpuCopyRun run = twoH100s();
  EXPECT_DOUBLE_EQ(run.rows[5].boundGBps, 18 * 25.0);
  EXPECT_EQ(run.rows[5].boundName, "NVLink 18x25 GB/s");
  std::vector<GpuCopyDevice> devs = run.devices;
  devs[1].nvlinkRemotes.assign(12, "switch");
  devs[1].nvlinks = 12;
  boundCopyRows(run.rows, devs);
  EXPECT_DOUBLE_EQ(run.rows[5].boundGBps, 12 * 25.0);
}

TEST(GpuCopyBounds, DirectNvlinksCountOnlyThoseToThePeer) {
  std::vector<GpuCopyDevice> devs = {h100(0, "0000:19:00.0"), h100(1, "0000:3b:00.0"),
                                     h100(2, "0000:5d:00.0")};
  devs[0].nvlinkRemotes = {"0000:3b:00.0", "0000:3b:00.0", "0000:5d:00.0", "0000:5d:00.0"};
  devs[0].nvlinks = 4;
  std::vector<GpuCopyRow> rows = {
      row("device_to_device_memcpy_write_ce", CopyPath::kPeerWrite, CopyMethod::kCopyEngine, 0, 1, 45)};
  boundCopyRows(rows, devs);
  EXPECT_DOUBLE_EQ(rows[0].boundGBps, 50);
  EXPECT_EQ(rows[0].boundName, "NVLink 2x25 GB/s");
}

TEST(GpuCopyBounds, PeersWithoutNvlinkAreBoundByTheSlowerPcieLink) {
  std::vector<GpuCopyDevice> devs = {h100(0, "a"), h100(1, "b")};
  for (auto& d : devs) {
    d.nvlinks = 0;
    d.nvlinkRemotes.clear();
  }
  devs[1].pcieGen = 4;
  std::vector<GpuCopyRow> rows = {
      row("device_to_device_memcpy_read_ce", CopyPath::kPeerRead, CopyMethod::kCopyEngine, 0, 1, 20)};
  boundCopyRows(rows, devs);
  EXPECT_NEAR(rows[0].boundGBps, 31.5, 0.01);
  EXPECT_EQ(rows[0].boundName, "PCIe Gen4 x16 (no NVLink between them)");
}

TEST(GpuCopyBounds, UnknownFactsGiveNoBoundAndSayWhyNeverAGuess) {
  GpuCopyDevice bare;
  bare.index = 0;
  bare.nvlinks = 6;  // NVML counted links but did not say where they go
  std::vector<GpuCopyDevice> devs = {bare, h100(1, "b")};
  std::vector<GpuCopyRow> rows = {
      row("host_to_device_memcpy_ce", CopyPath::kHostToDevice, CopyMethod::kCopyEngine, 0, -1, 20),
      row("device_local_copy", CopyPath::kDeviceLocal, CopyMethod::kCopyEngine, 0, -1, 900),
      row("device_to_device_memcpy_read_ce", CopyPath::kPeerRead, CopyMethod::kCopyEngine, 0, 1, 100),
      row("device_local_copy", CopyPath::kDeviceLocal, CopyMethod::kCopyEngine, 7, -1, 900)};
  boundCopyRows(rows, devs);
  for (const auto& r : rows) {
    EXPECT_EQ(r.boundGBps, 0) << r.testcase;
    EXPECT_EQ(r.fraction, 0) << r.testcase;
  }
  EXPECT_NE(rows[0].boundWhy.find("PCIe link of GPU 0 is unknown"), std::string::npos) << rows[0].boundWhy;
  EXPECT_NE(rows[1].boundWhy.find("memory clock or bus width of GPU 0"), std::string::npos)
      << rows[1].boundWhy;
  EXPECT_NE(rows[2].boundWhy.find("NVML did not say where the 6 NVLinks of GPU 0 go"), std::string::npos)
      << rows[2].boundWhy;
  EXPECT_NE(rows[3].boundWhy.find("GPU 7 is not among the devices"), std::string::npos) << rows[3].boundWhy;
  GpuCopyRun run;
  run.devices = devs;
  run.rows = rows;
  const std::string table = formatGpuCopyTable(run);
  EXPECT_NE(table.find("# bound -: the PCIe link of GPU 0 is unknown"), std::string::npos) << table;
}

TEST(GpuCopyBounds, WithoutNvmlPeerRowsAreUnknownNotPcie) {
  std::vector<GpuCopyDevice> devs = {h100(0, "a"), h100(1, "b")};
  devs[1].nvlinks = -1;
  devs[1].nvlinkRemotes.clear();
  std::vector<GpuCopyRow> rows = {
      row("device_to_device_memcpy_read_ce", CopyPath::kPeerRead, CopyMethod::kCopyEngine, 0, 1, 100)};
  boundCopyRows(rows, devs);
  EXPECT_EQ(rows[0].boundGBps, 0);
  EXPECT_NE(rows[0].boundWhy.find("NVML did not answer for GPU 1"), std::string::npos) << rows[0].boundWhy;
}

TEST(GpuCopyBounds, AnArchitectureWithoutAKnownLinkRateIsUnknown) {
  std::vector<GpuCopyDevice> devs = {h100(0, "a"), h100(1, "b")};
  devs[0].arch = 42;
  std::vector<GpuCopyRow> rows = {
      row("device_to_device_memcpy_read_sm", CopyPath::kPeerRead, CopyMethod::kKernel, 0, 1, 100)};
  boundCopyRows(rows, devs);
  EXPECT_EQ(rows[0].boundGBps, 0);
  EXPECT_NE(rows[0].boundWhy.find("architecture 42"), std::string::npos) << rows[0].boundWhy;
}

TEST(GpuCopyTable, PrintsEveryRowWithItsBoundAndFraction) {
  GpuCopyRun run = twoH100s();
  run.rows.push_back(
      row("device_to_device_memcpy_write_ce", CopyPath::kPeerWrite, CopyMethod::kCopyEngine, 0, 1, 0));
  run.rows.back().skipped = true;
  run.rows.back().note = "no peer access from GPU 0 to GPU 1 (cudaDeviceCanAccessPeer says 0)";
  boundCopyRows(run.rows, run.devices);
  run.notes.push_back("an example note");
  const std::string t = formatGpuCopyTable(run);
  std::printf("%s", t.c_str());  // the sample in docs/dsbench.md comes from here
  EXPECT_NE(
      t.find("# gpu 0: NVIDIA H100 80GB HBM3 (0000:19:00.0), PCIe Gen5 x16, memory 3352 GB/s, NVLinks 18"),
      std::string::npos);
  EXPECT_NE(t.find("host_to_device_memcpy_ce"), std::string::npos);
  EXPECT_NE(t.find("pageable"), std::string::npos);
  EXPECT_NE(t.find("63.02    87  PCIe Gen5 x16"), std::string::npos) << t;
  EXPECT_NE(t.find("450.00    87  NVLink 18x25 GB/s"), std::string::npos) << t;
  EXPECT_NE(t.find("skipped: no peer access from GPU 0 to GPU 1"), std::string::npos);
  EXPECT_NE(t.find("# note: an example note"), std::string::npos);
}

TEST(GpuCopyJson, RoundTripsAndNamesItsSchema) {
  GpuCopyRun run = twoH100s();
  run.rows[1].boundGBps = 0;  // an unknown bound survives as unknown
  run.rows[1].boundName.clear();
  run.rows[1].boundWhy = "why not";
  run.rows[1].fraction = 0;
  const nlohmann::json j = gpuCopyRunToJson(run);
  EXPECT_EQ(j["schema"], "dsperf.gpu");
  EXPECT_EQ(j["rows"][0]["bound"]["name"], "PCIe Gen5 x16");
  EXPECT_TRUE(j["rows"][1]["bound"]["fraction"].is_null());
  EXPECT_EQ(j["rows"][1]["bound"]["why"], "why not");
  EXPECT_EQ(j["rows"][1]["host_memory"], "pageable");
  EXPECT_TRUE(j["rows"][3]["host_memory"].is_null());
  EXPECT_EQ(j["rows"][5]["peer"], 1);
  const GpuCopyRun back = gpuCopyRunFromJson(nlohmann::json::parse(j.dump()), "x.json");
  EXPECT_EQ(back.devices, run.devices);
  ASSERT_EQ(back.rows.size(), run.rows.size());
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    EXPECT_EQ(back.rows[i].testcase, run.rows[i].testcase);
    EXPECT_EQ(back.rows[i].path, run.rows[i].path);
    EXPECT_EQ(back.rows[i].method, run.rows[i].method);
    EXPECT_EQ(back.rows[i].pageable, run.rows[i].pageable);
    EXPECT_EQ(back.rows[i].peer, run.rows[i].peer);
    EXPECT_DOUBLE_EQ(back.rows[i].medianGBps, run.rows[i].medianGBps);
    EXPECT_DOUBLE_EQ(back.rows[i].boundGBps, run.rows[i].boundGBps);
    EXPECT_DOUBLE_EQ(back.rows[i].fraction, run.rows[i].fraction);
    EXPECT_EQ(back.rows[i].boundWhy, run.rows[i].boundWhy);
  }
  EXPECT_EQ(formatGpuCopyTable(back), formatGpuCopyTable(run));
}

TEST(GpuCopyJson, RefusesOtherSchemasNewerMajorsAndBadFields) {
  nlohmann::json j = gpuCopyRunToJson(twoH100s());
  nlohmann::json other = j;
  other["schema"] = "dsperf.sweep";
  EXPECT_THROW(gpuCopyRunFromJson(other, "x.json"), ConfigError);
  nlohmann::json newer = j;
  newer["schema_version"] = "2.0";
  try {
    gpuCopyRunFromJson(newer, "x.json");
    FAIL() << "a newer major was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("newer dsperf"), std::string::npos) << e.what();
  }
  nlohmann::json bad = j;
  bad["rows"][0]["path"] = "sideways";
  try {
    gpuCopyRunFromJson(bad, "x.json");
    FAIL() << "a bad path was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/rows/0/path"), std::string::npos) << e.what();
  }
}

TEST(GpuCopyJson, TheFileReaderTellsAGpuResultFromOtherKinds) {
  const std::string dir = ::testing::TempDir();
  const std::string gpu = dir + "/gpu_copy_test.json", other = dir + "/gpu_copy_test_other.json";
  writeJsonAtomic(gpu, gpuCopyRunToJson(twoH100s()));
  writeJsonAtomic(other, nlohmann::json{{"schema", "dsperf.world"}, {"schema_version", "1.0"}});
  auto read = readGpuCopyRunFile(gpu);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->rows.size(), 7u);
  EXPECT_FALSE(readGpuCopyRunFile(other).has_value());
  std::remove(gpu.c_str());
  std::remove(other.c_str());
}

TEST(GpuCopyHtml, RendersEveryRowEscapedWithItsBoundAndAChart) {
  GpuCopyRun run = twoH100s();
  run.host = "<script>alert(1)</script>";
  run.rows[2].boundGBps = 0;
  run.rows[2].fraction = 0;
  run.rows[2].boundWhy = "the PCIe link of GPU 0 is unknown";
  const std::string page = html::renderGpuCopyReport(run, "dir/gpu.json");
  EXPECT_EQ(page.find("<script>alert(1)"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)"), std::string::npos);
  EXPECT_NE(page.find("dsbench gpu: gpu.json"), std::string::npos);
  EXPECT_NE(page.find("device_to_device_memcpy_read_ce"), std::string::npos);
  EXPECT_NE(page.find("NVLink 18x25 GB/s"), std::string::npos);
  EXPECT_NE(page.find("unknown: the PCIe link of GPU 0 is unknown"), std::string::npos);
  EXPECT_NE(page.find("87%"), std::string::npos);
  EXPECT_NE(page.find("fraction of each row"), std::string::npos);
  EXPECT_EQ(page.find("src=\"http"), std::string::npos);  // self-contained: nothing fetched
}

}  // namespace
}  // namespace ds::report
