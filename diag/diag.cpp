#include "diag/diag.h"

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "diag/explain.h"
#include "diag/world/world_mode.h"
#include "engine/common/error.h"
#include "engine/common/version.h"
#include "engine/host/net.h"
#include "reports/diag/diag_text.h"
#include "reports/diag/fleet_text.h"
#include "reports/export/junit.h"
#include "reports/json_io.h"

namespace ds::diag {

std::string toolVersion() { return ds::versionWithCommit(); }

namespace {

bool useColor(const std::string& mode, const env::EnvSource& env) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  if (mode != "auto") {
    throw ConfigError(fmt::format("--color={} is not valid; use auto, always or never.", mode));
  }
  return isatty(STDOUT_FILENO) == 1 && !env.get("NO_COLOR");
}

std::string listText() {
  std::string out;
  for (const auto& c : localChecks()) out += fmt::format("{:<28} {}\n", c.id, c.title);
  for (const auto& c : worldChecks()) out += fmt::format("{:<28} {} (--world)\n", c.id, c.title);
  return out;
}

}  // namespace

FailOn parseFailOn(const std::string& text) {
  if (text == "warn") return FailOn::kWarn;
  if (text == "fail") return FailOn::kFail;
  throw ConfigError(fmt::format(
      "--fail-on={} is not valid; use warn (exit 1 on warnings, the default) or fail (exit non-zero only on "
      "a failure).",
      text));
}

int exitCodeUnder(FailOn policy, int code) {
  return policy == FailOn::kFail && code == kExitWarn ? kExitPass : code;
}

std::string perRankPath(const std::string& path, int rank, bool keepExtension) {
  if (rank <= 0) return path;
  const std::string ext = ".xml";
  if (keepExtension && path.size() > ext.size() &&
      path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return fmt::format("{}.rank{}{}", path.substr(0, path.size() - ext.size()), rank, ext);
  return fmt::format("{}.rank{}", path, rank);
}

namespace {

void writeJunit(const DiagCommand& cmd, const std::string& path, const report::DiagReport& rep) {
  const auto warn = cmd.failOn == FailOn::kFail ? report::JunitWarn::kPass : report::JunitWarn::kFailure;
  report::writeTextAtomic(path, report::junitOfDiag(rep, warn, report::junitTimestampNow()));
}

// runDiag's work; `junitWritten` tells runDiag whether the findings reached the JUnit file, and
// `rank` which rank this process is (for where a failure is reported).
int runChecks(const DiagCommand& cmd, bool& junitWritten, int& rank) {
  env::ProcessEnv penv;
  validateSelection(cmd.selection);
  bool color = useColor(cmd.color, penv);
  if (cmd.list) {
    std::fputs(listText().c_str(), stdout);
    return kExitPass;
  }
  if (cmd.options.timeout.count() <= 0) throw ConfigError("--timeout must be positive (seconds).");
  Context ctx(penv, cmd.options);
  rank = ctx.rank();
  report::DiagTextOptions text{color, cmd.verbose, cmd.failOn == FailOn::kFail};
  if (!cmd.options.world) {
    ctx.probeAll();
    report::DiagReport rep;
    rep.mode = "local";
    rep.host = net::hostName();
    rep.toolVersion = toolVersion();
    rep.worldSize = ctx.worldSize();
    rep.checks = runLocalChecks(ctx, cmd.selection, ctx.rank(), rep.host);
    std::fputs(report::formatDiagText(rep, text).c_str(), stdout);
    std::fflush(stdout);
    // Both files are attempted; the first failure is then reported (exit 3).
    std::exception_ptr failed;
    if (!cmd.jsonPath.empty()) {
      try {
        report::writeJsonAtomic(cmd.jsonPath, report::diagToJson(rep));
      } catch (const std::exception&) {
        failed = std::current_exception();
      }
    }
    if (!cmd.junitPath.empty()) {
      try {
        writeJunit(cmd, cmd.junitPath, rep);
        junitWritten = true;
      } catch (const std::exception&) {
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    return exitCodeUnder(cmd.failOn, report::diagExitCode(rep.checks));
  }
  auto outcome = runWorld(ctx, cmd.selection, toolVersion());
  outcome.exitCode = exitCodeUnder(cmd.failOn, outcome.exitCode);  // rank 0 publishes the code every rank exits with
  if (outcome.root) {
    std::fputs(report::formatDiagText(outcome.report, text).c_str(), stdout);
    // With a failed rendezvous every rank reports alone: one file per rank.
    const int fileRank = outcome.report.mode == "world" ? 0 : outcome.rank;
    if (!cmd.jsonPath.empty()) {
      try {
        report::writeJsonAtomic(perRankPath(cmd.jsonPath, fileRank, false),
                                report::diagToJson(outcome.report));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dsdiag: error: %s\n", e.what());
      }
    }
    if (!cmd.junitPath.empty()) {
      try {
        writeJunit(cmd, perRankPath(cmd.junitPath, fileRank, true), outcome.report);
        junitWritten = true;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dsdiag: error: %s\n", e.what());
      }
    }
    if (!cmd.excludeFile.empty()) {
      try {
        if (outcome.report.fleet) {
          report::writeExcludeFile(cmd.excludeFile, outcome.report.fleet->judgement);
        } else {
          std::fprintf(stderr, "dsdiag: --exclude-file %s was not written: this rank could not join the job, so "
                       "there are no per-host verdicts (see world.rendezvous above).\n", cmd.excludeFile.c_str());
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dsdiag: error: %s\n", e.what());
      }
    }
  } else {
    junitWritten = true;  // not this rank's file to write
    std::fputs(report::formatDiagRankLine(outcome.rank, outcome.report.host, outcome.report.checks, outcome.exitCode).c_str(),
               stdout);
  }
  std::fflush(stdout);
  finishWorld(outcome);
  return outcome.exitCode;
}

}  // namespace

int runDiag(const DiagCommand& cmd) {
  bool junitWritten = false;
  int rank = 0;
  try {
    return runChecks(cmd, junitWritten, rank);
  } catch (const std::exception& e) {
    // The CI still gets a JUnit file, saying why there are no results (one file: rank 0's).
    if (!cmd.junitPath.empty() && !junitWritten && !cmd.list && rank <= 0) {
      try {
        report::writeTextAtomic(
            cmd.junitPath,
            report::junitOfToolError("dsdiag", net::hostName(), report::junitTimestampNow(), e.what()));
      } catch (const std::exception&) {
        // The original error is the one to report.
      }
    }
    throw;
  }
}

int runExplain(const std::string& text) {
  auto found = explain(text);
  std::fputs(formatExplanations(text, found).c_str(), stdout);
  return found.empty() ? 1 : 0;
}

}  // namespace ds::diag
