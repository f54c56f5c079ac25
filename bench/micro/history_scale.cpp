// ds_history_scale: the per-host history at fleet scale (issue 28, item 4). Generates a history of
// --hosts hosts x --nights nightly runs and measures what an operator waits for: ingest, the query
// API (a host's series, a baseline's last 10 runs per host, a pattern across the fleet, the
// quarantine list), the fleet dashboard's build (`dsreport dashboard --fleet`, in process and as the
// binary) and the page's open time in headless Chromium. It prints figures; it asserts nothing.
//
//   ds_history_scale [--hosts 1000] [--nights 365] [--dir /tmp/ds_history_scale] [--reuse] [--opens 3]
//
// What is generated, and why. One single-host sweep per host per night (dsbench coll on one node's 8
// GPUs: allreduce and allgather at 64 MiB, 256 MiB and 1 GiB), the nightly per-node check as Azure's
// health checks and superbench run it: a fleet-wide run every night needs the whole cluster idle at
// once, which a production cluster rarely is, and per-host runs are the heavier history (1,000 runs
// a night, not one). And one `dsreport check` result a night with every host's verdict.
// - 80% of the hosts are one SKU (H100), 20% another (A100, 0.6 of its bandwidth); each host has its
//   own level (1 % spread) and nightly noise (1 %); NCCL is upgraded on night 180 (+4 % for all).
// - 2 % of the hosts drift down linearly (to -25 % at the end), 1 % lose half their bandwidth for 30
//   nights (an NVLink down) and are repaired; 0.5 % of host-nights are missing (the host was down: no
//   run, and "no result" in that night's check).
// - A host's check is unhealthy when its 1 GiB allreduce is below 90 % of its SKU's nominal figure.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "engine/common/median.h"
#include "reports/baseline/check_schema.h"
#include "reports/history/fleet_data.h"
#include "reports/history/history_schema.h"
#include "reports/history/host_history.h"
#include "reports/history/ingest.h"
#include "reports/history/sqlite_db.h"
#include "reports/html/fleet_dashboard_html.h"
#include "reports/json_io.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using namespace ds::report;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string hostName(int h) { return fmt::format("gpu{:04d}", h + 1); }

// "2026-01-01T01:00:00Z" + night days + minutes.
std::string timeOf(int night, int minutes) {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 1 + night;
  tm.tm_hour = 1;
  tm.tm_min = minutes;
  time_t t = timegm(&tm);
  std::tm out{};
  gmtime_r(&t, &out);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &out);
  return buf;
}

std::string fakeRunId(int night, int host) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : fmt::format("{}|{}", night, host)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

struct Fleet {
  int hosts = 1000, nights = 365;
  std::vector<int> sku;  // 0 H100, 1 A100
  std::vector<double> level;
  std::vector<bool> drifts;
  std::vector<int> breakNight;  // -1 none
  std::mt19937 rng{28};

  void make() {
    std::normal_distribution<double> spread(1.0, 0.01);
    std::uniform_real_distribution<double> u(0, 1);
    for (int h = 0; h < hosts; ++h) {
      sku.push_back(u(rng) < 0.2 ? 1 : 0);
      level.push_back(spread(rng));
      drifts.push_back(u(rng) < 0.02);
      breakNight.push_back(u(rng) < 0.01 ? static_cast<int>(u(rng) * std::max(1, nights - 30)) : -1);
    }
  }
  // The host's factor on a night (before the per-row noise).
  double factor(int h, int night) const {
    double f = level[static_cast<std::size_t>(h)] * (night >= 180 ? 1.04 : 1.0);
    if (drifts[static_cast<std::size_t>(h)]) f *= 1 - 0.25 * night / std::max(1, nights - 1);
    int b = breakNight[static_cast<std::size_t>(h)];
    if (b >= 0 && night >= b && night < b + 30) f *= 0.5;
    return f;
  }
};

