// Synthetic sweep rows for the compare tests (unit and CLI): a row measured once, or several passes
// spread around a time, as dsbench coll --repeat writes them.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "reports/sweep/sweep_schema.h"

namespace ds::report::testing {

// A row whose time per op is `timeUs`; with repeats > 1, that many passes drawn around it with
// relative spread `cv` (deterministic seed), as dsbench coll --repeat writes them.
inline SweepMeasurement row(std::size_t bytes, double timeUs, double cv, int repeats, unsigned seed,
                            const std::string& coll = "allreduce") {
  SweepMeasurement m;
  m.backend = "gloo";
  m.collective = coll;
  m.dtype = "f32";
  m.op = "sum";
  m.worldSize = 2;
  m.requestedBytes = m.bytes = bytes;
  m.count = bytes / 4;
  m.busFactor = 1;
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0.0, cv);
  std::vector<SweepMeasurement> passes;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    SweepMeasurement x = m;
    PlaceResult& p = x.outOfPlace;
    p.measured = true;
    p.iters = 20;
    p.timeUs = repeats > 1 ? std::max(0.1, timeUs * (1 + d(gen))) : timeUs;
    p.iter = computeIterStats(std::vector<double>(20, p.timeUs));
    p.algBw = static_cast<double>(bytes) / (p.timeUs * 1e3);
    p.busBw = p.algBw;
    p.wrong = 0;
    passes.push_back(x);
  }
  return mergeRepeats(passes);
}

}  // namespace ds::report::testing
