// `dsdiag hang DUMPS... [--logs FILES] [--ras FILE] [--fleet diag.json] [--json FILE]`: reads every
// rank's Flight Recorder dump (torch's or dsperf's) and the other evidence given, names the rank
// that stopped the job (diag/hang/analyse.h), prints the verdict and writes the JSON report.
#pragma once

#include <string>
#include <vector>

namespace ds::diag::hang {

struct HangCommand {
  std::vector<std::string> dumps;  // files, directories or globs
  std::vector<std::string> logs;   // rank logs: files, directories or globs
  std::string ras;                 // an NCCL RAS answer (text or JSON)
  std::string fleet;               // dsdiag --world --json output
  std::string jsonPath;            // the dsperf.hang report
};

// Exit codes (reports/diag/hang_schema.h): 0 no fault found, 1 cannot decide, 2 culprit found,
// 3 bad input (nothing readable, a path that does not exist). Prints to stdout; errors to stderr.
int runHang(const HangCommand& command);

}  // namespace ds::diag::hang
