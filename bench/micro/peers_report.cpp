// ds_peers_report: combines the rounds of scripts/bench-peers.sh into one dsperf.sweep JSON and
// prints the side-by-side tables (shm against each peer and against the memory-bandwidth limit,
// and the engine's overhead over raw MPI), with the targets of issues 8 and 16 checked.
//
//   ds_peers_report [-o peers.json] [--place in|out] [--stat mean|p50] [--note TEXT]...
//                   [--placement NAME] FILE.json... [--placement NAME FILE.json...]...
//
// --placement NAME tags the files after it (bench-peers' placement matrix: unbound, mpirun-default,
// shared-core, hog): tables and targets are printed per placement, then one matrix of every target
// under every placement, and each output row keeps its placement. Under "shared-core" (two ranks on
// one core) the only target is shm within 2x of raw MPI; the others are printed for information.
//
// Inputs are dsperf.sweep JSON files: dsbench coll runs (backends shm, gloo, mpi), ds_mpi_allreduce_raw
// (pseudo-backend mpi-raw, and mpi-raw-nb with --nonblocking) and ds_membw_probe (pseudo-backend
// membw-limit). Rows are grouped by (backend, world size, size); a group's row is the one of its
// median round by time in the chosen place (so every figure of a row comes from one real run), and
// the spread of the rounds ((max - min) / median of the time) is printed as the noise. --stat p50
// judges by the median per-iteration time (of the slowest rank per iteration) instead of the loop
// mean (nccl-tests' time): on a loaded machine the mean is the scheduler's stalls, the median the
// collective's (rows without per-iteration figures, such as the membw-limit bound, keep their time).
// Output rows
// keep their backend field, so a reader overlays them by backend and world size.
// Exit: 0 (a benchmark: targets missed are reported, not failed), 5 bad flags, 6 unreadable input.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>
#include <thread>

#include "bench/coll/metadata.h"
#include "bench/exit_codes.h"
#include "engine/common/error.h"
#include "reports/json_io.h"
#include "reports/sweep/sweep_schema.h"

namespace {

namespace report = ds::report;

const char* kUsage =
    "usage: ds_peers_report [-o OUT.json] [--place in|out] [--stat mean|p50] [--note TEXT]...\n"
    "                       [--placement NAME] FILE.json... [--placement NAME FILE.json...]...\n"
    "Combines the rounds of scripts/bench-peers.sh (dsperf.sweep files) into one JSON (the median round\n"
    "per backend, world size and size) and prints the ratio tables and the targets, per placement.\n";

struct Group {
  std::vector<report::SweepMeasurement> rounds;
  report::SweepMeasurement chosen;
  double spreadPct = 0;
};

using Key = std::tuple<std::string, int, std::size_t>;  // backend, world size, bytes
constexpr const char* kSharedCore = "shared-core";

const report::PlaceResult& place(const report::SweepMeasurement& m, bool inPlace) {
  return inPlace ? m.inPlace : m.outOfPlace;
}

bool gUseP50 = false;  // --stat p50

// The time a row is judged by: the loop mean, or the per-iteration median with --stat p50.
double timeOf(const report::PlaceResult& p) {
  return gUseP50 && p.iter.n > 0 && p.iter.p50Us > 0 ? p.iter.p50Us : p.timeUs;
}
double busBwOf(const report::SweepMeasurement& m, const report::PlaceResult& p) {
  double t = timeOf(p);
  return t > 0 ? static_cast<double>(m.bytes) / 1e9 / (t * 1e-6) * m.busFactor : 0;
}

std::string sizeText(std::size_t b) {
  if (b >= (1u << 30) && b % (1u << 30) == 0) return fmt::format("{}G", b >> 30);
  if (b >= (1u << 20) && b % (1u << 20) == 0) return fmt::format("{}M", b >> 20);
  if (b >= (1u << 10) && b % (1u << 10) == 0) return fmt::format("{}K", b >> 10);
  return fmt::format("{}", b);
}

std::string num(std::optional<double> v, const char* fmtSpec = "{:.2f}") {
  if (!v) return "-";
  return fmt::format(fmt::runtime(fmtSpec), *v);
}

class Table {
 public:
  Table(std::map<Key, Group>& groups, bool inPlace) : groups_(groups), inPlace_(inPlace) {}

