#include "reports/run/run_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "engine/common/error.h"
#include "reports/import/nccl_tests_import.h"
#include "reports/input_file.h"
#include "reports/json_io.h"
#include "reports/schema/schema_version.h"
#include "reports/sweep/sweep_journal.h"

namespace ds::report {

const char* runKindName(RunKind k) {
  switch (k) {
    case RunKind::kSweep:
      return "sweep";
    case RunKind::kTrain:
      return "train";
    case RunKind::kDiag:
      return "diag";
    case RunKind::kWorld:
      return "world";
  }
  return "?";
}

std::string runIdOf(RunKind kind, const nlohmann::json& canonical) {
  nlohmann::json c = canonical;
  if (c.is_object()) {
    c.erase("schema_version");
    if (c.contains("metadata") && c["metadata"].is_object()) c["metadata"].erase("label");
  }
  // nlohmann's object is a std::map: dump() is key-sorted, so equal content gives equal text.
  std::string text = std::string(runKindName(kind)) + "\n" + dumpJson(c);
  return fnv1a64Hex(text);
}

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The first non-empty line, parsed (discarded when not JSON), and whether it is the whole text: a
// compact one-line result file is then parsed once, not once for the journal test and once whole.
struct FirstLine {
  nlohmann::json parsed;
  bool wholeText = false;
};

FirstLine firstJsonLine(const std::string& text) {
  const std::size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return {};
  std::size_t end = text.find('\n', start);
  if (end == std::string::npos) end = text.size();
  FirstLine f;
  f.parsed = nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(start),
                                   text.begin() + static_cast<std::ptrdiff_t>(end), nullptr, false);
  f.wholeText = text.find_first_not_of(" \t\r\n", end) == std::string::npos;
  return f;
}

RunFile fromSweep(SweepRun run, const std::string& path) {
  RunFile f;
  f.path = path;
  f.kind = RunKind::kSweep;
  f.schemaVersion = kSchemaVersion;
  f.label = run.metadata.label;
  f.raw = sweepToJson(run);
  f.runId = runIdOf(f.kind, f.raw);
  f.sweep = std::move(run);
  return f;
}

// dsbench train's journal: one {"schema": "dsperf.train.journal", "run": {...}} line per finished
// configuration. A line cut short by a kill is skipped, as in the sweep journal.
RunFile loadTrainJournal(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  std::vector<TrainRunRecord> runs;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    std::string where = fmt::format("{} line {}", path, lineNo);
    if (textOr(j, "schema", "") != "dsperf.train.journal") {
      throw ConfigError(
          fmt::format("{} is not a dsbench train journal line (schema '{}'); the file mixes "
                      "other content into the journal.",
                      where, textOr(j, "schema", "")));
    }
    checkSchemaVersion(j, "dsperf.train.journal", where);
    runs.push_back(
        readFields(j, where, "dsperf.train.journal", [&] { return j.at("run").get<TrainRunRecord>(); }));
  }
  if (runs.empty()) {
    throw ConfigError(
        fmt::format("{} holds no finished dsbench train run (the run was killed before its "
                    "first configuration finished).",
                    path));
  }
  RunFile f;
  f.path = path;
  f.kind = RunKind::kTrain;
  f.schemaVersion = kSchemaVersion;
  f.raw = trainToJson(runs);
  f.runId = runIdOf(f.kind, f.raw);
  f.train = std::move(runs);
  f.trainMetadata = nullptr;
  f.origin = "journal";
  return f;
}

}  // namespace

