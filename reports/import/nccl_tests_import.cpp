#include "reports/import/nccl_tests_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "engine/common/collectives.h"
#include "engine/common/dtype.h"
#include "engine/common/error.h"
#include "engine/common/nccl_version.h"
#include "reports/input_file.h"
#include "reports/json_io.h"

namespace ds::report {

namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  std::string x;
  while (in >> x) w.push_back(x);
  return w;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// A line shown in an error: trimmed and cut to 100 characters.
std::string quote(const std::string& line) {
  std::string t = trim(line);
  if (t.size() > 100) t = t.substr(0, 100) + "...";
  return "'" + t + "'";
}

std::optional<double> toDouble(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE) return std::nullopt;
  return v;
}

std::optional<long long> toInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (end != s.c_str() + s.size() || errno == ERANGE) return std::nullopt;
  return v;
}

// nccl-tests' type name -> ours (f32, bf16, ...) where we know it; other names (uint32, fp8 ...) kept.
std::string dtypeFrom(const std::string& name) {
  try {
    return dtypeName(parseDType(name));
  } catch (const std::exception&) {
    return lower(name);
  }
}

// "runs/2025-01-01/nccl.txt" -> "nccl.txt": metadata.source names the file, not where it was read from,
// so that the same output imported from two places is the same run (the run id hashes the metadata).
std::string baseName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

bool isNcclLogLine(const std::string& line) {
  return line.find(" NCCL INFO ") != std::string::npos || line.find(" NCCL WARN ") != std::string::npos ||
         line.find(" NCCL TRACE ") != std::string::npos;
}

// "#  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3"
std::optional<SweepRank> parseRankLine(const std::string& body) {
  // Older versions print no "Group": "#   Rank  0 Pid  12001 on gpu-01 device  0 [0x1a] Tesla V100".
  auto w = words(body);
  if (w.size() < 6 || w[0] != "Rank") return std::nullopt;
  std::size_t i = 2;
  if (i + 1 < w.size() && w[i] == "Group") i += 2;
  if (i + 3 >= w.size() || w[i] != "Pid" || w[i + 2] != "on") return std::nullopt;
  auto rank = toInt(w[1]);
  auto pid = toInt(w[i + 1]);
  if (!rank || !pid) return std::nullopt;
  SweepRank r;
  r.rank = static_cast<int>(*rank);
  r.pid = static_cast<long>(*pid);
  r.host = w[i + 3];
  i += 4;
  if (i + 1 < w.size() && w[i] == "device") {
    std::string dev = "cuda:" + w[i + 1];
    std::string name;
    for (std::size_t k = i + 2; k < w.size(); ++k) {
      if (k == i + 2 && w[k].front() == '[') continue;  // the PCI bus id
      name += (name.empty() ? "" : " ") + w[k];
    }
    r.device = name.empty() ? dev : dev + " " + name;
  }
  return r;
}

// Fills ranks' local and node ranks from the order of hosts.
void finishRanks(SweepMetadata& md) {
  std::map<std::string, int> perHost, nodeOf;
  md.hosts.clear();
  for (auto& r : md.ranks) {
    if (!nodeOf.count(r.host)) {
      nodeOf[r.host] = static_cast<int>(nodeOf.size());
      md.hosts.push_back(r.host);
    }
    r.nodeRank = nodeOf[r.host];
    r.localRank = perHost[r.host]++;
  }
  md.worldSize = static_cast<int>(md.ranks.size());
}

