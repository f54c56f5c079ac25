// dsreport html RUN.json [RUN2.json ...] [-o report.html]: one self-contained HTML report; several
// files are overlaid in one report (backends or clusters side by side). One dsdiag hang report
// (schema dsperf.hang) or one dsbench gpu result (dsperf.gpu) gets its own page instead.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "reports/cli/command.h"
#include "reports/diag/hang_schema.h"
#include "reports/gpu/gpu_copy.h"
#include "reports/html/gpu_html.h"
#include "reports/html/hang_html.h"
#include "reports/html/run_report.h"
#include "reports/run/run_file.h"

namespace ds::report::cli {

namespace {

struct HtmlOptions {
  std::vector<std::string> inputs;
  std::string output = "report.html";
};

}  // namespace

Command addHtmlCommand(CLI::App& parent) {
  auto opts = std::make_shared<HtmlOptions>();
  Command c;
  c.app = parent.add_subcommand(
      "html",
      "Write a self-contained HTML report (charts embedded, opens offline) of one result file, or of several "
      "overlaid: sweeps (dsbench coll), train runs (dsbench train), pre-flight checks (dsdiag --json), "
      "journals; or the page of one dsdiag hang report (dsdiag hang --json), given alone.");
  c.app
      ->add_option("runs", opts->inputs,
                   "result files (JSON written by dsbench or dsdiag, or a .jsonl journal), or one dsdiag hang report")
      ->required()
      ->check(resultFile());
  c.app->add_option("-o,--output", opts->output, "the HTML file to write (replaced atomically)")
      ->capture_default_str()
      ->check(ds::cli::outputFile())
      ->envname("DSREPORT_HTML_OUTPUT");
  addMaxInputFlag(c.app);
  c.run = [opts] {
    // A dsdiag hang report is a page of its own (reports/html/hang_html.h).
    if (opts->inputs.size() == 1) {
      if (auto hang = readHangReportFile(opts->inputs.front())) {
        html::writeHangReport(*hang, opts->inputs.front(), opts->output);
        std::printf("dsreport html: wrote %s (the hang report of %d rank(s))\n", opts->output.c_str(), hang->worldSize);
        return kExitOk;
      }
      if (auto gpu = readGpuCopyRunFile(opts->inputs.front())) {
        html::writeGpuCopyReport(*gpu, opts->inputs.front(), opts->output);
        std::printf("dsreport html: wrote %s (the GPU copies of %zu GPU(s), %zu row(s))\n", opts->output.c_str(),
                    gpu->devices.size(), gpu->rows.size());
        return kExitOk;
      }
    }
    std::vector<RunFile> runs;
    for (const auto& path : opts->inputs) runs.push_back(loadRunFile(path));
    html::writeRunReport(runs, opts->output);
    std::printf("dsreport html: wrote %s (%zu run(s))\n", opts->output.c_str(), runs.size());
    return kExitOk;
  };
  return c;
}

}  // namespace ds::report::cli
