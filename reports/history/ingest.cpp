#include "reports/history/ingest.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <set>

#include "engine/common/error.h"
#include "engine/common/iso_time.h"
#include "reports/history/history_schema.h"
#include "reports/history/sample_store.h"
#include "reports/history/sqlite_db.h"
#include "reports/input_file.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"
#include "reports/sample/sample.h"
#include "reports/schema/label.h"
#include "reports/schema/schema_version.h"

namespace ds::report::history {

namespace {

// Times are compared as text, so they must share one form: "YYYY-MM-DDTHH:MM:SS[.fff]Z". dsbench
// writes that; imported nccl-tests JSON has "YYYY-MM-DD HH:MM:SS" without a zone, taken as UTC.
std::string normalizeTime(std::string t) {
  if (t.size() >= 19 && t[4] == '-' && t[7] == '-' && t[10] == ' ' && t[13] == ':') t[10] = 'T';
  bool zoned =
      !t.empty() && (t.back() == 'Z' || (t.size() > 19 && t.find_first_of("+-", 19) != std::string::npos));
  if (t.size() >= 19 && t[10] == 'T' && !zoned) t += 'Z';
  return t;
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
  r.backends = fmt::format("{}", fmt::join(backends, ","));
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
  r.backends = fmt::format("{}", fmt::join(backends, ","));
  r.rows = runs.size();
  if (meta.is_object() && meta.contains("versions") && meta["versions"].is_object()) {
    r.dsperfVersion = textOr(meta["versions"], "dsperf", "");
    r.gitSha = textOr(meta["versions"], "git_sha", "");
  }
  if (meta.is_object()) r.metadata = dumpJson(meta);
  return r;
}

// A fleet-mode dsdiag report: its hosts in rank order, and its samples in place of rows.
RunRow describeFleet(const RunFile& f, std::size_t samples) {
  const DiagReport& d = *f.diag;
  const FleetReport& fleet = *d.fleet;
  RunRow r;
  r.startTime = textOr(f.raw, "start_time", "");
  r.endTime = textOr(f.raw, "end_time", "");
  std::vector<std::string> hosts;
  std::set<std::string> seen;
  for (const auto& k : fleet.input.ranks)
    if (!k.host.empty() && seen.insert(k.host).second) hosts.push_back(k.host);
  r.hosts = dumpJson(nlohmann::json(hosts));
  r.worldSize = fleet.input.worldSize;
  r.backends = "tcp";
  r.dsperfVersion = d.toolVersion;
  r.status = fleetExitCode(fleet.judgement) == 0 ? "healthy" : "suspects";
  std::vector<std::string> suspects;
  for (const auto& h : fleet.judgement.hosts)
    if (h.state != HostState::kHealthy) suspects.push_back(h.host);
  r.metadata = dumpJson({{"mode", d.mode},
                         {"host", d.host},
                         {"tool_version", d.toolVersion},
                         {"median_bandwidth_gbps", fleet.judgement.medianBandwidthGBps},
                         {"median_latency_us", fleet.judgement.medianLatencyUs},
                         {"not_healthy", suspects}});
  r.rows = samples;
  return r;
}

// A check's identity: FNV-1a 64 of its canonical record, as run ids are made. The record is hashed as
// the 1.0 writer wrote it where it fits 1.0: the version as "1.0", and the fields added since left out
// while they hold their defaults. So a check file ingested again by a newer dsreport keeps its id and
// is not stored twice.
std::string checkIdOf(const CheckReport& c) {
  nlohmann::json j = checkToJson(c);
  j["schema_version"] = "1.0";
  if (j["summary"].value("cannot_judge", 0) == 0) j["summary"].erase("cannot_judge");
  for (auto& h : j["hosts"])
    for (auto& f : h["findings"]) {
      if (f.value("cannot_judge", false) == false) f.erase("cannot_judge");
      for (const char* key : {"spread", "spread_upper", "runs_needed", "pooled_runs"})
        if (f.contains(key) && f[key] == 0) f.erase(key);
    }
  return fnv1a64Hex("check\n" + dumpJson(j));
}

// The prepared inserts of one transaction.
class Writer {
 public:
  explicit Writer(Database& db)
      : db_(db),
        insertRun_(db, "INSERT OR IGNORE", "runs"),
        insertSweep_(db, "INSERT", "sweep_rows"),
        insertTrain_(db, "INSERT", "train_rows"),
        insertCheck_(db, "INSERT OR IGNORE", "checks"),
        insertHostCheck_(db, "INSERT", "host_checks"),
        labelOf_(db, "SELECT label FROM runs WHERE run_id = ?1"),
        checkLabelOf_(db, "SELECT label FROM checks WHERE check_id = ?1"),
        hasSamples_(db, "SELECT EXISTS (SELECT 1 FROM samples WHERE run_id = ?1)"),
        timeOf_(db, "SELECT start_time, label FROM runs WHERE run_id = ?1"),
        samples_(db) {}