// "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters:
// 1 validation: 1 graph: 0"
void parseParamsLine(const std::string& body, SweepArgs& a) {
  auto w = words(body);
  for (std::size_t i = 0; i + 1 < w.size(); ++i) {
    const std::string& k = w[i];
    const std::string& v = w[i + 1];
    if (k == "minBytes") {
      if (auto x = toInt(v)) a.minBytes = static_cast<std::size_t>(*x);
    } else if (k == "maxBytes") {
      if (auto x = toInt(v)) a.maxBytes = static_cast<std::size_t>(*x);
    } else if (k == "step:") {
      auto paren = v.find('(');
      auto n = toInt(v.substr(0, paren));
      if (n && v.find("factor") != std::string::npos) a.stepFactor = static_cast<int>(*n);
      if (n && v.find("bytes") != std::string::npos) a.stepBytes = static_cast<std::size_t>(*n);
    } else if (k == "iters:" && (i == 0 || w[i - 1] != "warmup") && (i == 0 || w[i - 1] != "agg")) {
      if (auto x = toInt(v)) a.iters = static_cast<int>(*x);
    } else if (k == "iters:" && i > 0 && w[i - 1] == "warmup") {
      if (auto x = toInt(v)) a.warmupIters = static_cast<int>(*x);
    } else if (k == "validation:") {
      if (auto x = toInt(v)) a.check = static_cast<int>(*x);
    }
  }
}

// The layout of a table, from its header line.
struct Layout {
  int size = -1, count = -1, type = -1, redop = -1, root = -1;
  int keyCols = 0;  // columns before the first time column
  int groups = 0;   // 1 or 2 groups of (time, algbw, busbw, wrong)
  bool timestamp = false;
  bool errorColumn = false;  // older "error" column (a max error, not a count)
  // Per-iteration columns after each group's #wrong (nccl-tests -I 1: i_min i_max i_p99 i_cv%; dsbench
  // coll -I 2: i_p50 i_p90 i_p99 i_p99.9 i_max): read past, not imported (a few figures of each row
  // cannot make whole per-iteration statistics; the -J JSON has them).
  std::vector<std::string> iterCols;
  int groupCols() const { return 4 + static_cast<int>(iterCols.size()); }
  std::string describe() const {
    std::string s;
    for (auto [idx, name] : {std::pair{size, "size"}, std::pair{count, "count"}, std::pair{type, "type"},
                             std::pair{redop, "redop"}, std::pair{root, "root"}}) {
      if (idx >= 0) s += std::string(s.empty() ? "" : " ") + name;
    }
    for (int g = 0; g < groups; ++g) {
      s += std::string(" | time algbw busbw ") + (errorColumn ? "error" : "#wrong");
      for (const auto& c : iterCols) s += " " + c;
    }
    if (timestamp) s += " timestamp";
    return s;
  }
};

std::optional<Layout> parseHeader(const std::string& body) {
  auto w = words(body);
  if (w.size() < 5 || w[0] != "size") return std::nullopt;
  Layout l;
  int i = 0;
  for (; i < static_cast<int>(w.size()); ++i) {
    const std::string& t = w[i];
    if (t == "time" || t == "cputime") break;
    if (t == "size")
      l.size = i;
    else if (t == "count")
      l.count = i;
    else if (t == "type")
      l.type = i;
    else if (t == "redop")
      l.redop = i;
    else if (t == "root")
      l.root = i;
    else
      return std::nullopt;
  }
  l.keyCols = i;
  if (l.size < 0 || l.count < 0 || l.type < 0) return std::nullopt;
  while (i + 3 < static_cast<int>(w.size()) && (w[i] == "time" || w[i] == "cputime")) {
    if (w[i + 1] != "algbw" || w[i + 2] != "busbw") return std::nullopt;
    if (w[i + 3] == "error")
      l.errorColumn = true;
    else if (w[i + 3] != "#wrong")
      return std::nullopt;
    ++l.groups;
    i += 4;
    std::vector<std::string> iterCols;
    while (i < static_cast<int>(w.size()) && w[i].rfind("i_", 0) == 0) iterCols.push_back(w[i++]);
    if (l.groups == 1)
      l.iterCols = iterCols;
    else if (iterCols != l.iterCols)
      return std::nullopt;
  }
  if (l.groups == 0) return std::nullopt;
  if (i < static_cast<int>(w.size()) && w[i] == "timestamp") l.timestamp = true;
  return l;
}

