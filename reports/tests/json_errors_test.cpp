// Issue 18: an error about a file's content names the file, the JSON path (RFC 6901) of the value,
// what was expected and what was found, and what to do; through dsreport it is exit 2, never an
// "internal error". One corrupted copy per kind of file dsreport reads and per way of breaking it:
// a wrong type deep in the document, a missing field, and the text cut short.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/diag/diag_schema.h"
#include "reports/import/nccl_tests_import.h"
#include "reports/json_io.h"
#include "reports/run/run_file.h"
#include "reports/schema/world.h"
#include "reports/sweep/sweep_journal.h"

using namespace ds::report;
using nlohmann::json;

namespace {

struct Broken {
  std::string file;
  std::string expect;  // what the message holds besides the file's name
};

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

json dataFile(const std::string& path) { return json::parse(ds::testing::readFile(path)); }

// Three corrupted copies of doc: a string where `typePtr` wants something else, the field at
// `missingPtr` removed, and the text cut at two thirds.
void breakThreeWays(const ds::testing::TempDir& dir, const std::string& stem, const json& doc,
                    const std::string& typePtr, const std::string& missingPtr, std::vector<Broken>& out) {
  json wrong = doc;
  wrong[json::json_pointer(typePtr)] = "garbage";
  write(dir.file(stem + "-type.json"), wrong.dump(1));
  out.push_back({dir.file(stem + "-type.json"), "at " + typePtr + ": expected "});
  json missing = doc;
  json::json_pointer p(missingPtr);
  missing[p.parent_pointer()].erase(p.back());
  write(dir.file(stem + "-missing.json"), missing.dump(1));
  out.push_back({dir.file(stem + "-missing.json"), "at " + missingPtr + ": expected a value, found nothing"});
  const std::string text = doc.dump(1);
  write(dir.file(stem + "-cut.json"), text.substr(0, text.size() * 2 / 3));
  out.push_back({dir.file(stem + "-cut.json"), "is not valid JSON: it ends early, at line "});
}

// Every kind of file dsreport reads, broken.
std::vector<Broken> brokenFiles(const ds::testing::TempDir& dir) {
  std::vector<Broken> out;
  const std::string data = DS_REPORTS_TEST_DATA;
  breakThreeWays(dir, "sweep", dataFile(data + "/sweep_golden.json"), "/results/1/out_of_place/bus_bw",
                 "/metadata/ranks/0/host", out);
  breakThreeWays(dir, "train", dataFile(data + "/train_golden.json"), "/runs/0/per_rank_batch",
                 "/runs/0/loss/end", out);
  DiagReport diag;
  diag.checks = {DiagRecord{"env.a", "env", DiagStatus::kPass, "ok", "", {}, 0, "h"},
                 DiagRecord{"env.b", "env", DiagStatus::kWarn, "hm", "do x", {}, 0, "h"}};
  breakThreeWays(dir, "diag", diagToJson(diag), "/checks/1/rank", "/checks/1/family", out);
  breakThreeWays(dir, "world", worldToJson({RankRecord{}, RankRecord{}}), "/ranks/1/pid", "/ranks/1/host", out);
  breakThreeWays(dir, "nccl", dataFile(DS_IMPORT_TEST_DATA + std::string("/all_reduce_j3.json")),
                 "/results/2/out_of_place/bus_bw", "/results/2/size", out);

  // Journals: one line at fault, named by its number (a line cut short by a kill is skipped on purpose).
  SweepRun run = sweepFromJson(dataFile(data + "/sweep_golden.json"), "golden");
  const std::string journal = dir.file("sweep.journal.jsonl");
  {
    SweepJournal j(journal, run.args, run.metadata);
    for (const auto& r : run.results) j.append(r);
  }
  std::string text = ds::testing::readFile(journal);
  const auto third = text.find('\n', text.find('\n') + 1) + 1;  // line 3: the second measurement
  json line = json::parse(text.substr(third, text.find('\n', third) - third));
  line["result"]["count"] = "many";
  write(dir.file("bad.journal.jsonl"), text.substr(0, third) + line.dump() + "\n");
  out.push_back({dir.file("bad.journal.jsonl"), " line 3: at /result/count: expected a number, found a string"});
  TrainRunRecord t;
  appendTrainJournal(dir.file("train.journal.jsonl"), t);
  json trainLine = json::parse(ds::testing::readFile(dir.file("train.journal.jsonl")));
  trainLine["run"].erase("steps");
  write(dir.file("bad-train.journal.jsonl"), ds::testing::readFile(dir.file("train.journal.jsonl")) +
                                                 trainLine.dump() + "\n");
  out.push_back({dir.file("bad-train.journal.jsonl"), " line 2: at /run/steps: expected a value, found nothing"});
  return out;
}

std::string messageOf(const std::string& path) {
  try {
    loadRunFile(path);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

}  // namespace

TEST(JsonErrors, EveryKindOfFileNamesTheFileAndTheJsonPath) {
  ds::testing::TempDir dir;
  for (const auto& b : brokenFiles(dir)) {
    const std::string m = messageOf(b.file);
    EXPECT_EQ(m.rfind(b.file, 0), 0u) << "the message starts with the file: " << m;
    EXPECT_NE(m.find(b.expect), std::string::npos) << b.expect << "\n  in: " << m;
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
    EXPECT_EQ(m.find("type must be"), std::string::npos) << "the library's own words: " << m;
    // What to do: regenerate (with the tool named) or upgrade.
    EXPECT_TRUE(m.find("regenerate it with") != std::string::npos || m.find("rerun") != std::string::npos) << m;
  }
}

TEST(JsonErrors, TheMessageSaysWhatWasFoundAndANewerMinorVersionSaysUpgrade) {
  auto doc = dataFile(std::string(DS_REPORTS_TEST_DATA) + "/sweep_golden.json");
  doc["results"][1]["out_of_place"]["bus_bw"] = "fast";
  try {
    classifyRun(doc, "run.json");
    FAIL() << "a string bus_bw was read";
  } catch (const ds::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run.json: at /results/1/out_of_place/bus_bw: expected a number, found a string (\"fast\"). It is "
              "not a valid dsperf sweep result: it was changed or damaged after it was written; regenerate it "
              "with `dsbench coll ... -J FILE`.");
  }
  doc["schema_version"] = "1.99";
  try {
    classifyRun(doc, "run.json");
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("written by a newer dsperf (schema version 1.99"), std::string::npos)
        << e.what();
  }
  // A number beyond the field's type says the range, not "internal error".
  doc["schema_version"] = "1.0";
  doc["results"][1]["out_of_place"]["bus_bw"] = 1.0;
  doc["results"][0]["world_size"] = 1e30;
  try {
    classifyRun(doc, "run.json");
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("at /results/0/world_size: expected a whole number from -2147483648 to "
                                         "2147483647, found a number (1e+30)"),
              std::string::npos)
        << e.what();
  }
}

