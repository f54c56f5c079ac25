// Import of nccl-tests results (NVIDIA/nccl-tests, REFERENCE.md §5) into a dsperf sweep, so that a
// team's existing nccl-tests history sits on the same dashboard and compares with dsbench runs.
//
// Text: the console output of any recent version. The table header ('#  size  count  type  redop
// root  time  algbw  busbw  #wrong ...') decides the layout: with or without redop and root, "#wrong"
// or the older "error" column, an optional timestamp column, "N/A" when the check was off. Comment
// lines give the version ('# nccl-tests version ...'), the collective ('# Collective test starting:
// all_reduce_perf'), the flags ('# nThread 1 nGpus 1 minBytes ...') and the ranks ('#  Rank  0 Group
// 0 Pid 123 on host device  0 [0000:07:00] NVIDIA H100'). NCCL's own log lines ('host:pid:tid NCCL
// INFO ...') are skipped. Several tables in one file (concatenated outputs) are read in order.
//
// JSON: the -J file (format versions 1 to 3): config, devices, results with out_of_place / in_place
// {time, alg_bw, bus_bw, nwrong} and, where present, per-iteration statistics (min_us ... cv_pct).
//
// Errors are ConfigErrors that name the file and line and say what was expected: foreign text (no
// table header anywhere), a row cut short or altered, a table without its footer (a truncated log).
#pragma once

#include <string>

#include "reports/sweep/sweep_schema.h"

namespace ds::report {

struct NcclImportOptions {
  std::string backend = "nccl";  // the backend column of the imported rows
  std::string label;             // metadata.label (checked by the caller)
  std::string collective;        // when the output does not say (older versions); our name or nccl-tests'
};

// True when `text` looks like nccl-tests output (text or -J JSON) rather than a dsperf document.
bool looksLikeNcclTests(const std::string& text);

// `origin` names the file in errors and in metadata.source.
SweepRun importNcclTestsText(const std::string& text, const std::string& origin,
                             const NcclImportOptions& o = {});
SweepRun importNcclTestsJson(const nlohmann::json& doc, const std::string& origin,
                             const NcclImportOptions& o = {});
// Reads `path` and picks text or JSON by content. Throws IoError when unreadable.
SweepRun importNcclTestsFile(const std::string& path, const NcclImportOptions& o = {});

// "all_reduce_perf", "all_reduce", "allreduce" -> "allreduce"; other names: "_perf" dropped.
std::string collectiveFromNcclTests(const std::string& name);

}  // namespace ds::report
