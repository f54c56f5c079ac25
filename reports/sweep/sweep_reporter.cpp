#include "reports/sweep/sweep_reporter.h"

#include <fmt/format.h>

#include <cmath>

#include "reports/json_io.h"
#include "reports/sweep/expected.h"
#include "reports/sweep/sweep_text.h"

namespace ds::report {

void TextReporter::put(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), out_);
  std::fflush(out_);
}

void TextReporter::start(const SweepRun& run) {
  meta_ = run.metadata;
  perIterTiming_ = run.args.perIterTiming;
  put(formatSweepPreamble(run.args, run.metadata));
}
void TextReporter::tableStart(const SweepTable& t) {
  put(formatTableHeader(t.backend, t.collective, t.busFactor, perIterTiming_));
}
void TextReporter::measurement(const SweepMeasurement& m) { put(formatRow(m, perIterTiming_)); }
void TextReporter::note(const std::string& text) { put("# " + text + "\n"); }
void TextReporter::tableEnd(const SweepTable&, const std::vector<SweepMeasurement>& rows) {
  put(formatRoundingNote(rows));
  put(formatBoundLines(rows, meta_));
}
void TextReporter::finish(const SweepRun& run) { put(formatFooter(run.summary)); }

void JsonReporter::start(const SweepRun& run) {
  sofar_ = SweepRun{};
  sofar_.args = run.args;
  sofar_.metadata = run.metadata;
  sofar_.notes = run.notes;
}
void JsonReporter::tableStart(const SweepTable&) { tableFirst_ = sofar_.results.size(); }
void JsonReporter::measurement(const SweepMeasurement& m) { sofar_.results.push_back(m); }
void JsonReporter::note(const std::string& text) { sofar_.notes.push_back(text); }
void JsonReporter::tableEnd(const SweepTable& t, const std::vector<SweepMeasurement>& rows) {
  // The table's rows as the run keeps them (put back in size order after --repeat's rotated passes).
  if (tableFirst_ <= sofar_.results.size()) sofar_.results.resize(tableFirst_);
  sofar_.results.insert(sofar_.results.end(), rows.begin(), rows.end());
  sofar_.summary = summarize(sofar_.results);
  sofar_.summary.status = "incomplete";
  sofar_.summary.error = fmt::format(
      "the run stopped after the {} {} table: it was killed, lost a rank, or a later backend ended the "
      "process (see the job's stderr); this file, rewritten after each table, holds every row finished "
      "until then",
      t.backend, t.collective);
  writeJsonAtomic(path_, sweepToJson(sofar_));
}
void JsonReporter::finish(const SweepRun& run) { writeJsonAtomic(path_, sweepToJson(run)); }

void JournalReporter::start(const SweepRun& run) {
  journal_ = std::make_unique<SweepJournal>(path_, run.args, run.metadata);
}
void JournalReporter::measurement(const SweepMeasurement& m) {
  if (journal_) journal_->append(m);
}
void JournalReporter::note(const std::string& text) {
  if (journal_) journal_->note(text);
}
void JournalReporter::finish(const SweepRun& run) {
  if (journal_) journal_->end(run.summary, run.metadata.endTime);
}

std::string humanBytes(std::size_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", bytes);
  return v == std::floor(v) ? fmt::format("{:.0f} {}", v, kUnits[u]) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string formatProgress(const SweepProgress& p) {
  std::string eta = "ETA ?";
  if (p.done > 0 && p.total >= p.done) {
    double left = p.elapsedS / p.done * (p.total - p.done);
    eta = left >= 60 ? fmt::format("ETA {:.0f} min {:.0f} s", std::floor(left / 60), std::fmod(left, 60.0))
                     : fmt::format("ETA {:.0f} s", left);
  }
  return fmt::format("{} {} {} {} {}  [{}/{}]  {}", p.table.backend, p.table.collective, p.dtype, p.op,
                     humanBytes(p.bytes), p.done + 1, p.total, eta);
}

void ProgressReporter::progress(const SweepProgress& p) {
  std::string line = "\r[dsbench] " + formatProgress(p) + "\x1b[K";
  std::fwrite(line.data(), 1, line.size(), tty_);
  std::fflush(tty_);
  shown_ = true;
}

void ProgressReporter::finish(const SweepRun&) {
  if (shown_) {
    std::fputs("\r\x1b[K", tty_);
    std::fflush(tty_);
  }
}

void MultiReporter::start(const SweepRun& run) {
  for (auto& r : reporters_) r->start(run);
}
void MultiReporter::tableStart(const SweepTable& t) {
  for (auto& r : reporters_) r->tableStart(t);
}
void MultiReporter::progress(const SweepProgress& p) {
  for (auto& r : reporters_) r->progress(p);
}
void MultiReporter::measurement(const SweepMeasurement& m) {
  for (auto& r : reporters_) r->measurement(m);
}
void MultiReporter::note(const std::string& text) {
  for (auto& r : reporters_) r->note(text);
}
void MultiReporter::tableEnd(const SweepTable& t, const std::vector<SweepMeasurement>& rows) {
  for (auto& r : reporters_) r->tableEnd(t, rows);
}
void MultiReporter::finish(const SweepRun& run) {
  for (auto& r : reporters_) r->finish(run);
}

}  // namespace ds::report