TEST(JsonErrors, SyntaxErrorsSayTheLineColumnAndPath) {
  ds::testing::TempDir dir;
  write(dir.file("x.json"), "{\"schema\": \"dsperf.train\",\n \"runs\": [{\"model\": tru}]}");
  const std::string m = messageOf(dir.file("x.json"));
  EXPECT_NE(m.find("is not valid JSON: at line 2 column "), std::string::npos) << m;
  EXPECT_NE(m.find("inside /runs/0/model"), std::string::npos) << m;
  EXPECT_NE(m.find("dsbench train"), std::string::npos) << "the schema seen before the error picks the advice: " << m;
  EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
}

// Through the real dsreport: exit 2 (bad input) with the file and the path, for html, compare and ingest.
TEST(JsonErrors, DsreportExitsTwoNamingTheFileAndPath) {
  ds::testing::TempDir dir;
  const std::string dsreport = ds::testing::binDir() + "/dsreport";
  const std::string good = std::string(DS_REPORTS_TEST_DATA) + "/sweep_golden.json";
  for (const auto& b : brokenFiles(dir)) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{dsreport, "html", b.file, "-o", dir.file("r.html")},
          std::vector<std::string>{dsreport, "compare", good, b.file}}) {
      auto r = ds::testing::run(args, ds::testing::cleanOptions());
      EXPECT_EQ(r.exitCode, 2) << args[1] << " " << b.file << "\n" << r.err;
      EXPECT_NE(r.err.find(b.file), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(b.expect), std::string::npos) << b.expect << "\n  in: " << r.err;
      EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    }
  }
  auto ingest = ds::testing::run({dsreport, "ingest", dir.file("sweep-type.json"), "--db", dir.file("h.sqlite")},
                                 ds::testing::cleanOptions());
  EXPECT_EQ(ingest.exitCode, 2) << ingest.err;
  EXPECT_NE(ingest.err.find("at /results/1/out_of_place/bus_bw"), std::string::npos) << ingest.err;
  auto import = ds::testing::run({dsreport, "import", dir.file("nccl-missing.json"), "-o", dir.file("i.json")},
                                 ds::testing::cleanOptions());
  EXPECT_EQ(import.exitCode, 2) << import.err;
  EXPECT_NE(import.err.find("at /results/2/size"), std::string::npos) << import.err;
}