const char* kSkuGpu[] = {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"};
const double kSkuScale[] = {1.0, 0.6};
const std::size_t kSizes[] = {std::size_t{64} << 20, std::size_t{256} << 20, std::size_t{1} << 30};
const double kAllreduceBw[] = {250, 330, 370};  // H100 nominal busbw, GB/s

SweepRun makeRun(const Fleet& f, int h, int night, std::mt19937& rng) {
  std::normal_distribution<double> noise(1.0, 0.01);
  const std::string host = hostName(h);
  const int s = f.sku[static_cast<std::size_t>(h)];
  SweepRun run;
  run.args.minBytes = kSizes[0];
  run.args.maxBytes = kSizes[2];
  run.args.stepFactor = 4;
  run.args.iters = 20;
  run.args.warmupIters = 5;
  run.args.check = 1;
  run.args.ops = {"sum"};
  run.args.dtypes = {"f32"};
  run.args.collectives = {"allreduce", "allgather"};
  run.args.backends = {"nccl"};
  SweepMetadata& m = run.metadata;
  m.commandLine = "dsbench coll -c allreduce,allgather -b 64M -e 1G -f 4 --backend nccl -J night.json";
  m.hosts = {host};
  m.worldSize = 8;
  for (int r = 0; r < 8; ++r) m.ranks.push_back({r, r, 0, host, 4000L + r, fmt::format("cuda:{}", r)});
  m.launcher = "dsrun/torchrun";
  m.versions = {{"dsperf", "0.2.0"}, {"git_sha", "590c50f"}, {"nccl", night >= 180 ? "2.23.4" : "2.21.5"}};
  m.env = {{"NCCL_IB_HCA", "mlx5"}, {"NCCL_SOCKET_IFNAME", "ib0"}, {"OMP_NUM_THREADS", "8"}};
  m.startTime = timeOf(night, h % 120);
  m.endTime = timeOf(night, h % 120 + 2);
  ds::hw::HostHardware hw;
  hw.host = host;
  hw.cpuModel = "Intel(R) Xeon(R) Platinum 8480C";
  hw.gpuName = kSkuGpu[s];
  hw.gpus = 8;
  for (int n = 0; n < 8; ++n)
    hw.nics.push_back({fmt::format("mlx5_{}/1", n), "infiniband", "15b3:1021", 400, true});
  m.hardware = {hw};
  const double fac = f.factor(h, night) * kSkuScale[s];
  for (const char* coll : {"allreduce", "allgather"}) {
    for (std::size_t i = 0; i < 3; ++i) {
      SweepMeasurement row;
      row.backend = "nccl";
      row.collective = coll;
      row.dtype = "f32";
      row.op = std::string(coll) == "allreduce" ? "sum" : "none";
      row.worldSize = 8;
      row.requestedBytes = row.bytes = kSizes[i];
      row.count = kSizes[i] / 4;
      row.busFactor = std::string(coll) == "allreduce" ? 1.75 : 0.875;
      for (PlaceResult* p : {&row.outOfPlace, &row.inPlace}) {
        p->measured = true;
        p->iters = 20;
        p->busBw = kAllreduceBw[i] * (std::string(coll) == "allgather" ? 0.95 : 1.0) * fac * noise(rng) *
                   (p == &row.inPlace ? 1.01 : 1.0);
        p->algBw = p->busBw / row.busFactor;
        p->timeUs = static_cast<double>(row.bytes) / (p->algBw * 1e3);
        p->wrong = 0;
        p->iter = computeIterStats({p->timeUs * 0.99, p->timeUs, p->timeUs * 1.02});
        p->slowestRank = 3;
        p->spreadPct = 1.2;
      }
      run.results.push_back(std::move(row));
    }
  }
  run.summary = summarize(run.results);
  return run;
}

int generate(const Fleet& f, const std::string& db) {
  std::mt19937 rng(2028);
  std::uniform_real_distribution<double> u(0, 1);
  auto t0 = Clock::now();
  std::size_t runs = 0;
  for (int night = 0; night < f.nights; ++night) {
    std::vector<history::IngestRecord> records;
    CheckReport check;
    check.time = timeOf(night, 240);
    check.baselineId = "b000000000000001";
    check.k = 1;
    check.n = 1;
    for (int h = 0; h < f.hosts; ++h) {
      const int s = f.sku[static_cast<std::size_t>(h)];
      HostCheck v;
      v.host = hostName(h);
      v.sku = fmt::format("gpu=8x{}", kSkuGpu[s]);
      if (u(rng) < 0.005) {  // the host was down
        v.state = CheckState::kNoResult;
        v.summary = "ERROR: No results reported";
        check.hosts.push_back(v);
        continue;
      }
      SweepRun run = makeRun(f, h, night, rng);
      const double measured = run.results[2].outOfPlace.busBw, nominal = kAllreduceBw[2] * kSkuScale[s];
      CheckFinding fd;
      fd.rule = "allreduce_1g_floor";
      fd.kind = "floor";
      fd.pattern = "busbw allreduce nccl f32 sum 1073741824 out w8";
      fd.metric = "busbw";
      fd.bytes = kSizes[2];
      fd.unit = "GB/s";
      fd.measured = measured;
      fd.expected = nominal;
      fd.threshold = 0.9 * nominal;
      fd.runs = 1;
      fd.failedRuns = measured < fd.threshold ? 1 : 0;
      fd.passed = fd.failedRuns == 0;
      fd.text = fmt::format("busbw {:.1f} GB/s at 1 GiB, expected >= {:.1f} GB/s", measured, fd.threshold);
      v.findings = {fd};
      v.state = fd.passed ? CheckState::kHealthy : CheckState::kUnhealthy;
      v.summary = fd.passed ? "Healthy"
                            : fmt::format("ERROR: allreduce_1g_floor: expected {:.1f}, measured {:.1f}",
                                          fd.threshold, measured);
      check.hosts.push_back(v);
      history::IngestRecord rec;
      rec.path = fmt::format("nightly/{:03d}/{}.json", night, hostName(h));
      RunFile file;
      file.kind = RunKind::kSweep;
      file.schemaVersion = "1.0";
      file.runId = fakeRunId(night, h);
      file.sweep = std::move(run);
      rec.run = std::move(file);
      records.push_back(std::move(rec));
    }
    history::IngestRecord c;
    c.path = fmt::format("nightly/{:03d}/check.json", night);
    c.check = std::move(check);
    records.push_back(std::move(c));
    auto rep = history::ingestRecords(db, std::move(records));
    if (rep.rejected) {
      std::fprintf(stderr, "ds_history_scale: night %d: %d record(s) rejected: %s\n", night, rep.rejected,
                   rep.files.front().reason.c_str());
      return 1;
    }
    runs += static_cast<std::size_t>(rep.added - 1);
    if ((night + 1) % 30 == 0 || night + 1 == f.nights)
      std::printf("  ingested %d night(s), %zu runs, %.0f s (%.0f runs/s)\n", night + 1, runs, since(t0),
                  static_cast<double>(runs) / since(t0));
    std::fflush(stdout);
  }
  std::printf("ingest: %zu runs and %d checks in %.1f s (one transaction a night)\n", runs, f.nights,
              since(t0));
  return 0;
}

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a command, returns its stdout and the wall seconds.
std::string capture(const std::string& cmd, double& seconds, int& status) {
  auto t0 = Clock::now();
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    status = -1;
    return out;
  }
  char buf[65536];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  status = pclose(p);
  seconds = since(t0);
  return out;
}

