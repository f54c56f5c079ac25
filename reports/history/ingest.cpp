#include "reports/history/ingest.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <set>

#include "engine/common/error.h"
#include "reports/history/history_schema.h"
#include "reports/history/sqlite_db.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"
#include "reports/schema/label.h"

namespace ds::report::history {

namespace {

std::string isoNowUtc() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Times are compared as text, so they must share one form: "YYYY-MM-DDTHH:MM:SS[.fff]Z". dsbench
// writes that; imported nccl-tests JSON has "YYYY-MM-DD HH:MM:SS" without a zone, taken as UTC.
std::string normalizeTime(std::string t) {
  if (t.size() >= 19 && t[4] == '-' && t[7] == '-' && t[10] == ' ' && t[13] == ':') t[10] = 'T';
  bool zoned =
      !t.empty() && (t.back() == 'Z' || (t.size() > 19 && t.find_first_of("+-", 19) != std::string::npos));
  if (t.size() >= 19 && t[10] == 'T' && !zoned) t += 'Z';
  return t;
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ",") + x;
  return out;
}

// What goes into the runs row, gathered from either kind.
struct RunRow {
  std::string startTime, endTime, hosts = "[]", backends, dsperfVersion, gitSha, status, metadata = "{}";
  int worldSize = 0;
  std::size_t rows = 0;
};

RunRow describeSweep(const SweepRun& s) {
  RunRow r;
  r.startTime = s.metadata.startTime;
  r.endTime = s.metadata.endTime;
  r.hosts = dumpJson(nlohmann::json(s.metadata.hosts));
  r.worldSize = s.metadata.worldSize;
  std::set<std::string> backends;
  for (const auto& m : s.results) {
    backends.insert(m.backend);
    if (m.outOfPlace.measured) ++r.rows;
    if (m.inPlace.measured) ++r.rows;
    if (r.worldSize == 0) r.worldSize = m.worldSize;
  }
  r.backends = join(backends);
  auto v = s.metadata.versions;
  r.dsperfVersion = v.count("dsperf") ? v["dsperf"] : "";
  r.gitSha = v.count("git_sha") ? v["git_sha"] : "";
  r.status = s.summary.status;
  nlohmann::json meta;
  to_json(meta, s.metadata);
  r.metadata = dumpJson(meta);
  return r;
}

RunRow describeTrain(const std::vector<TrainRunRecord>& runs, const nlohmann::json& meta) {
  RunRow r;
  r.startTime = textOr(meta, "start_time", "");
  r.endTime = textOr(meta, "end_time", "");
  if (meta.is_object() && meta.contains("hosts") && meta["hosts"].is_array())
    r.hosts = dumpJson(meta["hosts"]);
  std::set<std::string> backends;
  for (const auto& t : runs) {
    backends.insert(t.backend);
    r.worldSize = std::max(r.worldSize, t.worldSize);
  }
  r.backends = join(backends);
  r.rows = runs.size();
  if (meta.is_object() && meta.contains("versions") && meta["versions"].is_object()) {
    r.dsperfVersion = textOr(meta["versions"], "dsperf", "");
    r.gitSha = textOr(meta["versions"], "git_sha", "");
  }
  if (meta.is_object()) r.metadata = dumpJson(meta);
  return r;
}

// The prepared inserts of one transaction.
class Writer {
 public:
  explicit Writer(Database& db)
      : db_(db),
        insertRun_(db, "INSERT OR IGNORE", "runs"),
        insertSweep_(db, "INSERT", "sweep_rows"),
        insertTrain_(db, "INSERT", "train_rows"),
        labelOf_(db, "SELECT label FROM runs WHERE run_id = ?1") {}

