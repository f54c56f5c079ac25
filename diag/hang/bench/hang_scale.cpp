// ds_hang_scale: `dsdiag hang` at fleet scale (issue 37, item 6). Synthesises a hung job's Flight
// Recorder dumps (synth_job.h: by default 16,384 ranks x 2,000 entries, torch's pickle, one rank
// stalled), runs the real `dsdiag hang DIR --json FILE` and `dsreport html FILE` on them, and prints
// the wall time, CPU time and peak RSS of each (wait4's rusage of the child), the input and output
// sizes, and whether the verdict names the stalled rank. Figures are printed, not asserted: the
// targets (< 30 s, < 4 GiB on the 2-core development machine) are judged by whoever reads them
// (docs/performance.md). The exit status is 1 only when a tool fails or the verdict is wrong, so a
// small run in the test suite (hang.scale_smoke) keeps the benchmark and the analysis honest.
//
//   ds_hang_scale [--ranks 16384] [--entries 2000] [--tp 8] [--dir DIR] [--reuse] [--keep]
//                 [--bin DIR]
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "diag/hang/bench/synth_job.h"
#include "engine/common/error.h"
#include "reports/diag/hang_schema.h"
#include "reports/json_io.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using namespace ds::diag::hang::bench;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Child {
  int exitCode = -1;
  double wallS = 0, userS = 0, sysS = 0;
  double peakRssMiB = 0;
};

// Runs argv with stdout and stderr into `log`; the child's own rusage (not this process's).
Child runTimed(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw ds::IoError(fmt::format("cannot fork to run {}: {}", argv[0], ds::errnoText(errno)));
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  rusage ru{};
  while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  Child c;
  c.wallS = since(t0);
  c.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  c.userS = static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6;
  c.sysS = static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6;
  c.peakRssMiB = static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
  return c;
}

std::string firstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

void printChild(const char* what, const Child& c) {
  std::printf("%-16s %7.2f s wall, %7.2f s user, %6.2f s sys, peak RSS %7.0f MiB, exit %d\n", what, c.wallS,
              c.userS, c.sysS, c.peakRssMiB, c.exitCode);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds_hang_scale: dsdiag hang and its HTML page on a synthetic hung job of 16,384 ranks"};
  SynthJob job;
  std::string dir, bin;
  bool reuse = false, keep = false;
  app.add_option("--ranks", job.ranks, "ranks (each leaves one dump)")->check(CLI::Range(2, 1 << 20));
  app.add_option("--entries", job.entries, "entries per dump (the ring buffer)")->check(CLI::Range(8, 10'000'000));
  app.add_option("--tp", job.tp, "ranks per tensor-parallel group")->check(CLI::Range(1, 1024));
  app.add_option("--dir", dir, "where the dumps go (default /tmp/ds_hang_scale_<ranks>x<entries>)");
  app.add_flag("--reuse", reuse, "keep the dumps of an earlier run of the same size instead of writing them");
  app.add_flag("--keep", keep, "leave the dumps, the report and the page behind");
  app.add_option("--bin", bin, "the folder of dsdiag and dsreport (default: this program's)");
  CLI11_PARSE(app, argc, argv);
  try {
    job = job.resolved();
    if (dir.empty()) dir = fmt::format("/tmp/ds_hang_scale_{}x{}", job.ranks, job.entries);
    if (bin.empty()) bin = fs::canonical("/proc/self/exe").parent_path().string();
    const std::string dumps = dir + "/dumps", json = dir + "/hang.json", page = dir + "/hang.html";
    const std::string mark = dir + "/job.txt";
    const std::string wanted = fmt::format("{} {} {} {} {}", job.ranks, job.entries, job.tp, job.culprit, job.faultStep);
    std::string have;
    std::getline(std::ifstream(mark), have);
    std::printf("ds_hang_scale: %d ranks x %d entries (tp %d, culprit rank %d) in %s\n", job.ranks, job.entries,
                job.tp, job.culprit, dumps.c_str());
    if (!reuse || have != wanted) {
      fs::remove_all(dir);
      fs::create_directories(dumps);
      const auto t0 = Clock::now();
      const std::uint64_t bytes = writeSynthDumps(job, dumps);
      std::printf("dumps: wrote %d files, %.2f GiB (%.0f KiB each) in %.1f s\n", job.ranks,
                  static_cast<double>(bytes) / (1 << 30), static_cast<double>(bytes) / job.ranks / 1024, since(t0));
      std::ofstream(mark) << wanted << "\n";
    } else {
      std::uint64_t bytes = 0;
      for (const auto& e : fs::directory_iterator(dumps)) bytes += e.file_size();
      std::printf("dumps: reusing %.2f GiB from an earlier run\n", static_cast<double>(bytes) / (1 << 30));
    }

    const Child hang = runTimed({bin + "/dsdiag", "hang", dumps, "--json", json}, dir + "/hang.txt");
    printChild("dsdiag hang", hang);
    const Child html = runTimed({bin + "/dsreport", "html", json, "-o", page}, dir + "/html.txt");
    printChild("dsreport html", html);
    bool ok = hang.exitCode == 2 && html.exitCode == 0;
    if (fs::exists(json) && fs::exists(page)) {
      std::printf("report: %.1f MiB JSON, page %.2f MiB\n", static_cast<double>(fs::file_size(json)) / (1 << 20),
                  static_cast<double>(fs::file_size(page)) / (1 << 20));
    }
    std::printf("verdict: %s\n", firstLine(dir + "/hang.txt").c_str());
    const SynthExpectation want = expectationOf(job);
    if (fs::exists(json)) {
      const auto r = ds::report::hangReportFromJson(ds::report::readJson(json), json);
      auto at = [&](const SynthExpectation::Place& p) {
        return r.culprits[0].group.pgName == p.pgName && r.culprits[0].seq == p.seq;
      };
      const bool right = r.culprits.size() == 1 && r.culprits[0].rank == want.culprit &&
                         ds::report::faultKindName(r.culprits[0].kind) == want.kind && (at(want.dp) || at(want.tp));
      std::printf("check: %s (expected rank %d, %s, in all_reduce #%lld of group %s or #%lld of group %s; %zu "
                  "culprit(s) named)\n",
                  right ? "the verdict names the stalled rank" : "WRONG VERDICT", want.culprit, want.kind.c_str(),
                  static_cast<long long>(want.dp.seq), want.dp.pgName.c_str(), static_cast<long long>(want.tp.seq),
                  want.tp.pgName.c_str(), r.culprits.size());
      ok = ok && right;
    } else {
      std::printf("check: dsdiag hang wrote no report; its output is in %s/hang.txt\n", dir.c_str());
      ok = false;
    }
    if (!ok) std::printf("FAILED: the tools' output is in %s (hang.txt, html.txt)\n", dir.c_str());
    if (ok && !keep && !reuse) fs::remove_all(dir);
    return ok ? 0 : 1;
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds_hang_scale: %s\n", e.what());
    return 2;
  }
}
