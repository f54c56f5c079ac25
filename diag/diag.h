// dsdiag as a library call: main.cpp binds flags into DiagCommand and calls runDiag.
#pragma once

#include <string>

#include "diag/registry.h"

namespace ds::diag {

inline constexpr int kExitPass = 0;
inline constexpr int kExitWarn = 1;
inline constexpr int kExitFail = 2;
inline constexpr int kExitToolError = 3;  // usage error, or dsdiag itself could not run

// Which findings make dsdiag exit non-zero (--fail-on). kWarn (the default) keeps the codes above; kFail
// lets warnings pass (exit 0), so that launchers (dsrun, torchrun, srun) treat advice as success and
// only a failure stops the job. The JSON report keeps the findings' own code in summary.exit_code.
enum class FailOn { kWarn, kFail };

// "warn" or "fail"; anything else is a ConfigError naming the flag and the valid values.
FailOn parseFailOn(const std::string& text);

// The exit code under a policy: warnings (1) become 0 under kFail; other codes are unchanged.
int exitCodeUnder(FailOn policy, int code);

// Where a rank that reports alone (world mode, failed rendezvous) writes the file asked for as `path`:
// the path itself on rank 0 (or below), else "<stem>.rank<N><ext>" for a JUnit .xml ("r.xml" ->
// "r.rank3.xml", so that CI globs on *.xml still match) and "<path>.rank<N>" otherwise.
std::string perRankPath(const std::string& path, int rank, bool keepExtension);

struct DiagCommand {
  DiagOptions options;
  Selection selection;
  std::string jsonPath;
  std::string excludeFile;  // world mode: suspects as a Slurm hostlist (reports/diag fleet text)
  // JUnit XML of the findings (reports/export/junit.h), for CI test views; written on rank 0 (a rank
  // reporting alone: "<name>.rank<N>.xml"), also when checks fail, and with one error case when
  // dsdiag could not finish.
  std::string junitPath;
  bool list = false;
  bool verbose = false;
  std::string color = "auto";  // auto (on a TTY, unless NO_COLOR), always, never
  FailOn failOn = FailOn::kWarn;
};

// Runs the checks (local or world), prints the report to stdout, writes JSON and JUnit when asked, and
// returns the exit code (0 pass, 1 warnings, 2 a failure; warnings give 0 under FailOn::kFail). Throws
// ConfigError for misuse (bad --only, bad --color) and IoError when the JSON or JUnit cannot be
// written; main maps those to 3.
int runDiag(const DiagCommand& cmd);

// `dsdiag explain <text>`: prints the matches; exit 0 when something matched, 1 when nothing did.
int runExplain(const std::string& text);

// dsperf's version, as recorded in reports.
std::string toolVersion();

}  // namespace ds::diag
