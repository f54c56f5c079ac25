#include "bench/micro/bench_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bench/coll/coll_options.h"
#include "engine/common/error.h"

namespace ds::bench::micro {

namespace {

int parseInt(const std::string& flag, const char* value, int lo) {
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v < lo || v > 1000000000) {
    throw ConfigError(
        fmt::format("{} '{}' is not valid; give a whole number of at least {}.", flag, value, lo));
  }
  return static_cast<int>(v);
}

}  // namespace

bool parseSweepFlags(int argc, char** argv, SweepFlags& flags, const std::string& usage,
                     const ExtraFlag& extra) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(usage.c_str(), stdout);
      return false;
    }
    auto need = [&]() -> const char* {
      if (value == nullptr) throw ConfigError(fmt::format("{} needs a value; see --help.", a));
      ++i;
      return value;
    };
    if (a == "-b" || a == "--minbytes") {
      flags.minBytes = coll::parseSize(need(), a);
    } else if (a == "-e" || a == "--maxbytes") {
      flags.maxBytes = coll::parseSize(need(), a);
    } else if (a == "-f" || a == "--stepfactor") {
      flags.stepFactor = parseInt(a, need(), 2);
    } else if (a == "-n" || a == "--iters") {
      flags.iters = parseInt(a, need(), 1);
    } else if (a == "-w" || a == "--warmup_iters") {
      flags.warmupIters = parseInt(a, need(), 0);
    } else if (a == "--min-time") {
      const char* v = need();
      char* end = nullptr;
      flags.minTimeS = std::strtod(v, &end);
      if (end == v || *end != '\0' || flags.minTimeS < 0 || flags.minTimeS > 3600) {
        throw ConfigError(fmt::format("--min-time '{}' is not valid; give seconds from 0 to 3600.", v));
      }
    } else if (a == "-J" || a == "--json") {
      flags.jsonPath = need();
    } else {
      if (!extra || !extra(a, need)) throw ConfigError(fmt::format("unknown flag '{}'; see --help.", a));
    }
  }
  if (flags.minBytes > flags.maxBytes) {
    throw ConfigError(fmt::format("-b {} is larger than -e {}; the smallest size must come first.",
                                  flags.minBytes, flags.maxBytes));
  }
  return true;
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