  const report::SweepMeasurement* get(const std::string& backend, int n, std::size_t bytes) const {
    auto it = groups_.find(Key{backend, n, bytes});
    if (it == groups_.end()) return nullptr;
    return place(it->second.chosen, inPlace_).measured ? &it->second.chosen : nullptr;
  }
  std::optional<double> bw(const std::string& b, int n, std::size_t s) const {
    auto* m = get(b, n, s);
    return m ? std::optional<double>(busBwOf(*m, place(*m, inPlace_))) : std::nullopt;
  }
  std::optional<double> us(const std::string& b, int n, std::size_t s) const {
    auto* m = get(b, n, s);
    return m ? std::optional<double>(timeOf(place(*m, inPlace_))) : std::nullopt;
  }
  std::optional<double> spread(const std::string& b, int n, std::size_t s) const {
    auto it = groups_.find(Key{b, n, s});
    if (it == groups_.end() || it->second.rounds.size() < 2) return std::nullopt;
    return it->second.spreadPct;
  }

 private:
  std::map<Key, Group>& groups_;
  bool inPlace_;
};

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

std::optional<double> better(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::max(*a, *b);
}

// One target under one placement: its figure (text) and verdict.
struct Verdict {
  std::string figure;
  std::string result;  // PASS, MISS, n/a (missing figures), info (not a target here)
};
struct TargetRow {
  std::string what;
  std::map<std::string, Verdict> byPlacement;  // "placement/ranks" -> verdict
};

// Prints the tables of one placement and world size, and returns its targets' verdicts in order.
std::vector<std::pair<std::string, Verdict>> printWorld(const Table& t, const std::set<std::string>& backends,
                                                        const std::set<std::size_t>& sizes, int n,
                                                        const std::string& placement) {
  const bool haveTorch = backends.count("torch-gloo") > 0;
  std::printf("%8s | %8s %8s %8s %8s %8s%s | %8s %8s %8s %8s | %6s\n", "size", "shm", "gloo", "mpi",
              "mpi-raw", "limit", haveTorch ? fmt::format(" {:>8}", "torch").c_str() : "", "shm/gloo",
              "shm/mpi", "shm/raw", "shm/lim", "noise%");
  for (std::size_t s : sizes) {
    auto shm = t.bw("shm", n, s);
    std::optional<double> noise;  // none with one round
    for (const char* b : {"shm", "gloo", "mpi", "mpi-raw", "torch-gloo"}) {
      if (auto sp = t.spread(b, n, s)) noise = std::max(noise.value_or(0), *sp);
    }
    std::printf("%8s | %8s %8s %8s %8s %8s%s | %8s %8s %8s %8s | %6s\n", sizeText(s).c_str(),
                num(shm).c_str(), num(t.bw("gloo", n, s)).c_str(), num(t.bw("mpi", n, s)).c_str(),
                num(t.bw("mpi-raw", n, s)).c_str(), num(t.bw("membw-limit", n, s)).c_str(),
                haveTorch ? fmt::format(" {:>8}", num(t.bw("torch-gloo", n, s))).c_str() : "",
                num(ratio(shm, t.bw("gloo", n, s))).c_str(), num(ratio(shm, t.bw("mpi", n, s))).c_str(),
                num(ratio(shm, t.bw("mpi-raw", n, s))).c_str(),
                num(ratio(shm, t.bw("membw-limit", n, s))).c_str(), num(noise, "{:.0f}").c_str());
  }
  const bool haveNb = backends.count("mpi-raw-nb") > 0;
  std::printf("\n%8s | %9s %9s %9s %9s%s%s | %10s %9s%s%s\n", "size", "shm us", "gloo us", "mpi us", "raw us",
              haveNb ? fmt::format(" {:>9}", "raw-nb us").c_str() : "",
              haveTorch ? fmt::format(" {:>9}", "torch us").c_str() : "", "mpi-raw us", "mpi/raw",
              haveNb ? fmt::format(" {:>10}", "mpi/raw-nb").c_str() : "",
              haveTorch ? fmt::format(" {:>10}", "gloo/torch").c_str() : "");
  for (std::size_t s : sizes) {
    auto mpi = t.us("mpi", n, s);
    auto raw = t.us("mpi-raw", n, s);
    auto nb = t.us("mpi-raw-nb", n, s);
    std::optional<double> diff;
    if (mpi && raw) diff = *mpi - *raw;
    std::printf(
        "%8s | %9s %9s %9s %9s%s%s | %10s %9s%s%s\n", sizeText(s).c_str(), num(t.us("shm", n, s)).c_str(),
        num(t.us("gloo", n, s), "{:.1f}").c_str(), num(mpi).c_str(), num(raw).c_str(),
        haveNb ? fmt::format(" {:>9}", num(nb)).c_str() : "",
        haveTorch ? fmt::format(" {:>9}", num(t.us("torch-gloo", n, s), "{:.1f}")).c_str() : "",
        num(diff, "{:+.2f}").c_str(), num(ratio(mpi, raw), "{:.3f}").c_str(),
        haveNb ? fmt::format(" {:>10}", num(ratio(mpi, nb), "{:.3f}")).c_str() : "",
        haveTorch ? fmt::format(" {:>10}", num(ratio(t.us("gloo", n, s), t.us("torch-gloo", n, s)), "{:.2f}"))
                        .c_str()
                  : "");
  }

  // Targets (issues 8 and 16), each the worst case over its size range.
  auto worst = [&](std::size_t lo, std::size_t hi, auto value, bool wantMax) {
    std::optional<double> w;
    for (std::size_t s : sizes) {
      if (s < lo || s > hi) continue;
      auto v = value(s);
      if (!v) return std::optional<double>();  // a missing figure: cannot be judged
      w = !w ? v : (wantMax ? std::max(*w, *v) : std::min(*w, *v));
    }
    return w;
  };
  const bool shared = placement == kSharedCore;
  constexpr std::size_t K = 1024, M = 1024 * 1024;
  auto peerBest = [&](std::size_t s) {
    return better(better(t.bw("gloo", n, s), t.bw("mpi", n, s)), t.bw("torch-gloo", n, s));
  };
  auto shmOverPeers = [&](std::size_t s) { return ratio(t.bw("shm", n, s), peerBest(s)); };
  auto shmOverRaw = [&](std::size_t s) { return ratio(t.us("shm", n, s), t.us("mpi-raw", n, s)); };
  std::vector<std::pair<std::string, Verdict>> out;
  std::printf("\n# targets, %d ranks%s (worst size of each range; best peer = max(gloo, mpi%s)):\n", n,
              placement.empty() ? "" : (", placement " + placement).c_str(), haveTorch ? ", torch" : "");
  // `target`: whether it is a target under this placement (else printed as info).
  auto line = [&](const std::string& what, std::optional<double> v, bool pass, const char* fmtSpec,
                  bool target) {
    Verdict vd{num(v, fmtSpec), !target ? "info" : !v ? "n/a" : pass ? "PASS" : "MISS"};
    std::printf("#   %-62s %10s  %s\n", what.c_str(), vd.figure.c_str(),
                vd.result == "n/a"    ? "n/a (missing figures)"
                : vd.result == "info" ? "(not a target under this placement)"
                                      : vd.result.c_str());
    out.push_back({what, vd});
  };
  std::optional<double> r0;
  if (auto a = t.us("shm", n, 8), b = t.us("mpi-raw", n, 8); a && b && *b > 0) r0 = *a / *b;
  line("shm time / raw MPI_Allreduce time at 8 B    (<= 1.5)", r0, r0 && *r0 <= 1.5, "{:.2f}x", !shared);
  auto r1 = worst(64 * K, 1 * M, shmOverPeers, false);
  line("shm / best peer busbw, 64K-1M               (>= 1.2)", r1, r1 && *r1 >= 1.2, "{:.2f}x", !shared);
  auto r2 = worst(32 * M, 256 * M, shmOverPeers, false);
  line("shm / best peer busbw, 32M-256M             (>= 2.0)", r2, r2 && *r2 >= 2.0, "{:.2f}x", !shared);
  auto r3 = worst(
      32 * M, 256 * M, [&](std::size_t s) { return ratio(t.bw("shm", n, s), t.bw("membw-limit", n, s)); },
      false);
  line("shm busbw / zero-copy limit, >= 32M         (>= 0.75)", r3, r3 && *r3 >= 0.75, "{:.2f}", !shared);
  auto r4 = worst(8, SIZE_MAX, shmOverRaw, true);
  line("shm time / raw MPI time, every size         (<= 2.0)", r4, r4 && *r4 <= 2.0, "{:.2f}x", shared);
  auto r5 = worst(
      1 * M, SIZE_MAX,
      [&](std::size_t s) -> std::optional<double> {
        auto r = ratio(t.us("mpi", n, s), t.us("mpi-raw", n, s));
        return r ? std::optional<double>(100.0 * (*r - 1)) : std::nullopt;
      },
      true);
  line("engine mpi overhead over raw MPI, >= 1M     (<= 5%)", r5, r5 && *r5 <= 5.0, "{:+.1f}%", !shared);
  std::optional<double> r6;
  if (auto a = t.us("mpi", n, 8), b = t.us("mpi-raw", n, 8); a && b) r6 = *a - *b;
  line("engine mpi overhead over raw MPI at 8 B     (<= 1 us)", r6, r6 && *r6 <= 1.0, "{:+.2f}us", !shared);
  if (haveTorch) {
    auto r7 = worst(
        8, 64 * M, [&](std::size_t s) { return ratio(t.us("gloo", n, s), t.us("torch-gloo", n, s)); }, true);
    line("gloo time / torch gloo time, 8B-64M         (<= 1.28)", r7, r7 && *r7 <= 1.28, "{:.2f}x", true);
  }
  return out;
}

int run(int argc, char** argv) {
  std::string out;
  bool inPlace = true;
  std::vector<std::pair<std::string, std::string>> files;  // placement, path
  std::vector<std::string> extraNotes;
  std::string currentPlacement;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto need = [&]() -> std::string {
      if (i + 1 >= argc) throw ds::ConfigError(fmt::format("{} needs a value; see --help.", a));
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return ds::bench::kExitOk;
    } else if (a == "-o") {
      out = need();
    } else if (a == "--place") {
      std::string v = need();
      if (v != "in" && v != "out") {
        throw ds::ConfigError(fmt::format("--place '{}' is not valid; give in (in-place) or out.", v));
      }
      inPlace = v == "in";
    } else if (a == "--stat") {
      std::string v = need();
      if (v != "mean" && v != "p50") {
        throw ds::ConfigError(fmt::format("--stat '{}' is not valid; give mean (the loop time per op) or p50.", v));
      }
      gUseP50 = v == "p50";
    } else if (a == "--placement") {
      currentPlacement = need();
      if (currentPlacement.empty() || currentPlacement.find_first_of(" /\t") != std::string::npos) {
        throw ds::ConfigError(
            fmt::format("--placement '{}' is not a name; give one word such as unbound.", currentPlacement));
      }
    } else if (a == "--note") {
      extraNotes.push_back(need());
    } else if (!a.empty() && a[0] == '-') {
      throw ds::ConfigError(fmt::format("unknown flag '{}'; see --help.", a));
    } else {
      files.emplace_back(currentPlacement, a);
    }
  }
  if (files.empty()) throw ds::ConfigError("no input files; give the dsperf.sweep JSON files of the rounds.");

