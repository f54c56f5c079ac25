#include "reports/html/gpu_html.h"

#include <fmt/format.h>

#include "reports/html/html_page.h"
#include "reports/json_io.h"

namespace ds::report::html {

using nlohmann::json;

namespace gpu_html_detail {

std::string gpuPageName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string gpuRowLabel(const GpuCopyRow& r) {
  std::string s = fmt::format("{} gpu {}", r.testcase, r.device);
  if (r.peer >= 0) s += fmt::format("->{}", r.peer);
  return s;
}

}  // namespace gpu_html_detail

std::string renderGpuCopyReport(const GpuCopyRun& run, const std::string& name) {
  PageBuilder page(fmt::format("dsbench gpu: {}", gpu_html_detail::gpuPageName(name)), "gpu");
  page.section("Run");
  page.paragraph(
      fmt::format("{} GPU(s) on {}; {} per copy; median of {} timed repetitions after {} warm-up. "
                  "GB/s = 1e9 bytes per second, bytes copied once (nvbandwidth's convention).",
                  run.devices.size(), run.host.empty() ? "an unnamed host" : run.host,
                  formatBytes(static_cast<double>(run.bytes)), run.iters, run.warmup));
  page.paragraph(fmt::format("dsperf {}; CUDA runtime {}, driver {}; started {}{}", run.version,
                             run.cudaRuntime.empty() ? "?" : run.cudaRuntime,
                             run.cudaDriver.empty() ? "?" : run.cudaDriver, run.startTime,
                             run.label.empty() ? "" : "; label " + run.label));
  std::vector<Row> devices;
  for (const auto& d : run.devices) {
    const double mem = memoryGBps(d);
    devices.push_back(
        {Cell(std::to_string(d.index), "num"), Cell(d.name), Cell(d.busId),
         Cell(d.pcieGen > 0 && d.pcieWidth > 0 ? fmt::format("Gen{} x{}", d.pcieGen, d.pcieWidth) : "-"),
         Cell(mem > 0 ? formatFixed(mem, 0) : "-", "num"),
         Cell(d.nvlinks >= 0 ? std::to_string(d.nvlinks) : "-", "num")});
  }
  page.table({"gpu", "name", "PCI address", "PCIe link", "memory GB/s", "NVLinks"}, devices);

  page.section("Copies");
  std::vector<Row> rows;
  json labels = json::array(), fractions = json::array();
  for (const auto& r : run.rows) {
    const bool host = r.path == CopyPath::kHostToDevice || r.path == CopyPath::kDeviceToHost;
    Row row{Cell(r.testcase), Cell(std::to_string(r.device), "num"),
            Cell(r.peer >= 0 ? std::to_string(r.peer) : "-", "num"),
            Cell(host ? (r.pageable ? "pageable" : "pinned") : "-"),
            Cell(formatBytes(static_cast<double>(r.bytes)))};
    if (r.skipped) {
      row.insert(row.end(), {Cell("-", "num"), Cell("-", "num"), Cell("-", "num"), Cell("-", "num")});
    } else {
      row.insert(row.end(),
                 {Cell(formatFixed(r.medianUs, 1), "num"), Cell(formatFixed(r.medianGBps, 2), "num"),
                  Cell(formatFixed(r.minGBps, 2), "num"), Cell(formatFixed(r.maxGBps, 2), "num")});
    }
    row.push_back(Cell(r.boundGBps > 0 ? formatFixed(r.boundGBps, 2) : "-", "num"));
    row.push_back(Cell(r.fraction > 0 ? fmt::format("{:.0f}%", r.fraction * 100) : "-", "num"));
    std::string about = r.boundGBps > 0 ? r.boundName : "unknown: " + r.boundWhy;
    if (r.skipped) about = "skipped: " + r.note;
    row.push_back(Cell(about, r.skipped ? "warn" : ""));
    rows.push_back(std::move(row));
    if (!r.skipped && r.fraction > 0) {
      labels.push_back(gpu_html_detail::gpuRowLabel(r));
      fractions.push_back(r.fraction * 100);
    }
  }
  page.table({"testcase", "gpu", "peer", "host memory", "size", "time (us)", "median GB/s", "min GB/s",
              "max GB/s", "bound GB/s", "of bound", "bound is"},
             rows);
  if (!labels.empty()) {
    page.chart(
        {{"kind", "category"},
         {"bar", true},
         {"title", "Median bandwidth as a fraction of each row's bound"},
         {"yTitle", "% of bound"},
         {"yPercent", true},
         {"labels", labels},
         {"series", json::array({{{"label", "median / bound"}, {"values", fractions}, {"color", 0}}})}});
  }
  if (!run.notes.empty()) {
    page.section("Notes");
    for (const auto& n : run.notes) page.paragraph(n);
  }
  return page.render();
}

void writeGpuCopyReport(const GpuCopyRun& run, const std::string& name, const std::string& path) {
  writeTextAtomic(path, renderGpuCopyReport(run, name));
}

}  // namespace ds::report::html
