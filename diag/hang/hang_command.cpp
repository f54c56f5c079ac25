#include "diag/hang/hang_command.h"

#include <fmt/format.h>

#include <cstdio>

#include "diag/hang/analyse.h"
#include "diag/hang/dump_reader.h"
#include "diag/hang/evidence_reader.h"
#include "engine/common/error.h"
#include "reports/diag/hang_text.h"
#include "reports/json_io.h"

namespace ds::diag::hang {

namespace {

// Logs and the fleet report name hosts; RAS often gives addresses. Ranks are tied to hosts by the
// first source (evidence_reader.h), so the named sources go first.
ExternalEvidence readEvidence(const HangCommand& c) {
  ExternalEvidence ev;
  auto from = [](const char* flag, auto&& read) {
    try {
      read();
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: {}", flag, e.what()));
    }
  };
  if (!c.logs.empty()) from("--logs", [&] { readLogs(c.logs, ev); });
  if (!c.fleet.empty()) from("--fleet", [&] { readFleetJson(c.fleet, ev); });
  if (!c.ras.empty()) from("--ras", [&] { readRas(c.ras, ev); });
  joinAddresses(ev);
  return ev;
}

}  // namespace

int runHang(const HangCommand& c) {
  try {
    const ExternalEvidence evidence = readEvidence(c);
    const DumpFiles files = findDumpFiles(c.dumps);
    // Each dump is digested and dropped before the next is read (a few are read ahead on other
    // threads): memory holds the digests of all ranks and a handful of dumps, not 16,384 dumps.
    HangAnalysis analysis;
    std::vector<std::string> problems = files.problems;
    ReadOptions read;
    read.threads = defaultReadThreads();
    const std::size_t dumps = forEachDump(files, [&](RankDump&& d) { analysis.add(d); }, problems, read);
    if (dumps == 0) {
      problems.insert(problems.end(), evidence.problems.begin(), evidence.problems.end());
      std::fprintf(stderr, "dsdiag hang: no dump could be read:\n");
      for (const auto& p : problems) std::fprintf(stderr, "  %s\n", p.c_str());
      return report::kHangBadInputExit;
    }
    for (auto& p : problems) analysis.addProblem(std::move(p));
    const report::HangReport r = analysis.finish(evidence);
    std::fputs(report::formatHangText(r).c_str(), stdout);
    if (!c.jsonPath.empty()) {
      report::writeJsonAtomic(c.jsonPath, report::toJson(r));
      std::printf("Report: %s\n", c.jsonPath.c_str());
    }
    return report::hangExitCode(r.verdict);
  } catch (const Error& e) {
    std::fprintf(stderr, "dsdiag hang: error: %s\n", e.what());
    return report::kHangBadInputExit;
  }
}

}  // namespace ds::diag::hang
