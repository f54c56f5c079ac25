// `dsbench gpu`: the copy-bandwidth rows of one host's GPUs (schema dsperf.gpu), after NVIDIA's
// nvbandwidth: host->device and device->host (pinned and pageable host memory), a copy within one
// GPU, and between every pair of GPUs that can reach each other (read and write), each by the copy
// engine (cudaMemcpyAsync, "_ce") and by a kernel ("_sm"). A row's bandwidth is nvbandwidth's: the
// bytes copied once / the time of one copy, in GB/s (1e9 bytes), the median over the timed
// repetitions, with the fastest and slowest beside it.
//
// Each row's bound, the most its path can move in one direction:
// - host<->device: the GPU's PCIe link, generation x width after encoding (hw::pcieGBps: 8b/10b for
//   Gen 1-2, 128b/130b from Gen 3). Pageable rows have the same bound; the driver's staging copy
//   through a pinned buffer is what keeps them below it.
// - within one GPU (device_local_copy): the memory's peak, 2 x memory clock x bus width / 8 (the
//   formula of NVIDIA's deviceQuery and bandwidthTest: double data rate), halved, since every byte
//   counted once is read once and written once (nvbandwidth counts the bytes copied once).
// - between two GPUs: the NVLinks that join them x the architecture's rate per link
//   (hw::nvlinkGBpsPerLink); links to an NVSwitch join every pair, so the GPU with fewer of them sets
//   the count. Without NVLink between them, the slower of their two PCIe links.
// A bound that cannot be known (no PCIe facts, NVML gone, a new architecture) is 0 with a sentence
// saying why, and the table prints "-": never a guess.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ds::report {

inline constexpr const char* kGpuSchemaName = "dsperf.gpu";

// One GPU as the rows' bounds see it. Filled by dsbench from CUDA (index, name, bus id, memory
// clock and width) and from NVML and sysfs (PCIe link, NVLinks); any field may be unknown.
struct GpuCopyDevice {
  int index = 0;            // CUDA device ordinal (as CUDA_VISIBLE_DEVICES left them)
  std::string name;         // "NVIDIA H100 80GB HBM3"
  std::string busId;        // "0000:19:00.0" ("" unknown)
  unsigned arch = 0;        // NVML's architecture (hw::GpuFacts::arch); 0 unknown
  int pcieGen = 0;          // the link's capability (sysfs, else NVML); 0 unknown
  int pcieWidth = 0;        // lanes; 0 unknown
  int memClockMHz = 0;      // peak memory clock (cudaDevAttrMemoryClockRate / 1000); 0 unknown
  int memBusWidthBits = 0;  // cudaDevAttrGlobalMemoryBusWidth; 0 unknown
  // Where each active NVLink goes: the PCI address of the GPU at its far end, or "switch" for an
  // NVSwitch. Empty with nvlinks > 0: NVML did not say (the pair bounds are then unknown).
  int nvlinks = 0;  // active NVLinks; -1 unknown (no NVML): the pair bounds are then unknown too
  std::vector<std::string> nvlinkRemotes;
  bool operator==(const GpuCopyDevice&) const = default;
};

// Which copy a row measured. Host rows have src or dst -1 (the host).
enum class CopyPath { kHostToDevice, kDeviceToHost, kDeviceLocal, kPeerRead, kPeerWrite };
enum class CopyMethod { kCopyEngine, kKernel };

struct GpuCopyRow {
  std::string testcase;  // nvbandwidth's name ("host_to_device_memcpy_ce"); ours carry a suffix
  CopyPath path = CopyPath::kHostToDevice;
  CopyMethod method = CopyMethod::kCopyEngine;
  bool pageable = false;  // host memory from malloc (else pinned, cudaMallocHost)
  int device = 0;         // the GPU whose stream runs the copy (nvbandwidth's row)
  int peer = -1;          // the other GPU of a peer row; -1 otherwise
  std::size_t bytes = 0;
  int iters = 0;  // timed repetitions
  // GB/s of the timed repetitions (0 and `skipped` when not measured).
  double medianGBps = 0, minGBps = 0, maxGBps = 0;
  double medianUs = 0;  // time of one copy at the median
  bool skipped = false;
  std::string note;  // why skipped ("no peer access from 0 to 1"), or a remark
  // Filled by boundCopyRows():
  double boundGBps = 0;   // 0 unknown
  std::string boundName;  // "PCIe Gen5 x16 (63.0 GB/s)"; "" unknown
  std::string boundWhy;   // unknown: why
  double fraction = 0;    // medianGBps / boundGBps; 0 unknown or skipped
};

struct GpuCopyRun {
  std::string host;
  std::string startTime;                // ISO 8601 UTC
  std::string version;                  // dsperf's version line
  std::string cudaRuntime, cudaDriver;  // "13.0"; "" unknown
  std::size_t bytes = 0;
  int iters = 0, warmup = 0;
  std::vector<GpuCopyDevice> devices;  // those measured, in --device order
  std::vector<GpuCopyRow> rows;
  std::vector<std::string> notes;  // run-wide remarks (peer access refused, NVML missing, ...)
  std::string label;
};

// "host_to_device", "device_to_host", "device_local", "peer_read", "peer_write".
const char* copyPathName(CopyPath p);
// "ce", "sm".
const char* copyMethodName(CopyMethod m);

// The memory's peak in GB/s, 2 x clock x width / 8; 0 when either is unknown.
double memoryGBps(const GpuCopyDevice& d);

// Fills each row's bound, its name or why unknown, and its fraction, from `devices` (found by
// index). Pure.
void boundCopyRows(std::vector<GpuCopyRow>& rows, const std::vector<GpuCopyDevice>& devices);

// The run as text: one row per copy (testcase, GPUs, memory, size, median/min/max GB/s, bound,
// fraction), "-" for unknown, then the notes and each unknown bound's reason once.
std::string formatGpuCopyTable(const GpuCopyRun& run);

// The JSON document ({"schema": "dsperf.gpu", "schema_version", ...}); docs/schemas.md.
nlohmann::json gpuCopyRunToJson(const GpuCopyRun& run);
// Reads one back; throws ConfigError naming `origin` (a wrong schema, a newer major, a bad field).
GpuCopyRun gpuCopyRunFromJson(const nlohmann::json& doc, const std::string& origin);
// The file at `path` when it is a dsperf.gpu document, else nullopt (other kinds go to the run loader).
std::optional<GpuCopyRun> readGpuCopyRunFile(const std::string& path);

}  // namespace ds::report
