#include "reports/sweep/sweep_text.h"

#include <fmt/format.h>

#include <set>

#include "reports/baseline/expected.h"

namespace ds::report {

std::string ncclTestsTypeName(const std::string& dtype) {
  if (dtype == "f32") return "float";
  if (dtype == "f64") return "double";
  if (dtype == "f16") return "half";
  if (dtype == "bf16") return "bfloat16";
  if (dtype == "i32") return "int32";
  if (dtype == "i64") return "int64";
  if (dtype == "u8") return "uint8";
  if (dtype == "i8") return "int8";
  return dtype;
}

std::string formatTimeUs(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

std::string formatSweepPreamble(const SweepArgs& a, const SweepMetadata& meta) {
  std::string s;
  bool factor = a.stepFactor > 1;
  s += fmt::format(
      "# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: 1 "
      "validation: {} graph: 0\n",
      a.minBytes, a.maxBytes, factor ? a.stepFactor : a.stepBytes, factor ? "factor" : "bytes", a.warmupIters,
      a.iters, a.check);
  if (a.blocking) s += "# Blocking Enabled: wait for completion and barrier after each collective \n";
  s += "#\n# Using devices\n";
  for (const auto& r : meta.ranks) {
    s += fmt::format("#  Rank {:2d} Group  0 Pid {:6d} on {:>10} device {:2d} [{}] {}\n", r.rank, r.pid,
                     r.host, r.localRank, r.device.substr(0, r.device.find(' ')), r.device);
  }
  s += formatPlacementLines(placedRanks(meta));
  for (const auto& h : meta.hardware) s += fmt::format("# hardware of {}: {}\n", h.host, describeHardware(h));
  s += "#\n";
  static const char* kAverage[] = {"rank 0's time (-a 0)", "the average over ranks (-a 1)",
                                   "the minimum over ranks (-a 2)", "the maximum over ranks (-a 3)"};
  s += fmt::format("# dsbench coll: {} rank(s) on {} host(s); backends {}; collectives {}\n", meta.worldSize,
                   meta.hosts.size(), fmt::join(a.backends, ","), fmt::join(a.collectives, ","));
  s += fmt::format(
      "# time is per operation, {}{}; GB/s with GB = 1e9 bytes\n",
      a.average >= 0 && a.average <= 3 ? kAverage[a.average] : "?",
      a.minTimeS > 0 ? fmt::format("; iterations grow per size to last at least {} s", a.minTimeS) : "");
  if (a.repeat > 1) {
    s += fmt::format(
        "# {} passes over the sizes (--repeat), the size order rotated each pass; each row shows the pass "
        "with the median time, and the JSON keeps every pass\n",
        a.repeat);
  }
  s += "# sizes are rounded down as nccl-tests does (to whole elements, and to a multiple of the ranks where "
       "the "
       "collective splits the buffer); the size column shows what ran\n";
  return s;
}

std::string formatTableHeader(const std::string& backend, const std::string& collective,
                              const std::string& busFactor) {
  std::string s =
      fmt::format("#\n# Collective {} on backend {} (busbw = algbw x {})\n", collective, backend, busFactor);
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>10}\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
      "#wrong", "straggler");
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}  "
      "{:>10}\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
      "(rank+%)");
  return s;
}

namespace {

std::string place(const PlaceResult& p) {
  if (!p.measured) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>5}", "-", "-", "-", "-");
  std::string wrong = p.wrong < 0 ? "N/A" : fmt::format("{}", p.wrong);
  return fmt::format("  {}  {:6.2f}  {:6.2f}  {:>5}", formatTimeUs(p.timeUs), p.algBw, p.busBw, wrong);
}

}  // namespace

std::string formatRow(const SweepMeasurement& m) {
  const PlaceResult& s = m.outOfPlace.measured ? m.outOfPlace : m.inPlace;
  std::string straggler = s.measured ? fmt::format("r{}+{:.0f}%", s.slowestRank, s.spreadPct) : "-";
  return fmt::format("{:12d}  {:12d}  {:>8}  {:>6}  {:6d}", m.bytes, m.count, ncclTestsTypeName(m.dtype),
                     m.op, m.root) +
         place(m.outOfPlace) + place(m.inPlace) + fmt::format("  {:>10}\n", straggler);
}

std::string formatRoundingNote(const std::vector<SweepMeasurement>& rows) {
  std::vector<std::string> items;
  std::set<std::pair<std::size_t, std::size_t>> seen;
  for (const auto& r : rows) {
    if (r.rounded() && seen.insert({r.requestedBytes, r.bytes}).second) {
      items.push_back(fmt::format("{}->{}", r.requestedBytes, r.bytes));
    }
  }
  if (items.empty()) return "";
  return fmt::format("# Rounded as nccl-tests does (requested -> used bytes): {}\n", fmt::join(items, ", "));
}

std::string formatFooter(const SweepSummary& s) {
  std::string out;
  if (!s.error.empty()) out += fmt::format("# Stopped early ({}): {}\n", s.status, s.error);
  out += fmt::format("# Out of bounds values : {} {}\n", s.outOfBounds, s.outOfBounds ? "FAILED" : "OK");
  std::string verdict = s.minBusBw < 0 ? "" : (s.bwBelowMin ? "FAILED" : "OK");
  out += fmt::format("# Avg bus bandwidth    : {:g} {}\n", s.avgBusBw, verdict);
  out += "#\n";
  return out;
}

}  // namespace ds::report