  // Inserts the run; false when its id was already there (then `existingLabel` is its label).
  bool addRun(const RunFile& f, const std::string& label, const RunRow& r, const std::string& now,
              std::string& existingLabel) {
    insertRun_.insert({{"run_id", f.runId},
                       {"label", label},
                       {"kind", std::string(runKindName(f.kind))},
                       {"origin", f.origin},
                       {"start_time", r.startTime.empty() ? now : normalizeTime(r.startTime)},
                       {"end_time", normalizeTime(r.endTime)},
                       {"ingested_at", now},
                       {"hosts", r.hosts},
                       {"world_size", r.worldSize},
                       {"backends", r.backends},
                       {"source_file", f.path},
                       {"schema_version", f.schemaVersion},
                       {"dsperf_version", r.dsperfVersion},
                       {"git_sha", r.gitSha},
                       {"status", r.status},
                       {"metadata", r.metadata},
                       {"row_count", static_cast<std::int64_t>(r.rows)}});
    if (db_.changes() == 1) return true;
    labelOf_.bind(1, f.runId);
    existingLabel = labelOf_.step() ? labelOf_.text(0) : "";
    labelOf_.reset();
    return false;
  }

  void addSweepRows(const std::string& runId, const SweepRun& s) {
    std::int64_t seq = 0;
    for (const auto& m : s.results) {
      for (const auto& [place, p] : {std::pair<const char*, const PlaceResult*>{"out", &m.outOfPlace},
                                     std::pair<const char*, const PlaceResult*>{"in", &m.inPlace}}) {
        if (!p->measured) continue;
        insertSweep_.insert({{"run_id", runId},
                             {"seq", seq},
                             {"place", std::string(place)},
                             {"backend", m.backend},
                             {"collective", m.collective},
                             {"dtype", m.dtype},
                             {"op", m.op},
                             {"root", m.root},
                             {"world_size", m.worldSize},
                             {"bytes", static_cast<std::int64_t>(m.bytes)},
                             {"count", static_cast<std::int64_t>(m.count)},
                             {"iters", p->iters},
                             {"time_us", p->timeUs},
                             {"algbw", p->algBw},
                             {"busbw", p->busBw},
                             {"wrong", static_cast<std::int64_t>(p->wrong)},
                             {"min_us", p->iter.minUs},
                             {"max_us", p->iter.maxUs},
                             {"avg_us", p->iter.avgUs},
                             {"p50_us", p->iter.p50Us},
                             {"p95_us", p->iter.p95Us},
                             {"p99_us", p->iter.p99Us},
                             {"stdev_us", p->iter.stdevUs},
                             {"cv_pct", p->iter.cvPct},
                             {"slowest_rank", p->slowestRank},
                             {"spread_pct", p->spreadPct}});
      }
      ++seq;
    }
  }

  void addTrainRows(const std::string& runId, const std::vector<TrainRunRecord>& runs) {
    std::int64_t seq = 0;
    for (const auto& t : runs) {
      nlohmann::json record;
      to_json(record, t);
      insertTrain_.insert({{"run_id", runId},
                           {"seq", seq++},
                           {"model", t.model},
                           {"params", static_cast<std::int64_t>(t.params)},
                           {"world_size", t.worldSize},
                           {"backend", t.backend},
                           {"device", t.device},
                           {"per_rank_batch", t.perRankBatch},
                           {"steps", t.steps},
                           {"warmup", t.warmup},
                           {"optimizer", t.optimizer},
                           {"bucket_cap_mb", t.bucketCapMb},
                           {"overlap", t.overlap ? 1 : 0},
                           {"comm_hook", t.commHook},
                           {"gradient_as_bucket_view", t.gradientAsBucketView ? 1 : 0},
                           {"buckets", t.buckets},
                           {"step_p50_ms", t.stepMs.p50},
                           {"step_p90_ms", t.stepMs.p90},
                           {"step_p99_ms", t.stepMs.p99},
                           {"step_mean_ms", t.stepMs.mean},
                           {"forward_p50_ms", t.forwardMs.p50},
                           {"backward_compute_p50_ms", t.backwardComputeMs.p50},
                           {"backward_comm_p50_ms", t.backwardCommMs.p50},
                           {"exposed_comm_p50_ms", t.exposedCommMs.p50},
                           {"optimizer_p50_ms", t.optimizerMs.p50},
                           {"comm_busy_p50_ms", t.commBusyMs.p50},
                           {"samples_per_sec", t.samplesPerSec},
                           {"overlap_efficiency", t.overlapEfficiency},
                           {"hidden_comm_ms", t.hiddenCommMs},
                           {"loss_start", t.lossStart},
                           {"loss_end", t.lossEnd},
                           {"record", dumpJson(record)}});
    }
  }