std::string defaultCollective(const NcclImportOptions& o, const std::string& fromFile) {
  if (!o.collective.empty()) return collectiveFromNcclTests(o.collective);
  return fromFile;
}

// What a place's "wrong" column holds: a count, "N/A" (not checked: -1) or the older error value.
// The older "error" column is the largest deviation from the expected value (a float such as 1e-07 that
// nccl-tests compared with a tolerance of its own), not a count of wrong elements: a row cannot say
// whether it failed, so it reads as -1 (no count) until the table's footer settles it (see
// settleErrorColumn).
std::optional<long long> parseWrong(const std::string& s, bool errorColumn) {
  if (s == "N/A") return -1;
  auto d = toDouble(s);
  if (!d || *d < 0) return std::nullopt;
  if (errorColumn) return -1;
  return static_cast<long long>(std::llround(*d));
}

// "Out of bounds values : 0 OK" -> 0; "... : 3 FAILED" -> 3; anything else -> nullopt.
std::optional<long long> footerOutOfBounds(const std::string& body) {
  auto colon = body.find(':');
  if (colon == std::string::npos) return std::nullopt;
  auto w = words(body.substr(colon + 1));
  if (w.empty()) return std::nullopt;
  auto n = toInt(w[0]);
  if (!n || *n < 0) return std::nullopt;
  return *n;
}

bool isReducing(const std::string& collective) {
  const CollectiveFacts* c = collectiveFacts(collective);
  return c != nullptr && c->reduces;
}

bool isRooted(const std::string& collective) {
  const CollectiveFacts* c = collectiveFacts(collective);
  return c != nullptr && c->rooted;
}

// REFERENCE.md §5's bus factor when the collective and world size are known; else busbw / algbw.
double busFactorOf(const std::string& collective, int n) {
  const CollectiveFacts* c = collectiveFacts(collective);
  return n > 0 && c != nullptr ? c->busFactor(n) : 0;
}

void finishRow(SweepMeasurement& m) {
  for (PlaceResult* p : {&m.outOfPlace, &m.inPlace}) {
    if (p->measured && p->algBw > 0 && m.busFactor == 0) m.busFactor = p->busBw / p->algBw;
  }
}

}  // namespace

std::string collectiveFromNcclTests(const std::string& name) {
  std::string n = lower(trim(name));
  n = baseName(n);
  if (n.size() > 5 && n.compare(n.size() - 5, 5, "_perf") == 0) n.resize(n.size() - 5);
  for (const CollectiveFacts* c : kCollectives) {
    if (n == c->ncclTestsName) return c->name;
  }
  if (n == "all_to_all") return "alltoall";  // spellings of older nccl-tests logs
  if (n == "send_recv") return "sendrecv";
  return n;
}

bool looksLikeNcclTests(const std::string& text) {
  std::string head = text.substr(0, 65536);
  if (head.find("\"nccl_version\"") != std::string::npos && head.find("\"results\"") != std::string::npos)
    return true;
  return head.find("# nccl-tests version") != std::string::npos ||
         head.find("# Collective test starting") != std::string::npos ||
         head.find("# nThread ") != std::string::npos ||
         (head.find("out-of-place") != std::string::npos && head.find("busbw") != std::string::npos);
}

