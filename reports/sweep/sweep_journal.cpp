#include "reports/sweep/sweep_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "engine/common/error.h"
#include "reports/input_file.h"
#include "reports/json_io.h"

namespace ds::report {

std::string journalPathFor(const std::string& jsonPath) {
  std::string base = jsonPath;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) base.resize(base.size() - 5);
  return base + ".journal.jsonl";
}

SweepJournal::SweepJournal(const std::string& path, const SweepArgs& args, const SweepMetadata& meta)
    : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw IoError(fmt::format("cannot open the journal {}: {}. Check that the folder exists and is writable.",
                              path, errnoText(errno)));
  }
  writeLine({{"schema", kSweepJournalSchemaName},
             {"schema_version", kSweepSchemaVersion},
             {"type", "start"},
             {"args", args},
             {"metadata", meta}});
}

SweepJournal::~SweepJournal() {
  if (fd_ >= 0) {
    ::fsync(fd_);
    ::close(fd_);
  }
}

void SweepJournal::append(const SweepMeasurement& m) { writeLine({{"type", "measurement"}, {"result", m}}); }

void SweepJournal::note(const std::string& text) { writeLine({{"type", "note"}, {"text", text}}); }

void SweepJournal::end(const SweepSummary& s, const std::string& endTime) {
  writeLine({{"type", "end"}, {"summary", s}, {"end_time", endTime}});
  ::fsync(fd_);
}

void SweepJournal::writeLine(const nlohmann::json& j) {
  std::string line = dumpJson(j) + "\n";
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(fmt::format("cannot append to the journal {}: {}", path_, errnoText(errno)));
    off += static_cast<size_t>(n);
  }
}

SweepRun readSweepJournal(const std::string& path) { return parseSweepJournal(readInputFile(path), path); }

SweepRun parseSweepJournal(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  SweepRun run;
  bool started = false, ended = false;
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;  // a line cut short by a kill
    try {
      std::string type = textOr(j, "type", "");
      if (type == "start") {
        if (textOr(j, "schema", "") != kSweepJournalSchemaName) continue;
        checkSchemaVersion(j, kSweepJournalSchemaName, fmt::format("{} line {}", path, lineNo));
        run = SweepRun{};
        readTo(j.at("args"), run.args);
        readTo(j.at("metadata"), run.metadata);
        started = true;
        ended = false;
      } else if (type == "measurement" && started) {
        run.results.push_back(j.at("result").get<SweepMeasurement>());
      } else if (type == "note" && started) {
        run.notes.push_back(textOr(j, "text", ""));
      } else if (type == "end" && started) {
        readTo(j.at("summary"), run.summary);
        run.metadata.endTime = textOr(j, "end_time", "");
        ended = true;
      }
    } catch (const nlohmann::json::exception& e) {
      throw jsonFieldError(e, j, fmt::format("{} line {}", path, lineNo), kSweepJournalSchemaName);
    }
  }
  if (!started) throw ConfigError(fmt::format("{} holds no dsperf sweep journal (no start line).", path));
  if (!ended) {
    run.summary = summarize(run.results);
    run.summary.status = "incomplete";
    run.summary.error = "the journal has no end line: the run was killed or lost a rank";
  }
  return run;
}

}  // namespace ds::report