  std::vector<std::string> placements;  // in the order given
  std::map<std::string, std::map<Key, Group>> groupsOf;
  std::map<std::string, std::set<std::string>> backendsOf;
  report::SweepRun combined;
  bool haveMeta = false;
  std::set<std::string> backends;
  std::set<int> worlds;
  std::set<std::string> notes;
  for (const auto& [placement, path] : files) {
    if (std::find(placements.begin(), placements.end(), placement) == placements.end())
      placements.push_back(placement);
    report::SweepRun r = report::sweepFromJson(report::readJson(path), path);
    // dsbench's own metadata (launcher, ranks, versions) describes the run best; the others fill in.
    bool dsbench = r.metadata.commandLine.find("dsbench") != std::string::npos;
    if (!haveMeta || (dsbench && combined.metadata.commandLine.find("dsbench") == std::string::npos)) {
      combined.metadata = r.metadata;
      combined.args = r.args;
      haveMeta = true;
    }
    if (r.summary.status != "ok") {
      notes.insert(fmt::format("{}: status {}{}", path, r.summary.status,
                               r.summary.error.empty() ? "" : ": " + r.summary.error));
    }
    for (const auto& n : r.notes) {
      if (n.rfind("membw-limit at ", 0) != 0) notes.insert(n);  // per-size probe figures: printed, not kept
    }
    // Where each rank ran, once per placement and peer, so that the JSON says it even for peers whose
    // row metadata is not the combined one.
    std::vector<std::string> where;
    for (const auto& rk : r.metadata.ranks) {
      if (rk.placement)
        where.push_back(fmt::format("rank {} {}", rk.rank, report::formatCpus(*rk.placement)));
    }
    if (!where.empty() && !r.results.empty()) {
      notes.insert(fmt::format("placement {}: {} ran with {}{}", placement.empty() ? "-" : placement,
                               r.results.front().backend, fmt::join(where, ", "),
                               r.metadata.ranks.front().placement
                                   ? "; " + report::formatLoad(*r.metadata.ranks.front().placement)
                                   : ""));
    }
    for (auto& m : r.results) {
      m.placement = placement;
      backends.insert(m.backend);
      backendsOf[placement].insert(m.backend);
      worlds.insert(m.worldSize);
      groupsOf[placement][Key{m.backend, m.worldSize, m.bytes}].rounds.push_back(m);
    }
  }
  int rounds = 0;
  for (auto& [placement, groups] : groupsOf) {
    for (auto& [key, g] : groups) {
      auto& v = g.rounds;
      std::sort(v.begin(), v.end(), [&](const auto& a, const auto& b) {
        return timeOf(place(a, inPlace)) < timeOf(place(b, inPlace));
      });
      g.chosen = v[(v.size() - 1) / 2];  // lower median: with 2 rounds, the faster
      double lo = timeOf(place(v.front(), inPlace));
      double hi = timeOf(place(v.back(), inPlace));
      double mid = timeOf(place(g.chosen, inPlace));
      g.spreadPct = mid > 0 ? 100.0 * (hi - lo) / mid : 0;
      rounds = std::max(rounds, static_cast<int>(g.rounds.size()));
    }
  }
  const char* placeName = inPlace ? "in-place" : "out-of-place";