RunFile classifyRun(const nlohmann::json& doc, const std::string& origin) {
  if (!doc.is_object()) {
    throw ConfigError(fmt::format("{} is not a dsperf result: the document is a JSON {}, not an object.",
                                  origin, doc.type_name()));
  }
  if (!doc.contains("schema") || !doc["schema"].is_string()) {
    throw ConfigError(fmt::format(
        "{} is not a dsperf result: it has no \"schema\" field. dsreport reads the JSON of dsbench "
        "(-J / --json), dsdiag (--json), their journals, and nccl-tests output (dsreport import).",
        origin));
  }
  const std::string schema = doc["schema"].get<std::string>();
  RunFile f;
  f.path = origin;
  f.raw = doc;
  if (schema == kSweepSchemaName) {
    f.kind = RunKind::kSweep;
    f.schemaVersion = checkSchemaVersion(doc, schema, origin).str();
    f.sweep = sweepFromJson(doc, origin);
    f.label = f.sweep->metadata.label;
    f.runId = runIdOf(f.kind, sweepToJson(*f.sweep));
  } else if (schema == kTrainSchemaName) {
    f.kind = RunKind::kTrain;
    f.schemaVersion = checkSchemaVersion(doc, schema, origin).str();
    f.train = trainFromJson(doc, origin);
    f.trainMetadata = doc.contains("metadata") ? doc["metadata"] : nlohmann::json();
    f.label = textOr(f.trainMetadata, "label", "");
    if (doc.contains("metadata")) {  // read again by compare and html: checked here, in the document
      readFields(doc, origin, schema, [&] { (void)readIntOr(doc["metadata"], "world_size", 0); });
    }
    f.runId = runIdOf(f.kind, trainToJson(*f.train, f.trainMetadata));
  } else if (schema == kDiagSchemaName) {
    f.kind = RunKind::kDiag;
    f.schemaVersion = checkSchemaVersion(doc, schema, origin).str();
    f.diag = diagFromJson(doc, origin);
    f.label = textOr(doc, "label", "");
    f.runId = runIdOf(f.kind, diagToJson(*f.diag));
  } else if (schema == kWorldSchemaName) {
    f.kind = RunKind::kWorld;
    f.schemaVersion = checkSchemaVersion(doc, schema, origin).str();
    f.world = worldFromJson(doc, origin);
    f.runId = runIdOf(f.kind, doc);
  } else if (schema == "dsperf.hang") {
    throw ConfigError(fmt::format(
        "{} is a dsdiag hang report, not a run result: `dsreport html {}` (given alone) makes its page; "
        "compare, ingest, check, export and baselines read the results of dsbench and dsdiag's checks.",
        origin, origin));
  } else if (schema == "dsperf.gpu") {
    throw ConfigError(fmt::format(
        "{} is a dsbench gpu result (copy bandwidth per GPU), not a run result: `dsreport html {}` (given alone) "
        "makes its page; compare, ingest, check, export and baselines read the results of dsbench coll and train "
        "and dsdiag's checks.",
        origin, origin));
  } else if (schema == kSweepJournalSchemaName || schema == "dsperf.train.journal") {
    throw ConfigError(fmt::format(
        "{} is one line of a dsbench journal, not a whole result. Give dsreport the journal file itself "
        "(.jsonl) or the run's -J/--json output.",
        origin));
  } else {
    if (schema.rfind("dsperf.", 0) == 0) checkSchemaVersion(doc, schema, origin);  // a newer kind: say so
    throw ConfigError(fmt::format(
        "{} is not a result dsreport knows: its schema is '{}' (dsreport reads dsperf.sweep, dsperf.train, "
        "dsperf.diag and dsperf.world, their journals, and nccl-tests output).",
        origin, schema));
  }
  return f;
}

RunFile loadRunFile(const std::string& path) {
  const std::string text = readInputFile(path);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw ConfigError(
        fmt::format("{} is empty. The run that should have written it may have failed before "
                    "its first result; look at its log.",
                    path));
  }
  // A journal: JSON lines whose first line is a journal line (whatever the file is called).
  FirstLine line = firstJsonLine(text);
  const bool firstIsObject = line.parsed.is_object();
  const std::string firstSchema = textOr(line.parsed, "schema", "");
  if (firstSchema == kSweepJournalSchemaName) {
    RunFile f = fromSweep(parseSweepJournal(text, path), path);
    f.origin = "journal";
    return f;
  }
  if (firstSchema == "dsperf.train.journal") return loadTrainJournal(text, path);
  if (endsWith(path, ".jsonl") && !firstIsObject) {
    throw ConfigError(
        fmt::format("{} is not a dsbench journal: its first line is not a JSON object. The file "
                    "may be corrupt or not written by dsbench.",
                    path));
  }
  nlohmann::json doc = line.wholeText ? std::move(line.parsed) : nlohmann::json::parse(text, nullptr, false);
  // nccl-tests output, text or -J JSON: imported on the fly (as `dsreport import` would, backend nccl).
  const bool ncclJson = doc.is_object() && !doc.contains("schema") && doc.contains("results") &&
                        (doc.contains("nccl_version") || doc.contains("config"));
  const bool jsonText = text[text.find_first_not_of(" \t\r\n")] == '{';  // a cut-short -J file is no text log
  if (ncclJson || (doc.is_discarded() && !jsonText && looksLikeNcclTests(text))) {
    RunFile f = fromSweep(ncclJson ? importNcclTestsJson(doc, path) : importNcclTestsText(text, path), path);
    f.origin = ncclJson ? "nccl-tests json" : "nccl-tests text";
    return f;
  }
  if (doc.is_discarded())  // says where the parser stopped
    throw notJsonError(text, path, jsonText && looksLikeNcclTests(text) ? "nccl-tests" : "");
  RunFile f = classifyRun(doc, path);
  f.path = path;
  return f;
}

}  // namespace ds::report
