#include "reports/sweep/sweep_text.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <vector>

#include "reports/sweep/expected.h"

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
  if (a.perIterTiming > 0) {
    // nccl-tests' line (CUDA event timing there); ours says what each iteration's time is.
    s += fmt::format(
        "# Per-Iteration Report: {}; i_* uses max over ranks{} \n",
        a.blocking ? "wall time of each op, from issue to completion (-z)"
                   : "execution time of each op (the backend's own timing of the work)",
        a.perIterSkip > 0 ? fmt::format("; summary skips first {} iterations", a.perIterSkip) : "");
  }
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
  if (a.perIterSkip > 0 && a.perIterTiming == 0) {
    s += fmt::format(
        "# per-iteration statistics (the JSON's iter) leave out the first {} timed iteration(s) of each size "
        "(-K); the time per op does not\n",
        a.perIterSkip);
  }
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

std::string formatIterValue(double v) {
  for (const char* spec : {"{:7.2f}", "{:7.1f}", "{:7.0f}"}) {
    std::string t = fmt::format(fmt::runtime(spec), v);
    if (t.size() <= 7) return t;
  }
  return fmt::format("{:7.1e}", v);
}

namespace {

// The per-iteration columns of -I 1 (nccl-tests') and -I 2 (the tails): names, and what each shows.
struct IterColumn {
  const char* name;
  const char* unit;
  std::optional<double> (*value)(const IterStats&);
};
const std::vector<IterColumn>& iterColumns(int perIterTiming) {
  static const std::vector<IterColumn> kNccl{
      {"i_min", "(us)", [](const IterStats& s) -> std::optional<double> { return s.minUs; }},
      {"i_max", "(us)", [](const IterStats& s) -> std::optional<double> { return s.maxUs; }},
      {"i_p99", "(us)", [](const IterStats& s) -> std::optional<double> { return s.p99Us; }},
      {"i_cv%", "(%)", [](const IterStats& s) -> std::optional<double> { return s.cvPct; }}};
  static const std::vector<IterColumn> kTails{
      {"i_p50", "(us)", [](const IterStats& s) -> std::optional<double> { return s.p50Us; }},
      {"i_p90", "(us)", [](const IterStats& s) { return s.p90Us; }},
      {"i_p99", "(us)", [](const IterStats& s) -> std::optional<double> { return s.p99Us; }},
      {"i_p99.9", "(us)", [](const IterStats& s) { return s.p999Us; }},
      {"i_max", "(us)", [](const IterStats& s) -> std::optional<double> { return s.maxUs; }}};
  static const std::vector<IterColumn> kNone;
  return perIterTiming == 1 ? kNccl : perIterTiming == 2 ? kTails : kNone;
}

// With -I: nccl-tests' header lines with the per-iteration columns after each place's #wrong.
std::string perIterHeader(const std::vector<IterColumn>& cols) {
  auto names = [&](bool units) {
    std::string t;
    for (const auto& c : cols) t += fmt::format("  {:>7}", units ? c.unit : c.name);
    return t;
  };
  // One place: time algbw busbw #wrong (as the rows print them) and the i_* columns.
  const std::string place = fmt::format("  {:>7}  {:>6}  {:>6}  {:>5}", "", "", "", "") + names(false);
  std::string s = fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}", "", "", "", "", "");
  const std::string oop = "out-of-place (+ per-iteration)", ip = "in-place (+ per-iteration)";
  s += fmt::format("  {:<{}}", oop, place.size() - 2) + fmt::format("  {}", ip) + "\n";
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}", "size", "count", "type", "redop", "root");
  for (int k = 0; k < 2; ++k)
    s += fmt::format("  {:>7}  {:>6}  {:>6} {:>6}", "time", "algbw", "busbw", "#wrong") + names(false);
  s += fmt::format("  {:>10}\n", "straggler");
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}", "(B)", "(elements)", "", "", "");
  for (int k = 0; k < 2; ++k)
    s += fmt::format("  {:>7}  {:>6}  {:>6}  {:>5}", "(us)", "(GB/s)", "(GB/s)", "") + names(true);
  s += fmt::format("  {:>10}\n", "(rank+%)");
  return s;
}

}  // namespace

std::string formatTableHeader(const std::string& backend, const std::string& collective,
                              const std::string& busFactor, int perIterTiming) {
  std::string s =
      fmt::format("#\n# Collective {} on backend {} (busbw = algbw x {})\n", collective, backend, busFactor);
  if (!iterColumns(perIterTiming).empty()) return s + perIterHeader(iterColumns(perIterTiming));
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

std::string place(const PlaceResult& p, int perIterTiming) {
  std::string iter;
  for (const auto& c : iterColumns(perIterTiming)) {
    std::optional<double> v = p.measured && p.iter.n > 0 ? c.value(p.iter) : std::nullopt;
    iter += "  " + (v ? formatIterValue(*v) : fmt::format("{:>7}", "-"));
  }
  if (!p.measured) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>5}", "-", "-", "-", "-") + iter;
  std::string wrong = p.wrong < 0 ? "N/A" : fmt::format("{}", p.wrong);
  return fmt::format("  {}  {:6.2f}  {:6.2f}  {:>5}", formatTimeUs(p.timeUs), p.algBw, p.busBw, wrong) + iter;
}

}  // namespace

std::string formatRow(const SweepMeasurement& m, int perIterTiming) {
  const PlaceResult& s = m.outOfPlace.measured ? m.outOfPlace : m.inPlace;
  std::string straggler = s.measured ? fmt::format("r{}+{:.0f}%", s.slowestRank, s.spreadPct) : "-";
  return fmt::format("{:12d}  {:12d}  {:>8}  {:>6}  {:6d}", m.bytes, m.count, ncclTestsTypeName(m.dtype),
                     m.op, m.root) +
         place(m.outOfPlace, perIterTiming) + place(m.inPlace, perIterTiming) +
         fmt::format("  {:>10}\n", straggler);
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
