#include "diag/diag.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "diag/explain.h"
#include "diag/world/world_mode.h"
#include "reports/diag/fleet_text.h"
#include "engine/common/error.h"
#include "engine/common/net.h"
#include "engine/common/version.h"
#include "reports/diag/diag_text.h"
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

int runDiag(const DiagCommand& cmd) {
  env::ProcessEnv penv;
  validateSelection(cmd.selection);
  bool color = useColor(cmd.color, penv);
  if (cmd.list) {
    std::fputs(listText().c_str(), stdout);
    return kExitPass;
  }
  if (cmd.options.timeout.count() <= 0) throw ConfigError("--timeout must be positive (seconds).");
  Context ctx(penv, cmd.options);
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
    if (!cmd.jsonPath.empty()) report::writeJsonAtomic(cmd.jsonPath, report::diagToJson(rep));
    return exitCodeUnder(cmd.failOn, report::diagExitCode(rep.checks));
  }
  auto outcome = runWorld(ctx, cmd.selection, toolVersion());
  outcome.exitCode = exitCodeUnder(cmd.failOn, outcome.exitCode);  // rank 0 publishes the code every rank exits with
  if (outcome.root) {
    std::fputs(report::formatDiagText(outcome.report, text).c_str(), stdout);
    if (!cmd.jsonPath.empty()) {
      // With a failed rendezvous every rank reports alone: one file per rank.
      std::string path = outcome.report.mode == "world" || outcome.rank <= 0
                             ? cmd.jsonPath
                             : fmt::format("{}.rank{}", cmd.jsonPath, outcome.rank);
      try {
        report::writeJsonAtomic(path, report::diagToJson(outcome.report));
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
    std::fputs(report::formatDiagRankLine(outcome.rank, outcome.report.host, outcome.report.checks, outcome.exitCode).c_str(),
               stdout);
  }
  std::fflush(stdout);
  finishWorld(outcome);
  return outcome.exitCode;
}

int runExplain(const std::string& text) {
  auto found = explain(text);
  std::fputs(formatExplanations(text, found).c_str(), stdout);
  return found.empty() ? 1 : 0;
}

}  // namespace ds::diag