std::string bodyAttr(const std::string& dom, const std::string& name) {
  auto at = dom.find("<body");
  if (at == std::string::npos) return "";
  auto end = dom.find('>', at);
  std::smatch m;
  std::string body = dom.substr(at, end - at);
  if (std::regex_search(body, m, std::regex(name + "=\"([^\"]*)\""))) return m[1];
  return "";
}

std::string chromium() {
  if (const char* env = std::getenv("DS_CHROMIUM"); env && *env) return env;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds_history_scale: the per-host history and the fleet dashboard at 1,000 hosts x 365 nights"};
  Fleet f;
  std::string dir = "/tmp/ds_history_scale";
  bool reuse = false;
  int opens = 3;
  app.add_option("--hosts", f.hosts, "hosts")->check(CLI::Range(2, 100000));
  app.add_option("--nights", f.nights, "nightly runs per host")->check(CLI::Range(2, 5000));
  app.add_option("--dir", dir, "where the database and the page go");
  app.add_flag("--reuse", reuse,
               "keep the database of an earlier run of the same size instead of generating it");
  app.add_option("--opens", opens, "times the page is opened in Chromium")->check(CLI::Range(0, 20));
  CLI11_PARSE(app, argc, argv);
  f.make();
  fs::create_directories(dir);
  const std::string db = dir + "/history.sqlite", page = dir + "/fleet.html";
  const std::string sizeMark = dir + "/history.size";
  std::string wanted = fmt::format("{}x{}", f.hosts, f.nights), have;
  std::ifstream(sizeMark) >> have;
  std::printf("ds_history_scale: %d hosts x %d nights in %s\n", f.hosts, f.nights, db.c_str());
  if (!reuse || have != wanted || !fs::exists(db)) {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
    fs::remove(sizeMark);
    if (int rc = generate(f, db)) return rc;
    std::ofstream(sizeMark) << wanted;
  } else {
    std::printf("ingest: reusing the database of an earlier run\n");
  }
  {
    history::Database d(db, history::Database::Mode::kExisting, 30000);
    d.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  auto countOf = [&](const char* sql) {
    return history::Database(db, history::Database::Mode::kExisting, 30000).queryInt(sql);
  };
  std::printf("database: %.0f MiB (%lld runs, %lld samples, %lld host checks)\n",
              static_cast<double>(fs::file_size(db)) / (1 << 20),
              static_cast<long long>(countOf("SELECT count(*) FROM runs")),
              static_cast<long long>(countOf("SELECT count(*) FROM samples")),
              static_cast<long long>(countOf("SELECT count(*) FROM host_checks")));

  // The query API, each on a fresh connection (a cold page cache is not simulated: the OS keeps the
  // file after ingest; the first query below is as warm as a dashboard run right after ingest).
  auto timed = [&](const char* what, auto&& fn) {
    auto t0 = Clock::now();
    std::size_t n = fn();
    std::printf("query: %-52s %8zu rows %7.3f s\n", what, n, since(t0));
  };
  history::Database d(db, history::Database::Mode::kExisting, 30000);
  history::prepareForRead(d);
  const std::string host = hostName(f.hosts / 2);
  timed("loadSamples: one host, every pattern, all time", [&] {
    history::SampleFilter s;
    s.hosts = {host};
    return history::loadSamples(d, s).size();
  });
  timed("loadSamples: one pattern, every host, last 10 runs", [&] {
    history::SampleFilter s;
    s.patterns = {"busbw allreduce nccl f32 sum 1073741824 out w8"};
    s.scopes = {"host"};
    s.lastRuns = 10;
    return history::loadSamples(d, s).size();
  });
  timed("loadSamples: one pattern, every host, all time", [&] {
    history::SampleFilter s;
    s.patterns = {"busbw allreduce nccl f32 sum 1073741824 out w8"};
    return history::loadSamples(d, s).size();
  });
  timed("loadSamples: one pattern, every host, last 30 days", [&] {
    history::SampleFilter s;
    s.patterns = {"busbw allreduce nccl f32 sum 1073741824 out w8"};
    s.since = timeOf(f.nights - 30, 0);
    return history::loadSamples(d, s).size();
  });
  timed("loadHostChecks: one host, all", [&] { return history::loadHostChecks(d, {host}).size(); });
  timed("quarantine: 2 of the last 3 checks", [&] { return history::quarantine(d, 2, 3).size(); });
  timed("listPatterns (counts every sample)", [&] { return history::listPatterns(d).size(); });

  // The fleet dashboard, in process: query, render, write.
  auto t0 = Clock::now();
  history::FleetData data = history::queryFleet(db);
  const double query = since(t0);
  auto t1 = Clock::now();
  std::string html = html::renderFleetDashboard(data);
  const double render = since(t1);
  auto t2 = Clock::now();
  writeTextAtomic(page, html);
  const double write = since(t2);
  std::printf(
      "dashboard --fleet (in process): query %.2f s, render %.2f s, write %.2f s, total %.2f s (target < 10 "
      "s)\n",
      query, render, write, query + render + write);
  std::printf("page: %.2f MiB, %zu hosts x %zu columns x %zu patterns, %zu quarantined\n",
              static_cast<double>(html.size()) / (1 << 20), data.hosts.size(), data.columns.size(),
              data.patterns.size(), data.quarantine.size());
  std::size_t cellsBytes = 0;
  for (const auto& p : data.patterns) cellsBytes += (p.cells.size() + 2) / 3 * 4;
  std::printf("page: of which cells (base64) %.2f MiB\n", static_cast<double>(cellsBytes) / (1 << 20));

  // The same as the binary does it (process start, open, migrate check, query, render, atomic write).
  std::string self = fs::canonical("/proc/self/exe").parent_path().string();
  if (fs::exists(self + "/dsreport")) {
    double s = 0;
    int status = 0;
    capture(shellQuote(self + "/dsreport") + " dashboard --fleet --db " + shellQuote(db) + " -o " +
                shellQuote(dir + "/fleet-cli.html") + " >/dev/null",
            s, status);
    std::printf("dashboard --fleet (dsreport binary): %.2f s wall, exit %d\n", s, WEXITSTATUS(status));
  }

  const std::string browser = chromium();
  if (browser.empty() || opens == 0) {
    std::printf("chromium: not found ($DS_CHROMIUM, /usr/bin/chromium): open time not measured\n");
    return 0;
  }
  const std::string blank = dir + "/blank.html";
  writeTextAtomic(blank, "<!DOCTYPE html><html><body data-ready=\"1\">blank</body></html>\n");
  auto open = [&](const std::string& file, double& wall, std::string& dom) {
    const std::string profile = dir + "/chromium-profile";
    fs::remove_all(profile);
    int status = 0;
    dom = capture(shellQuote(browser) +
                      " --headless --no-sandbox --disable-gpu --user-data-dir=" + shellQuote(profile) +
                      " --dump-dom " + shellQuote("file://" + fs::absolute(file).string()) + " 2>/dev/null",
                  wall, status);
  };
  std::vector<double> blankWall, pageWall, readyMs;
  std::string dom;
  for (int i = 0; i < opens; ++i) {
    double w = 0;
    open(blank, w, dom);
    blankWall.push_back(w);
    open(page, w, dom);
    pageWall.push_back(w);
    std::string ready = bodyAttr(dom, "data-fleet-ready-ms");
    readyMs.push_back(ready.empty() ? -1 : std::stod(ready));
    std::printf(
        "chromium open %d: blank page %.2f s wall; fleet page %.2f s wall, ready at %s ms after navigation "
        "start, %s cells drawn, %s chart errors\n",
        i + 1, blankWall.back(), w, ready.empty() ? "?" : ready.c_str(),
        bodyAttr(dom, "data-fleet-cells-drawn").c_str(), bodyAttr(dom, "data-chart-errors").c_str());
  }
  std::printf(
      "chromium (median of %d): page ready %.0f ms after navigation start (target < 3 s); whole headless "
      "run %.2f s, of which browser start and teardown about %.2f s (a blank page)\n",
      opens, ds::median(readyMs), ds::median(pageWall), ds::median(blankWall));
  return 0;
}