SweepRun importNcclTestsText(const std::string& text, const std::string& origin, const NcclImportOptions& o) {
  SweepRun run;
  run.metadata.launcher = "nccl-tests";
  std::string version, collective = defaultCollective(o, "");
  std::optional<Layout> layout;  // set inside a table
  int tableStart = 0;
  int tables = 0;
  int firstForeign = 0;
  std::string firstForeignText;
  std::set<int> rankSeen;
  std::size_t tableFirstRow = 0;  // index in run.results of the current table's first row
  long long footerFailures = 0;   // out-of-bounds values reported by footers of error-column tables
  bool noRedopColumn = false, noRootColumn = false;
  bool iterColsNoted = false;
  std::vector<bool> opInferred, rootInferred;  // per row: the layout had no such column
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  auto fail = [&](const std::string& what) {
    return ConfigError(fmt::format("{} line {}: {}", origin, lineNo, what));
  };
  while (std::getline(in, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string t = trim(line);
    if (t.empty() || isNcclLogLine(line)) continue;
    if (t[0] == '#') {
      std::string body = trim(t.substr(1));
      if (body.rfind("nccl-tests version", 0) == 0) {
        auto w = words(body);
        if (w.size() >= 3) version = w[2];
        for (const auto& x : w) {
          if (x.rfind("nccl-library=", 0) == 0) {
            if (auto c = toInt(x.substr(13)))
              run.metadata.versions["nccl"] = decodeNcclVersion(static_cast<int>(*c)).str();
          } else if (x.rfind("nccl-headers=", 0) == 0) {
            if (auto c = toInt(x.substr(13)))
              run.metadata.versions["nccl_header"] = decodeNcclVersion(static_cast<int>(*c)).str();
          }
        }
      } else if (body.rfind("Collective test starting:", 0) == 0) {
        if (o.collective.empty()) collective = collectiveFromNcclTests(body.substr(25));
      } else if (body.rfind("nThread", 0) == 0) {
        parseParamsLine(body, run.args);
      } else if (auto r = parseRankLine(body)) {
        if (rankSeen.insert(r->rank).second) run.metadata.ranks.push_back(*r);
      } else if (auto l = parseHeader(body)) {
        if (layout) {
          throw fail(
              fmt::format("a second table header before the footer of the table that starts at line {}; "
                          "the output is cut or two runs are interleaved.",
                          tableStart));
        }
        layout = l;
        if (!l->iterCols.empty() && !iterColsNoted) {
          run.notes.push_back(fmt::format(
              "the text table's per-iteration columns ({}) are not imported: a few figures per row are not "
              "whole per-iteration statistics. Import nccl-tests' -J JSON to keep them.",
              fmt::join(l->iterCols, " ")));
          iterColsNoted = true;
        }
        tableStart = lineNo;
        tableFirstRow = run.results.size();
      } else if (body.rfind("Out of bounds values", 0) == 0) {
        if (!layout) throw fail("a footer ('Out of bounds values') without a table header before it.");
        if (layout->errorColumn) {
          // The footer is the only count this layout has: 0 vouches for every row of the table; a
          // failure cannot be pinned to a row, so the rows keep no count and the run is marked below.
          if (auto n = footerOutOfBounds(body)) {
            if (*n == 0) {
              for (std::size_t i = tableFirstRow; i < run.results.size(); ++i) {
                for (PlaceResult* p : {&run.results[i].outOfPlace, &run.results[i].inPlace})
                  if (p->measured) p->wrong = 0;
              }
            }
            footerFailures += *n;
          }
        }
      } else if (body.rfind("Avg bus bandwidth", 0) == 0) {
        if (!layout) throw fail("a footer ('Avg bus bandwidth') without a table header before it.");
        auto colon = body.find(':');
        if (colon != std::string::npos) {
          auto w = words(body.substr(colon + 1));
          if (!w.empty())
            run.notes.push_back(fmt::format("nccl-tests reported Avg bus bandwidth {} GB/s{}", w[0],
                                            collective.empty() ? "" : " for " + collective));
        }
        layout.reset();
        ++tables;
      }
      continue;
    }
    if (!layout) {
      // Text outside a table: a launcher banner is tolerated, but remembered for the error below.
      if (firstForeign == 0) {
        firstForeign = lineNo;
        firstForeignText = t;
      }
      continue;
    }
    // A result row.
    const Layout& l = *layout;
    auto w = words(t);
    const std::size_t withoutTs = static_cast<std::size_t>(l.keyCols + l.groupCols() * l.groups);
    const std::size_t expected = withoutTs + (l.timestamp ? 2 : 0);
    if (w.size() != expected && !(l.timestamp && w.size() == withoutTs)) {
      throw fail(
          fmt::format("expected a result row of {} columns ({}) as the header at line {} announces, found "
                      "{}: {}. The output "
                      "is truncated or altered; import the complete nccl-tests output.",
                      withoutTs, l.describe(), tableStart, w.size(), quote(t)));
    }
    SweepMeasurement m;
    m.backend = o.backend;
    m.collective = collective;
    auto size = toInt(w[static_cast<std::size_t>(l.size)]);
    auto count = toInt(w[static_cast<std::size_t>(l.count)]);
    if (!size || !count || *size < 0 || *count < 0) {
      throw fail(
          fmt::format("the size and count columns of {} are not byte and element counts; the row is "
                      "altered or cut.",
                      quote(t)));
    }
    m.bytes = m.requestedBytes = static_cast<std::size_t>(*size);
    m.count = static_cast<std::size_t>(*count);
    m.dtype = dtypeFrom(w[static_cast<std::size_t>(l.type)]);
    m.op = l.redop >= 0 ? lower(w[static_cast<std::size_t>(l.redop)]) : "";  // settled below
    opInferred.push_back(l.redop < 0);
    rootInferred.push_back(l.root < 0);
    noRedopColumn = noRedopColumn || l.redop < 0;
    noRootColumn = noRootColumn || l.root < 0;
    if (l.root >= 0) {
      auto root = toInt(w[static_cast<std::size_t>(l.root)]);
      if (!root) throw fail(fmt::format("the root column of {} is not a rank number.", quote(t)));
      m.root = static_cast<int>(*root);
    }
    for (int g = 0; g < l.groups; ++g) {
      std::size_t b = static_cast<std::size_t>(l.keyCols + l.groupCols() * g);
      auto time = toDouble(w[b]), alg = toDouble(w[b + 1]), bus = toDouble(w[b + 2]);
      auto wrong = parseWrong(w[b + 3], l.errorColumn);
      if (!time || !alg || !bus || !wrong) {
        throw fail(
            fmt::format("the {} columns of {} are not numbers (time algbw busbw {}); the row is altered "
                        "or cut.",
                        g == 0 && l.groups == 2 ? "out-of-place" : "in-place", quote(t),
                        l.errorColumn ? "error" : "#wrong"));
      }
      PlaceResult& p = (g == 0 && l.groups == 2) ? m.outOfPlace : m.inPlace;
      p.measured = true;
      p.iters = run.args.iters;
      p.timeUs = *time;
      p.algBw = *alg;
      p.busBw = *bus;
      p.wrong = *wrong;
    }
    finishRow(m);
    run.results.push_back(std::move(m));
  }
  if (layout) {
    throw ConfigError(fmt::format(
        "{} ends at line {} inside the table that starts at line {}, without nccl-tests' footer ('# Out of "
        "bounds values' and '# Avg bus bandwidth'): the output is truncated (the run was killed or the log "
        "was "
        "cut). Import a complete output.",
        origin, lineNo, tableStart));
  }
  if (tables == 0) {
    if (firstForeign > 0) {
      throw ConfigError(
          fmt::format("{} line {}: {} is not nccl-tests output, and no nccl-tests results table ('#  size  "
                      "count  type ...  "
                      "time  algbw  busbw  #wrong') was found in the file. Give the console output of an "
                      "nccl-tests binary "
                      "(e.g. all_reduce_perf) or its -J JSON.",
                      origin, firstForeign, quote(firstForeignText)));
    }
    throw ConfigError(
        fmt::format("{}: no nccl-tests results table ('#  size  count  type ...  time  algbw  busbw  "
                    "#wrong') was found in its {} line(s); the output is empty or cut before the "
                    "first result.",
                    origin, lineNo));
  }
  if (collective.empty()) {
    throw ConfigError(fmt::format(
        "{} does not say which collective it measured (no '# Collective test starting:' line, as in older "
        "nccl-tests versions). Give it: dsreport import {} --collective allreduce (or allgather, ...).",
        origin, origin));
  }
  for (std::size_t i = 0; i < run.results.size(); ++i) {
    SweepMeasurement& m = run.results[i];
    if (m.collective.empty()) m.collective = collective;
    // Layouts without a redop or root column ran with nccl-tests' defaults (-o sum, -r 0). Newer
    // nccl-tests prints them ("sum", "none", root -1 or 0); filling the same values keeps an old log
    // comparable with the same system's newer ones.
    if (opInferred[i]) m.op = isReducing(m.collective) ? "sum" : "none";
    if (rootInferred[i]) m.root = isRooted(m.collective) ? 0 : -1;
  }
  if (noRedopColumn && isReducing(collective)) {
    run.notes.push_back(
        "This nccl-tests layout has no redop column: its rows are taken as op sum, nccl-tests' default "
        "(-o sum).");
  }
  if (noRootColumn && isRooted(collective)) {
    run.notes.push_back(
        "This nccl-tests layout has no root column: its rows are taken as root 0, nccl-tests' default (-r 0).");
  }
  finishRanks(run.metadata);
  for (auto& m : run.results) {
    m.worldSize = run.metadata.worldSize;
    if (double f = busFactorOf(m.collective, m.worldSize); f > 0) m.busFactor = f;
  }
  if (!version.empty()) run.metadata.versions["nccl_tests"] = version;
  run.metadata.source =
      fmt::format("nccl-tests{} (imported from {})", version.empty() ? "" : " " + version, baseName(origin));
  run.metadata.label = o.label;
  run.args.collectives = {collective};
  run.args.backends = {o.backend};
  std::set<std::string> dtypes, ops;
  for (const auto& m : run.results) {
    if (dtypes.insert(m.dtype).second) run.args.dtypes.push_back(m.dtype);
    if (ops.insert(m.op).second) run.args.ops.push_back(m.op);
  }
  run.summary = summarize(run.results);
  if (footerFailures > 0) {
    // Error-column layouts count failures only in the footer; the run failed even though no row says so.
    run.summary.outOfBounds = std::max(run.summary.outOfBounds, footerFailures);
    run.summary.status = "wrong_data";
    run.notes.push_back(fmt::format(
        "nccl-tests reported {} out-of-bounds value(s). This log layout gives each row's largest error, "
        "not a count, so the sizes that failed are not known; every row shows no count (N/A).",
        footerFailures));
  }
  return run;
}

namespace {

// Per-iteration statistics in a place object or one level below it (format 3), or in the row's
// "<place>_per_iter" object (nccl-tests -I 1, 2.17 and later: its figures, "skipped_iterations" and
// "times_us", every iteration's time, the maximum over processes). nccl-tests' own figures are kept
// as it printed them (its p99 is the nearest rank); p90 and p99.9, which it does not compute, come
// from times_us (the skipped iterations left out) by our interpolation, and stay unknown without it.
IterStats statsFrom(const nlohmann::json& place, const nlohmann::json* perIter, int iters,
                    std::vector<double>& times) {
  IterStats s;
  const nlohmann::json* src = perIter;
  if (!src && place.contains("stdev_us")) {
    src = &place;
  } else if (!src) {
    for (const auto& [k, v] : place.items()) {
      if (v.is_object() && v.contains("stdev_us")) src = &v;
    }
  }
  if (!src) return s;
  auto has = [&](const char* k) { return (*src).contains(k) && (*src)[k].is_number(); };
  auto num = [&](const char* k) { return has(k) ? (*src)[k].get<double>() : 0.0; };
  s.minUs = num("min_us");
  s.maxUs = num("max_us");
  s.avgUs = num("avg_us");
  s.p50Us = num("p50_us");
  s.p95Us = num("p95_us");
  s.p99Us = num("p99_us");
  s.stdevUs = num("stdev_us");
  s.cvPct = num("cv_pct");
  if (has("p90_us")) s.p90Us = num("p90_us");
  if (has("p999_us")) s.p999Us = num("p999_us");
  s.n = has("n") ? readInt<int>((*src)["n"]) : iters;
  if (src->contains("times_us") && (*src)["times_us"].is_array()) {
    times.clear();
    for (const auto& t : (*src)["times_us"]) times.push_back(t.get<double>());
    const auto skipped = static_cast<std::size_t>(
        std::clamp(readIntOr((*src), "skipped_iterations", 0), 0, static_cast<int>(times.size())));
    IterStats mine = computeIterStats(
        std::vector<double>(times.begin() + static_cast<std::ptrdiff_t>(skipped), times.end()));
    if (!has("n")) s.n = mine.n;
    if (!s.p90Us) s.p90Us = mine.p90Us;
    if (!s.p999Us) s.p999Us = mine.p999Us;
  }
  return s;
}

}  // namespace

SweepRun importNcclTestsJson(const nlohmann::json& doc, const std::string& origin,
                             const NcclImportOptions& o) {
  auto bad = [&](const std::string& what) {
    return ConfigError(fmt::format("{} is not an nccl-tests -J result: {}", origin, what));
  };
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    throw bad("it has no \"results\" list.");
  const int version = readFields(doc, origin, "nccl-tests", [&] { return readIntOr(doc, "version", 0); });
  if (version > 3) {
    throw bad(
        fmt::format("its format version is {}, and this dsreport reads versions 1 to 3. Upgrade dsperf, or "
                    "import the text output instead.",
                    version));
  }
  SweepRun run;
  run.metadata.launcher = "nccl-tests";
  try {
    if (doc.contains("args") && doc["args"].is_array()) {
      std::string cl;
      for (const auto& a : doc["args"]) cl += (cl.empty() ? "" : " ") + a.get<std::string>();
      run.metadata.commandLine = cl;
    }
    std::string collective = o.collective.empty() ? "" : collectiveFromNcclTests(o.collective);
    if (collective.empty() && doc.contains("args") && doc["args"].is_array() && !doc["args"].empty())
      collective = collectiveFromNcclTests(doc["args"][0].get<std::string>());
    if (doc.contains("nccl_version") && doc["nccl_version"].is_number_integer())
      run.metadata.versions["nccl"] = decodeNcclVersion(readInt<int>(doc["nccl_version"])).str();
    run.metadata.startTime = textOr(doc, "start_time", "");
    run.metadata.endTime = textOr(doc, "end_time", "");
    // References into doc, not copies: an error's JSON path (JSON_DIAGNOSTICS) then starts at the document.
    static const nlohmann::json kNone = nlohmann::json::object();
    const nlohmann::json& cfg = doc.contains("config") ? doc["config"] : kNone;
    run.args.minBytes = readIntOr(cfg, "minimum_bytes", std::size_t{0});
    run.args.maxBytes = readIntOr(cfg, "maximum_bytes", std::size_t{0});
    run.args.stepFactor = readIntOr(cfg, "step_factor", 0);
    run.args.stepBytes = readIntOr(cfg, "step_bytes", std::size_t{0});
    run.args.warmupIters = readIntOr(cfg, "warmup_iters", 0);
    run.args.iters = readIntOr(cfg, "iterations", 0);
    run.args.check = readIntOr(cfg, "validation", 0);
    static const nlohmann::json kNoDevices = nlohmann::json::array();
    const nlohmann::json& devices = cfg.is_object() && cfg.contains("devices") ? cfg["devices"]
                                    : doc.contains("devices")                 ? doc["devices"]
                                                                              : kNoDevices;
    for (const auto& d : devices) {
      SweepRank r;
      r.rank = readIntOr(d, "rank", 0);
      r.pid = readIntOr<long>(d, "pid", 0L);
      r.host = textOr(d, "hostname", "");
      r.device = fmt::format("cuda:{}", readIntOr(d, "device", 0));
      std::string info = textOr(d, "device_info", "");
      if (!info.empty()) r.device += " " + info;
      run.metadata.ranks.push_back(r);
    }
    finishRanks(run.metadata);
    int index = 0;
    for (const auto& row : doc["results"]) {
      ++index;
      SweepMeasurement m;
      m.backend = o.backend;
      m.collective = collective;
      m.bytes = m.requestedBytes = readInt<std::size_t>(row.at("size"));
      m.count = readInt<std::size_t>(row.at("count"));
      m.dtype = dtypeFrom(row.at("type").get<std::string>());
      m.op = lower(textOr(row, "redop", "none"));
      if (row.contains("root")) {
        const auto& root = row["root"];
        if (root.is_number_integer()) {
          m.root = readInt<int>(root);
        } else if (root.is_string()) {
          auto v = toInt(trim(root.get<std::string>()));
          if (!v) throw bad(fmt::format("result {} has root {}, not a rank number.", index, root.dump()));
          m.root = static_cast<int>(*v);
        }
      }
      int iters = readIntOr(row, "actual_iterations", run.args.iters);
      for (auto [key, place] :
           {std::pair{"out_of_place", &m.outOfPlace}, std::pair{"in_place", &m.inPlace}}) {
        if (!row.contains(key) || row[key].is_null()) continue;
        const auto& p = row[key];
        place->measured = true;
        place->iters = iters;
        place->timeUs = p.contains("time") ? p["time"].get<double>() : p.at("cpu_time").get<double>();
        place->algBw = p.at("alg_bw").get<double>();
        place->busBw = p.at("bus_bw").get<double>();
        place->wrong = p.contains("nwrong") && p["nwrong"].is_number()
                           ? static_cast<long long>(std::llround(p["nwrong"].get<double>()))
                           : -1;
        const std::string perIterKey = std::string(key) + "_per_iter";
        const nlohmann::json* perIter =
            row.contains(perIterKey) && row[perIterKey].is_object() ? &row[perIterKey] : nullptr;
        place->iter = statsFrom(p, perIter, iters, place->timesUs);
      }
      if (!m.outOfPlace.measured && !m.inPlace.measured)
        throw bad(fmt::format("result {} (size {}) has neither out_of_place nor in_place figures.", index,
                              m.bytes));
      m.worldSize = run.metadata.worldSize;
      m.busFactor = busFactorOf(collective, m.worldSize);
      finishRow(m);
      run.results.push_back(std::move(m));
    }
    if (collective.empty()) {
      throw ConfigError(
          fmt::format("{} does not say which collective it measured (no program name in \"args\"). "
                      "Give it: dsreport import {} --collective allreduce (or allgather, ...).",
                      origin, origin));
    }
    run.args.collectives = {collective};
  } catch (const nlohmann::json::exception& e) {
    throw jsonFieldError(e, doc, origin, "nccl-tests");
  }
  run.args.backends = {o.backend};
  std::set<std::string> dtypes, ops;
  for (const auto& m : run.results) {
    if (dtypes.insert(m.dtype).second) run.args.dtypes.push_back(m.dtype);
    if (ops.insert(m.op).second) run.args.ops.push_back(m.op);
  }
  run.metadata.source = fmt::format("nccl-tests -J format {} (imported from {})", version, baseName(origin));
  run.metadata.label = o.label;
  run.summary = summarize(run.results);
  return run;
}

SweepRun importNcclTestsFile(const std::string& path, const NcclImportOptions& o) {
  const std::string text = readInputFile(path);
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    auto doc = nlohmann::json::parse(text, nullptr, false);
    // nccl-tests closes the JSON only when the run ends: a killed run leaves it cut short.
    if (doc.is_discarded()) throw notJsonError(text, path, "nccl-tests");
    return importNcclTestsJson(doc, path, o);
  }
  return importNcclTestsText(text, path, o);
}

}  // namespace ds::report
