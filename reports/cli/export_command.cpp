// dsreport export --openmetrics FILE [--check CHECK.json] [RUN...]: runs (dsbench sweeps, dsdiag
// fleet-mode results) and a dsreport check's verdicts as Prometheus' text format, for
// node_exporter's textfile collector (reports/export/openmetrics.h).
#include <fmt/format.h>

#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "reports/baseline/check_schema.h"
#include "reports/cli/command.h"
#include "reports/export/openmetrics.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"
#include "reports/sample/sample.h"

namespace ds::report::cli {

namespace {

struct ExportOptions {
  std::vector<std::string> inputs;
  std::string openmetrics;
  std::string check;
};

}  // namespace

Command addExportCommand(CLI::App& parent) {
  auto o = std::make_shared<ExportOptions>();
  Command c;
  c.app = parent.add_subcommand(
      "export",
      "Write runs (dsbench sweeps, dsdiag fleet-mode results) and a dsreport check's per-host verdicts where "
      "dashboards already live: Prometheus' text format for node_exporter's textfile collector.");
  c.app
      ->add_option("runs", o->inputs,
                   "result files: dsbench sweep JSON or journals, dsdiag --world JSON of fleet mode")
      ->check(resultFile());
  c.app
      ->add_option(
          "--openmetrics", o->openmetrics,
          "the .prom file to write (atomically: a reader never sees half of it), e.g. in node_exporter's "
          "--collector.textfile.directory")
      ->required()
      ->check(ds::cli::outputFile())
      ->envname("DSREPORT_OPENMETRICS");
  c.app
      ->add_option(
          "--check", o->check,
          "a dsreport check result (dsperf.check JSON): its per-host verdicts as dsperf_check_* gauges")
      ->check(ds::cli::inputFile())
      ->envname("DSREPORT_EXPORT_CHECK");
  addMaxInputFlag(c.app);
  c.run = [o]() -> int {
    if (o->inputs.empty() && o->check.empty())
      throw ConfigError(
          "dsreport export: nothing to export; give result files (dsbench sweeps, dsdiag fleet-mode JSON) "
          "and/or "
          "--check CHECK.json.");
    std::vector<Sample> samples;  // in argument order: later runs win ties (openmetrics.h)
    std::vector<std::string> empty;
    for (const auto& path : o->inputs) {
      const RunFile run = loadRunFile(path);
      auto s = samplesOf(run);
      if (s.empty()) empty.push_back(path + " (" + runKindName(run.kind) + ")");
      samples.insert(samples.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
    }
    CheckReport check;
    if (!o->check.empty()) check = checkFromJson(readJson(o->check), o->check);
    if (samples.empty() && o->check.empty())
      throw ConfigError(
          "dsreport export: none of the files holds a figure to export (only measured sweep rows and "
          "fleet-mode "
          "links are exported; train, world and local dsdiag results have none), so " +
          o->openmetrics + " was left as it was.");
    for (const auto& e : empty)
      std::fprintf(stderr, "dsreport export: note: %s holds no figure to export; left out.\n", e.c_str());
    const std::string text = openMetricsText(samples, o->check.empty() ? nullptr : &check);
    writeOpenMetricsFile(o->openmetrics, text);
    std::size_t series = 0, families = 0;
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t end = text.find('\n', i);
      const std::string_view line(text.data() + i, (end == std::string::npos ? text.size() : end) - i);
      if (line.rfind("# TYPE ", 0) == 0)
        ++families;
      else if (!line.empty() && line[0] != '#')
        ++series;
      if (end == std::string::npos) break;
      i = end + 1;
    }
    std::printf(
        "dsreport export: wrote %s: %zu series in %zu metric families from %zu run(s)%s\n",
        o->openmetrics.c_str(), series, families, o->inputs.size() - empty.size(),
        o->check.empty() ? "" : fmt::format(" and the check of {} host(s)", check.hosts.size()).c_str());
    return kExitOk;
  };
  return c;
}

}  // namespace ds::report::cli
