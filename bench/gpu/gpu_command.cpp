#include "bench/gpu/gpu_command.h"

#include <memory>

#include "bench/coll/coll_options.h"
#include "bench/common_flags.h"
#include "bench/gpu/gpu.h"
#include "engine/common/cli.h"

namespace ds::bench {

Command addGpuCommand(CLI::App& parent) {
  auto f = std::make_shared<gpu::GpuFlags>();
  auto* g = parent.add_subcommand(
      "gpu",
      "copy bandwidth of this host's GPUs, as NVIDIA's nvbandwidth names and counts it: host<->device "
      "(pinned "
      "and pageable), within a GPU, and between every pair of GPUs (read and write), by copy engine and by "
      "kernel; each row with its bound (PCIe, memory, NVLink) and the fraction reached. One process; no "
      "launcher");
  g->add_option("--size", f->size,
                "bytes per copy; K, M, G suffixes are binary (default 512M, nvbandwidth's)")
      ->check(cli::checkedBy([](const std::string& t) { coll::parseSize(t, "--size"); }))
      ->envname("DSBENCH_SIZE");
  g->add_option("-n,--iters", f->iters, "timed copies per row; the median is reported")
      ->transform(cli::integer(1, 100000))
      ->capture_default_str()
      ->envname("DSBENCH_ITERS");
  g->add_option("--warmup", f->warmup, "untimed copies per row first")
      ->transform(cli::integer(0, 100000))
      ->capture_default_str()
      ->envname("DSBENCH_WARMUP");
  g->add_option("--device", f->devices,
                "CUDA device numbers to measure, comma-separated (default: every GPU)")
      // The form here (numbers, no repeats); whether each is a GPU of this host once CUDA is asked.
      ->check(cli::checkedBy([](const std::string& t) { gpu::resolveDevices(t, 10000); }))
      ->envname("DSBENCH_DEVICE");
  flags::json(g, f->jsonPath, "write the rows as JSON (schema dsperf.gpu) to this file");
  flags::label(g, f->label, f->labelGiven);
  return Command{g, [f] { return gpu::runGpu(gpu::resolveGpuOptions(*f)); }};
}

}  // namespace ds::bench
