// One result file of any dsperf kind, loaded and classified: what every dsreport subcommand (html,
// compare, ingest, dashboard) reads. The schema's major version is checked here, once, for all.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "reports/diag/diag_schema.h"
#include "reports/schema/world.h"
#include "reports/sweep/sweep_schema.h"
#include "reports/train/train_schema.h"

namespace ds::report {

enum class RunKind { kSweep, kTrain, kDiag, kWorld };
const char* runKindName(RunKind k);  // "sweep", "train", "diag", "world"

struct RunFile {
  std::string path;  // as given on the command line
  RunKind kind = RunKind::kSweep;
  std::string schemaVersion;  // "1.0" (an integer 1 from older files reads as "1.0")
  // The cluster / system label (dsbench --label, dsreport ingest --label); empty when none.
  std::string label;
  // Stable identity of the run: a hash of its canonical JSON, so the same run ingested twice is
  // recognised. Hex, 16 characters.
  std::string runId;
  // Exactly one of these is set, by kind.
  std::optional<SweepRun> sweep;
  std::optional<std::vector<TrainRunRecord>> train;
  nlohmann::json trainMetadata;  // the train file's metadata block (null when absent)
  std::optional<DiagReport> diag;
  std::optional<std::vector<RankRecord>> world;  // kWorld (added by core)
  nlohmann::json raw;  // the document as read (a journal or an import: the equivalent dsperf document)
  // Where a run came from when it is not a plain dsperf JSON (added by core): "journal" (a sweep or
  // train journal, possibly of a killed run), "nccl-tests text", "nccl-tests json"; empty otherwise.
  std::string origin;
};

// Reads and classifies a dsperf JSON result (sweep, train, diag, world; also a dsbench journal,
// .jsonl, of sweep or train, and nccl-tests output, text or -J JSON, imported on the fly). Throws ConfigError
// naming the path and the reason: not JSON, unknown schema, a newer major version ("written by a newer
// dsperf: schema 2.0, this dsreport reads 1.x; upgrade dsreport"), missing fields. IoError when unreadable.
RunFile loadRunFile(const std::string& path);
// The same from a parsed document; `origin` names it in errors.
RunFile classifyRun(const nlohmann::json& doc, const std::string& origin);

// The runId of a document as classifyRun would compute it: FNV-1a 64 of the canonical JSON (keys
// sorted, the "schema_version" and metadata "label" left out, so relabelling or a minor version bump
// does not make a new run). 16 lower-case hex characters. (Added by core.)
std::string runIdOf(RunKind kind, const nlohmann::json& canonical);

}  // namespace ds::report
