// `dsbench gpu`: copy bandwidth of this host's GPUs, after NVIDIA's nvbandwidth (its testcase names,
// GB/s of bytes copied once, the median of repetitions, 512 MiB by default), each row with its bound
// and the fraction reached (reports/gpu/gpu_copy.h). One process, no launcher: it measures the GPUs
// it sees.
//
// The measurement: per row, buffers of --size bytes, a non-blocking stream on the GPU that runs the
// copy, --warmup copies, then --iters copies each timed with a pair of CUDA events on that stream
// (pageable rows: the host's clock around the copy and a stream synchronise, since the driver's
// staging copy through pinned memory runs on the CPU, outside the stream). The copy engine rows use
// cudaMemcpyAsync; the kernel ("_sm") rows a grid-stride copy with 16-byte loads (gpu_copy_kernel.cu).
// Peer rows need cudaDeviceCanAccessPeer both ways and enable peer access; where CUDA refuses, the
// row is kept as skipped with the reason.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/host/gpu_query.h"
#include "engine/host/hardware.h"
#include "engine/host/hardware_reader.h"
#include "reports/gpu/gpu_copy.h"

namespace ds::bench::gpu {

// The flags as typed (bench/gpu/gpu_command.cpp binds them).
struct GpuFlags {
  std::string size = "512M";  // --size: bytes per copy, K/M/G binary suffixes (dsbench coll's -b form)
  int iters = 20;             // --iters: timed copies per row
  int warmup = 3;             // --warmup: untimed copies first
  std::string devices;        // --device: "0,2" (CUDA ordinals); "" = every GPU
  std::string jsonPath;       // -J
  std::string label;          // --label
  bool labelGiven = false;
};

struct GpuOptions {
  std::size_t bytes = 512ULL << 20;
  int iters = 20, warmup = 3;
  std::string devices;  // as typed; checked against the GPUs when they are known (resolveDevices)
  std::string jsonPath;
  std::string label;
};

// Checks the flags (the size through bench/coll's parser: at least 16 bytes and at most 64 GiB).
// Throws ConfigError with a sentence naming the flag.
GpuOptions resolveGpuOptions(const GpuFlags& f);

// "--device" as typed against the GPUs CUDA sees: "" -> 0..count-1; "1,0" -> {1, 0}. Throws
// ConfigError for a number that is not a GPU here, a repeat or text that is not a list of numbers.
std::vector<int> resolveDevices(const std::string& text, int count);

// The rows to measure, in order, for `devices` (unmeasured: no times, no bounds): per GPU
// host_to_device_memcpy_ce, _ce_pageable, _sm, device_to_host the same, device_local_copy and
// device_local_copy_sm; then for every ordered pair (a, b) of two different GPUs
// device_to_device_memcpy_{read,write}_{ce,sm}, run from a's stream (read: b's memory into a's;
// write: a's into b's, as nvbandwidth).
std::vector<report::GpuCopyRow> planCopyRows(const std::vector<int>& devices, std::size_t bytes, int iters);

// Fills medianGBps/minGBps/maxGBps/medianUs of `row` from the times of its copies (microseconds).
void summariseTimes(report::GpuCopyRow& row, std::vector<double> timesUs);

// Adds NVML's and sysfs' facts (architecture, NVLinks and where they go, the PCIe link) to the GPUs
// CUDA described, matched by PCI address; a GPU NVML does not list keeps nvlinks -1 (unknown). Notes
// what could not be matched. Pure.
void addHostFacts(std::vector<report::GpuCopyDevice>& devices, const hw::GpuView& nvml,
                  const hw::HostHardware& hardware, std::vector<std::string>& notes);

// What does the copies: CUDA on a real host, a fake in tests.
class CopyMeasurer {
 public:
  virtual ~CopyMeasurer() = default;
  // The GPUs this process sees. Throws BackendError naming cudaGetDeviceCount's error when CUDA cannot
  // answer (no driver, no device).
  virtual int deviceCount() = 0;
  // CUDA's facts of one GPU: name, PCI address, memory clock and bus width.
  virtual report::GpuCopyDevice describe(int device) = 0;
  // Enables peer access from `device` to `peer` (and back). False with `why` when CUDA cannot.
  virtual bool enablePeer(int device, int peer, std::string& why) = 0;
  // Runs `warmup` untimed and `iters` timed copies of the row's kind; returns each timed copy in
  // microseconds. Throws ConfigError when the GPU or host lacks the memory, BackendError on CUDA errors.
  virtual std::vector<double> time(const report::GpuCopyRow& row, int warmup, int iters) = 0;
  virtual std::string runtimeVersion() = 0;  // "13.0"
  virtual std::string driverVersion() = 0;
};

// The CUDA measurer; nullptr in a build without CUDA.
std::unique_ptr<CopyMeasurer> makeCudaCopyMeasurer();

// Everything runGpu needs from the outside, so that tests hand it fakes.
struct GpuRunEnv {
  CopyMeasurer* measurer = nullptr;  // nullptr: this dsbench was built without CUDA
  hw::GpuQuery* nvml = nullptr;      // nullptr: no NVML facts (bounds that need them are unknown)
  hw::HardwareRoots roots;           // sysfs/procfs for the PCIe links
  std::string host;                  // the record's host name
  std::FILE* out = stdout;
  std::FILE* err = stderr;
};

// Measures every planned row, bounds it, prints the table to env.out and writes the JSON (-J).
// Returns the exit code: 0; kExitCuda (2) when the GPUs cannot be measured here (a build without
// CUDA, cudaGetDeviceCount failing or finding none), with one sentence on env.err. ConfigError for a
// bad --device.
int runGpuWith(const GpuOptions& o, GpuRunEnv& env);

// runGpuWith on this host: CUDA, NVML through dlopen, /sys (DSBENCH_SYSFS), stdout.
int runGpu(const GpuOptions& o);

}  // namespace ds::bench::gpu
