#include "reports/diag/diag_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "engine/common/ranges.h"
#include "reports/diag/fleet_text.h"
#include "reports/diag/topology_text.h"

namespace ds::report {
namespace {

const char* colorOf(DiagStatus s) {
  switch (s) {
    case DiagStatus::kPass: return "\033[32m";
    case DiagStatus::kWarn: return "\033[33m";
    case DiagStatus::kFail: return "\033[1;31m";
    case DiagStatus::kSkip: return "\033[2m";
  }
  return "";
}

struct Row {
  const DiagRecord* rec;
  std::vector<int> ranks;
};

// Rows of one check id, merged as described in the header.
std::vector<Row> rowsFor(const std::vector<const DiagRecord*>& recs, bool world, bool verbose) {
  std::vector<Row> rows;
  for (const auto* r : recs) {
    bool merged = false;
    if (world && r->rank >= 0) {
      for (auto& row : rows) {
        bool samePass = !verbose && r->status == DiagStatus::kPass && row.rec->status == DiagStatus::kPass;
        bool same = r->status == row.rec->status && r->message == row.rec->message;
        if (samePass || same) {
          row.ranks.push_back(r->rank);
          merged = true;
          break;
        }
      }
    }
    if (!merged) rows.push_back({r, r->rank >= 0 ? std::vector<int>{r->rank} : std::vector<int>{}});
  }
  return rows;
}

}  // namespace

std::string formatDiagText(const DiagReport& report, const DiagTextOptions& options) {
  const bool world = report.mode == "world";
  auto paint = [&](DiagStatus s, const std::string& text) {
    return options.color ? fmt::format("{}{}\033[0m", colorOf(s), text) : text;
  };
  auto bold = [&](const std::string& text) { return options.color ? "\033[1m" + text + "\033[0m" : text; };

  // Families in order of first appearance; ids in order of first appearance within them.
  std::vector<std::string> families;
  std::map<std::string, std::vector<std::string>> idsOf;
  std::map<std::string, std::vector<const DiagRecord*>> recsOf;
  size_t idWidth = 0;
  for (const auto& r : report.checks) {
    if (std::find(families.begin(), families.end(), r.family) == families.end()) families.push_back(r.family);
    auto& ids = idsOf[r.family];
    if (std::find(ids.begin(), ids.end(), r.id) == ids.end()) ids.push_back(r.id);
    recsOf[r.id].push_back(&r);
    idWidth = std::max(idWidth, r.id.size());
  }

  std::string out;
  if (world) {
    out += fmt::format("dsdiag --world: {} rank(s), report gathered on rank 0 ({})\n", report.worldSize,
                       report.host);
  } else {
    out += fmt::format("dsdiag: checks of this process on {}\n", report.host);
  }
  const std::string indent(2 + 4 + 2 + idWidth + 2, ' ');
  for (const auto& fam : families) {
    out += "\n" + bold(fam) + "\n";
    for (const auto& id : idsOf[fam]) {
      for (const auto& row : rowsFor(recsOf[id], world, options.verbose)) {
        std::string where;
        if (world) {
          where = row.ranks.empty()       ? "[world] "
                  : row.ranks.size() == 1 ? fmt::format("[rank {}] ", row.ranks[0])
                                          : fmt::format("[ranks {}] ", formatRanges(row.ranks));
        }
        out += fmt::format("  {}  {:<{}}  {}{}\n", paint(row.rec->status, diagStatusName(row.rec->status)), id,
                           idWidth, where, row.rec->message);
        if (!row.rec->remedy.empty() && row.rec->status != DiagStatus::kPass) {
          out += fmt::format("{}-> {}\n", indent, row.rec->remedy);
        }
        // Checks whose data carries a table of their own (gpu.topology's topo -m matrix).
        if (row.rec->id == "gpu.topology") {
          for (const auto& line : formatTopologyMatrix(row.rec->data)) out += fmt::format("{}{}\n", indent, line);
        }
        if (options.verbose && !row.rec->data.empty()) out += fmt::format("{}data: {}\n", indent, row.rec->data.dump());
      }
    }
  }
  if (report.fleet) out += "\n" + formatFleetText(*report.fleet, {options.color, options.verbose});
  auto c = countStatuses(report.checks);
  int code = diagReportExitCode(report);
  const bool tolerated = code == 1 && options.warningsPass;
  out += fmt::format("\nSummary: {} pass, {} warn, {} fail, {} skip -> {} ({})\n", c.pass, c.warn, c.fail,
                     c.skip, code == 2 ? paint(DiagStatus::kFail, "FAIL") : code == 1 ? paint(DiagStatus::kWarn, "WARN")
                                                                                       : paint(DiagStatus::kPass, "PASS"),
                     tolerated ? "exit 0 under --fail-on fail: the warnings are advice, not failures"
                               : fmt::format("exit {}", code));
  if (!report.missingRanks.empty()) {
    out += fmt::format("Ranks that never reported: {}\n", formatRanges(report.missingRanks));
  }
  return out;
}

std::string formatDiagRankLine(int rank, const std::string& host, const std::vector<DiagRecord>& records,
                               int exitCode) {
  auto c = countStatuses(records);
  return fmt::format("dsdiag rank {} ({}): {} pass, {} warn, {} fail, {} skip locally; the merged report is on rank 0 "
                     "(exit {})\n",
                     rank, host, c.pass, c.warn, c.fail, c.skip, exitCode);
}

}  // namespace ds::report
