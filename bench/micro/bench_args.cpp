#include "bench/micro/bench_args.h"

#include <fmt/format.h>

#include <algorithm>

#include "bench/coll/coll_options.h"
#include "bench/exit_codes.h"
#include "engine/common/cli.h"
#include "engine/common/error.h"

namespace ds::bench::micro {

void addSweepFlags(CLI::App& app, SweepFlags& flags) {
  auto size = [&app](const char* names, std::size_t& target, const char* flag, const char* help) {
    app.add_option_function<std::string>(
           names, [&target, flag](const std::string& v) { target = coll::parseSize(v, flag); }, help)
        ->check(cli::checkedBy([flag](const std::string& v) { coll::parseSize(v, flag); }));
  };
  size("-b,--minbytes", flags.minBytes, "-b/--minbytes",
       "smallest size in bytes; K, M, G suffixes are binary (default 8)");
  size("-e,--maxbytes", flags.maxBytes, "-e/--maxbytes", "largest size in bytes (default 256M)");
  app.add_option("-f,--stepfactor", flags.stepFactor, "multiplicative step between sizes (default 2)")
      ->transform(cli::integer(2, 1024));
  app.add_option("-n,--iters", flags.iters, "timed iterations per size, at least")
      ->transform(cli::integer(1, 1000000000));
  app.add_option("-w,--warmup_iters", flags.warmupIters, "warm-up iterations per size")
      ->transform(cli::integer(0, 1000000000));
  app.add_option("--min-time", flags.minTimeS,
                 "seconds: per size, more iterations until the timed loop lasts this long")
      ->transform(cli::number(0, 3600));
  app.add_option("-J,--json", flags.jsonPath, "write the results as a dsperf.sweep JSON file")
      ->check(cli::outputFile());
}

std::optional<int> parseFlags(CLI::App& app, const SweepFlags& flags, int argc, char** argv) {
  try {
    cli::parse(app, argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitConfig;
  }
  if (flags.minBytes > flags.maxBytes) {
    throw ConfigError(fmt::format("-b {} is larger than -e {}; the smallest size must come first.",
                                  flags.minBytes, flags.maxBytes));
  }
  return std::nullopt;
}

std::vector<std::size_t> sweepSizes(const SweepFlags& flags, std::size_t elem) {
  coll::CollOptions o;
  o.minBytes = std::max<std::size_t>(flags.minBytes, 1);
  o.maxBytes = flags.maxBytes;
  o.stepFactor = flags.stepFactor;
  std::vector<std::size_t> out;
  for (std::size_t s : coll::sweepSizes(o)) {
    std::size_t r = std::max(elem, s / elem * elem);
    if (out.empty() || out.back() != r) out.push_back(r);
  }
  return out;
}

report::SweepMeasurement allreduceRow(const std::string& backend, int worldSize, std::size_t bytes) {
  report::SweepMeasurement m;
  m.backend = backend;
  m.collective = "allreduce";
  m.dtype = "f32";
  m.op = "sum";
  m.root = -1;
  m.worldSize = worldSize;
  m.requestedBytes = bytes;
  m.bytes = bytes;
  m.count = bytes / sizeof(float);
  m.busFactor = 2.0 * (worldSize - 1) / worldSize;
  return m;
}

}  // namespace ds::bench::micro