  // Inserts the run; false when its id was already there (then `existingLabel` is its label).
  // `startTime` is the start time stored.
  bool addRun(const RunFile& f, const std::string& label, const RunRow& r, const std::string& now,
              std::string& existingLabel, std::string& startTime) {
    startTime = r.startTime.empty() ? now : normalizeTime(r.startTime);
    insertRun_.insert({{"run_id", f.runId},
                       {"label", label},
                       {"kind", std::string(runKindName(f.kind))},
                       {"origin", f.origin},
                       {"start_time", startTime},
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

  std::size_t addSamples(const std::string& runId, const std::string& time, const std::string& label,
                         const std::vector<Sample>& s) {
    return samples_.add(runId, time, label, s);
  }

  // A run stored without samples (under layout 1, its rows unreadable on migration) gets these.
  std::size_t backfillSamples(const std::string& runId, const std::vector<Sample>& s) {
    if (s.empty()) return 0;
    hasSamples_.bind(1, runId);
    bool has = hasSamples_.step() && hasSamples_.integer(0) != 0;
    hasSamples_.reset();
    if (has) return 0;
    timeOf_.bind(1, runId);
    std::string time, label;
    if (timeOf_.step()) {
      time = timeOf_.text(0);
      label = timeOf_.text(1);
    }
    timeOf_.reset();
    return samples_.add(runId, time, label, s);
  }

  // Inserts the check and its host verdicts; false when its id was already there.
  bool addCheck(const CheckReport& c, const std::string& id, const std::string& label,
                const std::string& path, const std::string& now, std::string& existingLabel) {
    const std::string time = c.time.empty() ? now : normalizeTime(c.time);
    std::int64_t unhealthy = 0;
    for (const auto& h : c.hosts)
      unhealthy += h.state == CheckState::kUnhealthy || h.state == CheckState::kNoResult ? 1 : 0;
    insertCheck_.insert({{"check_id", id},
                         {"label", label},
                         {"time", time},
                         {"ingested_at", now},
                         {"baseline_id", c.baselineId},
                         {"rules_file", c.rulesFile},
                         {"k", static_cast<std::int64_t>(c.k)},
                         {"n", static_cast<std::int64_t>(c.n)},
                         {"run_ids", dumpJson(nlohmann::json(c.runIds))},
                         {"source_file", path},
                         {"schema_version", std::string(kCheckSchemaVersion)},
                         {"hosts", static_cast<std::int64_t>(c.hosts.size())},
                         {"unhealthy", unhealthy}});
    if (db_.changes() != 1) {
      checkLabelOf_.bind(1, id);
      existingLabel = checkLabelOf_.step() ? checkLabelOf_.text(0) : "";
      checkLabelOf_.reset();
      return false;
    }
    for (const auto& h : c.hosts) {
      // The first rule that broke names the verdict; else (cannot_judge) the first that could not judge.
      nlohmann::json fired = nlohmann::json::array();
      const CheckFinding* first = nullptr;
      for (const auto& f : h.findings) {
        if (f.passed) continue;
        if (!first || (broke(f) && !broke(*first))) first = &f;
        fired.push_back(f);
      }
      insertHostCheck_.insert({{"check_id", id},
                               {"host", h.host},
                               {"time", time},
                               {"sku", h.sku},
                               {"state", std::string(checkStateName(h.state))},
                               {"summary", h.summary},
                               {"rule", first ? first->rule : std::string()},
                               {"pattern", first ? first->pattern : std::string()},
                               {"measured", first ? first->measured : 0.0},
                               {"expected", first ? first->expected : 0.0},
                               {"fired", dumpJson(fired)}});
    }
    return true;
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
                             {"p90_us", RowInserter::orNull(p->iter.p90Us)},
                             {"p999_us", RowInserter::orNull(p->iter.p999Us)},
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
  RowInserter insertRun_, insertSweep_, insertTrain_, insertCheck_, insertHostCheck_;
  Statement labelOf_, checkLabelOf_, hasSamples_, timeOf_;
  SampleWriter samples_;
};

// A file that loadRunFile refused may be a check result: its record, or nullopt when it is not one
// (then the loader's error stands). A check file that is damaged throws its own ConfigError.
std::optional<CheckReport> loadCheckFile(const std::string& path) {
  nlohmann::json doc;
  try {
    doc = parseJsonText(readInputFile(path), path);
  } catch (const ds::Error&) {
    return std::nullopt;
  }
  if (!doc.is_object() || !doc.contains("schema") || doc["schema"] != kCheckSchemaName) return std::nullopt;
  try {
    return checkFromJson(doc, path);
  } catch (const ConfigError& e) {  // some of the record's own checks do not name the file
    const std::string m = e.what();
    if (m.find(path) != std::string::npos) throw;
    throw ConfigError(fmt::format("{} is not a valid dsreport check result: {}", path, m));
  }
}

// What one accepted input stores: a run with its samples, or a check.
struct Accepted {
  std::optional<RunFile> run;
  std::vector<Sample> samples;
  std::optional<CheckReport> check;
  std::string checkId;
};

// Classifies a run read from a file or handed over in memory: its samples, or why it is refused.
bool acceptRun(RunFile&& f, IngestOutcome& o, Accepted& a) {
  o.kind = runKindName(f.kind);
  o.runId = f.runId;
  const bool fleet = f.kind == RunKind::kDiag && f.diag && f.diag->fleet;
  if (f.kind != RunKind::kSweep && f.kind != RunKind::kTrain && !fleet) {
    o.reason = fmt::format(
        "it is a {} report{}, and the history keeps dsbench results (coll sweeps and train runs, their "
        "journals, imported nccl-tests output), fleet-mode dsdiag reports (dsdiag --world on many hosts) and "
        "dsreport check results",
        o.kind, f.kind == RunKind::kDiag ? " without fleet mode" : "");
    return false;
  }
  a.samples = samplesOf(f);          // before raw goes: a fleet run's time is read from it
  if (fleet && f.raw.is_object()) {  // keep only what describeFleet reads of the document
    nlohmann::json times = nlohmann::json::object();
    for (const char* key : {"start_time", "end_time"})
      if (f.raw.contains(key)) times[key] = f.raw[key];
    f.raw = std::move(times);
  } else {
    f.raw = nullptr;  // the typed records are all ingest needs; the document would only hold memory
  }
  a.run = std::move(f);
  return true;
}

void acceptCheck(CheckReport&& c, IngestOutcome& o, Accepted& a) {
  o.kind = "check";
  a.checkId = o.runId = checkIdOf(c);
  a.check = std::move(c);
}

IngestReport store(const std::string& dbPath, IngestReport report,
                   std::vector<std::optional<Accepted>>& accepted, const IngestOptions& options) {
  bool any = false;
  for (const auto& a : accepted) any = any || a.has_value();
  if (any) {
    Database db(dbPath, Database::Mode::kCreate, options.busyTimeoutMs);
    prepareForWrite(db);
    const std::string now = isoUtcNow();
    WriteTransaction tx(db);
    Writer w(db);
    for (std::size_t i = 0; i < accepted.size(); ++i) {
      if (!accepted[i]) continue;
      Accepted& a = *accepted[i];
      IngestOutcome& o = report.files[i];
      std::string existing;
      if (a.check) {
        o.label = options.label;
        if (!w.addCheck(*a.check, a.checkId, options.label, o.path, now, existing)) {
          o.status = IngestStatus::kAlreadyPresent;
          o.label = existing;
          continue;
        }
        o.status = IngestStatus::kAdded;
        o.rows = a.check->hosts.size();
        continue;
      }
      const RunFile& f = *a.run;
      o.label = options.label.empty() ? f.label : options.label;
      RunRow row = f.kind == RunKind::kSweep   ? describeSweep(*f.sweep)
                   : f.kind == RunKind::kTrain ? describeTrain(*f.train, f.trainMetadata)
                                               : describeFleet(f, a.samples.size());
      std::string startTime;
      if (!w.addRun(f, o.label, row, now, existing, startTime)) {
        o.status = IngestStatus::kAlreadyPresent;
        o.label = existing;
        o.samples = w.backfillSamples(f.runId, a.samples);
        continue;
      }
      if (f.kind == RunKind::kSweep) w.addSweepRows(f.runId, *f.sweep);
      if (f.kind == RunKind::kTrain) w.addTrainRows(f.runId, *f.train);
      o.samples = w.addSamples(f.runId, startTime, o.label, a.samples);
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

}  // namespace

IngestReport ingestRuns(const std::string& dbPath, const std::vector<std::string>& paths,
                        const IngestOptions& options) {
  if (!options.label.empty()) checkLabel(options.label, "--label");
  IngestReport report;
  report.files.resize(paths.size());
  // Read and check every file before taking the write lock, so the lock is held only for inserts.
  std::vector<std::optional<Accepted>> accepted(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    IngestOutcome& o = report.files[i];
    o.path = paths[i];
    Accepted a;
    try {
      std::optional<RunFile> f;
      try {
        f = loadRunFile(paths[i]);
      } catch (const ConfigError&) {
        // Not a result of the kinds runs are made of: perhaps a check. Else the loader's error stands.
        std::optional<CheckReport> check = loadCheckFile(paths[i]);
        if (!check) throw;
        acceptCheck(std::move(*check), o, a);
      }
      if (f && !acceptRun(std::move(*f), o, a)) continue;
      accepted[i] = std::move(a);
    } catch (const ds::Error& e) {
      o.reason = e.what();
    } catch (
        const std::exception& e) {  // nlohmann or std errors a reader let through: still this file's fault
      o.reason = fmt::format("{} could not be read: {}", paths[i], e.what());
    }
  }
  return store(dbPath, std::move(report), accepted, options);
}

IngestReport ingestRecords(const std::string& dbPath, std::vector<IngestRecord> records,
                           const IngestOptions& options) {
  if (!options.label.empty()) checkLabel(options.label, "--label");
  IngestReport report;
  report.files.resize(records.size());
  std::vector<std::optional<Accepted>> accepted(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    IngestOutcome& o = report.files[i];
    o.path = records[i].path;
    Accepted a;
    if (records[i].check) {
      acceptCheck(std::move(*records[i].check), o, a);
    } else if (!records[i].run) {
      o.reason = fmt::format("{}: the record holds neither a run nor a check", o.path);
      continue;
    } else {
      records[i].run->path = o.path;
      if (!acceptRun(std::move(*records[i].run), o, a)) continue;
    }
    accepted[i] = std::move(a);
  }
  return store(dbPath, std::move(report), accepted, options);
}

std::string formatIngestReport(const IngestReport& report, const std::string& dbPath, bool perFile,
                               bool rejected) {
  std::string out;
  auto labelText = [](const std::string& l) { return l.empty() ? std::string("no label") : "label " + l; };
  for (const auto& o : report.files) {
    if (o.status == IngestStatus::kRejected ? !rejected : !perFile) continue;
    switch (o.status) {
      case IngestStatus::kAdded:
        if (o.kind == "check") {
          out += fmt::format("added    {}: check {}, {} host verdicts, {}\n", o.path, o.runId, o.rows,
                             labelText(o.label));
        } else {
          out +=
              fmt::format("added    {}: {} run {}, {} {}, {} per-host samples, {}\n", o.path, o.kind, o.runId,
                          o.rows, o.kind == "diag" ? "samples" : "rows", o.samples, labelText(o.label));
        }
        break;
      case IngestStatus::kAlreadyPresent:
        out += fmt::format("skipped  {}: {} {}{} is already in the database ({}), skipped{}\n", o.path,
                           o.kind, o.kind == "check" ? "" : "run ", o.runId, labelText(o.label),
                           o.samples ? fmt::format("; its {} per-host samples were added", o.samples) : "");
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