 private:
  Database& db_;
  RowInserter insertRun_, insertSweep_, insertTrain_;
  Statement labelOf_;
};

}  // namespace

IngestReport ingestRuns(const std::string& dbPath, const std::vector<std::string>& paths,
                        const IngestOptions& options) {
  if (!options.label.empty()) checkLabel(options.label, "--label");
  IngestReport report;
  report.files.resize(paths.size());
  // Read and check every file before taking the write lock, so the lock is held only for inserts.
  std::vector<std::optional<RunFile>> loaded(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    IngestOutcome& o = report.files[i];
    o.path = paths[i];
    try {
      RunFile f = loadRunFile(paths[i]);
      o.kind = runKindName(f.kind);
      o.runId = f.runId;
      if (f.kind != RunKind::kSweep && f.kind != RunKind::kTrain) {
        o.reason = fmt::format(
            "it is a {} report, and the history keeps dsbench results only (coll sweeps and "
            "train runs, their journals, imported nccl-tests output)",
            o.kind);
        continue;
      }
      f.raw = nullptr;  // the typed records are all ingest needs; the document would only hold memory
      loaded[i] = std::move(f);
    } catch (const ds::Error& e) {
      o.reason = e.what();
    } catch (
        const std::exception& e) {  // nlohmann or std errors a reader let through: still this file's fault
      o.reason = fmt::format("{} could not be read: {}", paths[i], e.what());
    }
  }

  bool any = false;
  for (const auto& f : loaded) any = any || f.has_value();
  if (any) {
    Database db(dbPath, Database::Mode::kCreate, options.busyTimeoutMs);
    prepareForWrite(db);
    const std::string now = isoNowUtc();
    WriteTransaction tx(db);
    Writer w(db);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (!loaded[i]) continue;
      const RunFile& f = *loaded[i];
      IngestOutcome& o = report.files[i];
      o.label = options.label.empty() ? f.label : options.label;
      RunRow row =
          f.kind == RunKind::kSweep ? describeSweep(*f.sweep) : describeTrain(*f.train, f.trainMetadata);
      std::string existing;
      if (!w.addRun(f, o.label, row, now, existing)) {
        o.status = IngestStatus::kAlreadyPresent;
        o.label = existing;
        continue;
      }
      if (f.kind == RunKind::kSweep)
        w.addSweepRows(f.runId, *f.sweep);
      else
        w.addTrainRows(f.runId, *f.train);
      o.status = IngestStatus::kAdded;
      o.rows = row.rows;
    }
    tx.commit();
  }
  for (const auto& o : report.files) {
    if (o.status == IngestStatus::kAdded) ++report.added;
    if (o.status == IngestStatus::kAlreadyPresent) ++report.alreadyPresent;
    if (o.status == IngestStatus::kRejected) ++report.rejected;
  }
  return report;
}

std::string formatIngestReport(const IngestReport& report, const std::string& dbPath, bool perFile,
                               bool rejected) {
  std::string out;
  auto labelText = [](const std::string& l) { return l.empty() ? std::string("no label") : "label " + l; };
  for (const auto& o : report.files) {
    if (o.status == IngestStatus::kRejected ? !rejected : !perFile) continue;
    switch (o.status) {
      case IngestStatus::kAdded:
        out += fmt::format("added    {}: {} run {}, {} rows, {}\n", o.path, o.kind, o.runId, o.rows,
                           labelText(o.label));
        break;
      case IngestStatus::kAlreadyPresent:
        out += fmt::format("skipped  {}: {} run {} is already in the database ({}), skipped\n", o.path,
                           o.kind, o.runId, labelText(o.label));
        break;
      case IngestStatus::kRejected:
        out += fmt::format("REJECTED {}: {}\n", o.path, o.reason);
        break;
    }
  }
  out += fmt::format("{}: {} added, {} already present, {} rejected", dbPath, report.added,
                     report.alreadyPresent, report.rejected);
  if (report.rejected > 0)
    out +=
        report.added + report.alreadyPresent > 0
            ? "; the rejected files were left out and the others stored: fix or remove them and ingest again"
            : "; nothing was stored";
  out += "\n";
  return out;
}

}  // namespace ds::report::history