  std::printf("# Peers side by side: allreduce f32 sum, %s, the median of %d round(s) per size; time = %s\n",
              placeName, rounds,
              gUseP50 ? "median per-iteration time (p50 of the slowest rank per iteration)"
                      : "loop time per op (nccl-tests' time, the mean)");
  std::printf("# busbw in GB/s (GB = 1e9 B), time in us per op; ratios are busbw ratios (= inverse time ratios)\n");
  std::printf(
      "# mpi = the engine's mpi backend (dsbench coll); mpi-raw = MPI_Allreduce with no engine "
      "(ds_mpi_allreduce_raw);\n# limit = ideal zero-copy allreduce from the copy bandwidth measured "
      "in the same run (ds_membw_probe)%s\n",
      backends.count("torch-gloo")
          ? ";\n# torch = torch.distributed all_reduce on gloo (scripts/peers/torch_allreduce.py)"
          : "");
  std::vector<TargetRow> matrix;
  std::vector<std::string> columns;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const auto& placement : placements) {
    const auto& pb = backendsOf[placement];
    Table t(groupsOf[placement], inPlace);
    if (!placement.empty()) std::printf("\n\n######## placement: %s\n", placement.c_str());
    if (!pb.count("shm")) {
      std::printf(
          "#\n# shm: MISSING from these results (dsbench coll --backend shm did not run or failed); "
          "its columns show '-'.\n");
    }
    std::set<int> pworlds;
    for (const auto& [key, g] : groupsOf[placement]) pworlds.insert(std::get<1>(key));
    for (int n : pworlds) {
      std::set<std::size_t> sizes;
      for (const auto& [key, g] : groupsOf[placement]) {
        if (std::get<1>(key) == n) sizes.insert(std::get<2>(key));
      }
      std::printf(
          "\n## %d ranks%s\n", n,
          n > cores ? fmt::format(" (oversubscribed: more ranks than the {} cores)", cores).c_str() : "");
      std::string column = (placement.empty() ? std::string("all") : placement) +
                           (pworlds.size() > 1 ? fmt::format("/{}", n) : "");
      columns.push_back(column);
      for (auto& [what, v] : printWorld(t, pb, sizes, n, placement)) {
        auto it =
            std::find_if(matrix.begin(), matrix.end(), [&](const TargetRow& r) { return r.what == what; });
        if (it == matrix.end()) it = matrix.insert(matrix.end(), TargetRow{what, {}});
        it->byPlacement[column] = v;
      }
    }
  }
  if (placements.size() > 1) {
    std::printf("\n\n######## placement matrix: every target under every placement (figure, verdict)\n");
    std::printf("# %-50s", "target");
    for (const auto& c : columns) std::printf(" | %-22s", c.c_str());
    std::printf("\n");
    for (const auto& row : matrix) {
      std::string what = row.what.substr(0, row.what.find("  "));
      std::string bound =
          row.what.substr(row.what.rfind('(') == std::string::npos ? row.what.size() : row.what.rfind('('));
      std::printf("  %-50s", (what + " " + bound).substr(0, 50).c_str());
      for (const auto& c : columns) {
        auto it = row.byPlacement.find(c);
        std::string cell = it == row.byPlacement.end() ? "-" : it->second.figure + " " + it->second.result;
        std::printf(" | %-22s", cell.c_str());
      }
      std::printf("\n");
    }
    std::printf(
        "# info = not a target under that placement (the shared core has one target: shm within 2x of raw "
        "MPI)\n");
  }

  if (!out.empty()) {
    for (auto& [placement, groups] : groupsOf) {
      for (auto& [key, g] : groups) combined.results.push_back(g.chosen);
    }
    std::stable_sort(combined.results.begin(), combined.results.end(), [&](const auto& a, const auto& b) {
      auto pa = std::find(placements.begin(), placements.end(), a.placement) - placements.begin();
      auto pb = std::find(placements.begin(), placements.end(), b.placement) - placements.begin();
      return std::tie(pa, a.worldSize, a.backend, a.bytes) < std::tie(pb, b.worldSize, b.backend, b.bytes);
    });
    combined.args.backends.assign(backends.begin(), backends.end());
    combined.metadata.commandLine = ds::bench::coll::commandLine();
    combined.metadata.worldSize = worlds.empty() ? 0 : *worlds.begin();
    combined.notes.clear();
    combined.notes.push_back(fmt::format(
        "scripts/bench-peers.sh: {} round(s), peers interleaved; each row is the median round of its "
        "backend, "
        "world size and size by {} {} time; rows of world sizes {} are in this one file (see world_size){}",
        rounds, placeName, gUseP50 ? "per-iteration median" : "loop", fmt::join(worlds, ", "),
        placements.size() > 1 || !placements.front().empty()
            ? fmt::format(", under placements {} (see each row's placement)", fmt::join(placements, ", "))
            : ""));
    combined.notes.push_back(
        "pseudo-backends: mpi-raw = MPI_Allreduce called directly (ds_mpi_allreduce_raw, no engine); "
        "mpi-raw-nb = MPI_Iallreduce + MPI_Wait likewise; membw-limit = a bound, not a run: the busbw of an "
        "ideal zero-copy in-place allreduce from the memory copy bandwidth measured in the same run "
        "(ds_membw_probe); torch-gloo = torch.distributed all_reduce on gloo "
        "(scripts/peers/torch_allreduce.py)");
    for (const auto& n : extraNotes) combined.notes.push_back(n);
    for (const auto& n : notes) combined.notes.push_back(n);
    combined.summary = report::summarize(combined.results);
    report::writeJsonAtomic(out, report::sweepToJson(combined));
    std::printf("\n# wrote %s (%zu rows)\n", out.c_str(), combined.results.size());
  }
  return ds::bench::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::bench::runMain("ds_peers_report", [&] { return run(argc, argv); });
}
