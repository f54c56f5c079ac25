// The versioned schema and the run-file loader every dsreport subcommand reads through: one major
// version check for all kinds, the integer 1 of older files, journals (of killed runs too), and the
// run id.
#include "reports/run/run_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <functional>

#include "engine/common/error.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/input_file.h"
#include "reports/json_io.h"
#include "reports/schema/label.h"
#include "reports/schema/schema_version.h"
#include "reports/sweep/sweep_journal.h"

using namespace ds::report;

namespace {

SweepMeasurement row(std::size_t bytes, double busBw) {
  SweepMeasurement m;
  m.backend = "gloo";
  m.collective = "allreduce";
  m.dtype = "f32";
  m.op = "sum";
  m.worldSize = 2;
  m.requestedBytes = m.bytes = bytes;
  m.count = bytes / 4;
  m.busFactor = 1;
  m.outOfPlace.measured = true;
  m.outOfPlace.iters = 3;
  m.outOfPlace.timeUs = 10;
  m.outOfPlace.busBw = busBw;
  m.outOfPlace.algBw = busBw;
  m.outOfPlace.wrong = 0;
  m.outOfPlace.iter = computeIterStats({9, 10, 11});
  return m;
}

SweepRun sweep(const std::string& label = "") {
  SweepRun r;
  r.args.collectives = {"allreduce"};
  r.metadata.worldSize = 2;
  r.metadata.hosts = {"node-a"};
  r.metadata.label = label;
  r.results = {row(1024, 1.5), row(2048, 2.5)};
  r.summary = summarize(r.results);
  return r;
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string messageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(SchemaVersion, ParsesStringsAndTheOldInteger) {
  EXPECT_EQ(parseSchemaVersion("1.0", "x").str(), "1.0");
  EXPECT_EQ(parseSchemaVersion("1.12", "x").minor, 12);
  EXPECT_EQ(parseSchemaVersion(1, "x").str(), "1.0");
  for (const nlohmann::json& bad : {nlohmann::json("1"), nlohmann::json("v1.0"), nlohmann::json(1.5),
                                    nlohmann::json(-1), nlohmann::json("1.x"), nlohmann::json()}) {
    EXPECT_THROW(parseSchemaVersion(bad, "x"), ds::ConfigError) << bad.dump();
  }
}

TEST(SchemaVersion, SameMajorAnyMinorNewerMajorRefused) {
  nlohmann::json j{{"schema", "dsperf.sweep"}, {"schema_version", "1.7"}};
  EXPECT_EQ(checkSchemaVersion(j, "dsperf.sweep", "r.json").minor, 7);
  j["schema_version"] = 1;
  EXPECT_EQ(checkSchemaVersion(j, "dsperf.sweep", "r.json").str(), "1.0");
  j["schema_version"] = "2.0";
  EXPECT_EQ(messageOf([&] { checkSchemaVersion(j, "dsperf.sweep", "report.json"); }),
            "report.json was written by a newer dsperf (schema dsperf.sweep 2.0); this dsperf reads 1.x. "
            "Upgrade dsperf on this machine.");
  j["schema_version"] = 0;
  EXPECT_NE(messageOf([&] { checkSchemaVersion(j, "dsperf.sweep", "r.json"); }).find("older dsperf"),
            std::string::npos);
  j.erase("schema_version");
  EXPECT_NE(messageOf([&] { checkSchemaVersion(j, "dsperf.sweep", "r.json"); }).find("is missing"),
            std::string::npos);
}

TEST(SchemaVersion, EveryWriterWritesTheStringForm) {
  EXPECT_EQ(sweepToJson(SweepRun{})["schema_version"], kSchemaVersion);
  EXPECT_EQ(trainToJson({})["schema_version"], kSchemaVersion);
  EXPECT_EQ(diagToJson(DiagReport{})["schema_version"], kSchemaVersion);
  EXPECT_EQ(worldToJson({})["schema_version"], kSchemaVersion);
}

TEST(RunFile, LoadsEachKindAndAcceptsMinorVersionsAndTheOldInteger) {
  ds::testing::TempDir dir;
  auto j = sweepToJson(sweep("cluster-a"));
  writeJsonAtomic(dir.file("s.json"), j);
  RunFile f = loadRunFile(dir.file("s.json"));
  EXPECT_EQ(f.kind, RunKind::kSweep);
  EXPECT_STREQ(runKindName(f.kind), "sweep");
  EXPECT_EQ(f.schemaVersion, "1.3");
  EXPECT_EQ(f.label, "cluster-a");
  ASSERT_TRUE(f.sweep.has_value());
  EXPECT_EQ(f.sweep->results.size(), 2u);
  EXPECT_EQ(f.path, dir.file("s.json"));

  j["schema_version"] = 1;
  EXPECT_EQ(classifyRun(j, "old.json").schemaVersion, "1.0");
  j["schema_version"] = "1.3";
  j["a_field_from_1_3"] = true;
  EXPECT_EQ(classifyRun(j, "minor.json").schemaVersion, "1.3");

  nlohmann::json meta{{"label", "gpu-pod-7"}, {"hosts", {"h"}}};
  RunFile t = classifyRun(trainToJson({TrainRunRecord{}}, meta), "t.json");
  EXPECT_EQ(t.kind, RunKind::kTrain);
  EXPECT_EQ(t.label, "gpu-pod-7");
  EXPECT_EQ(t.train->size(), 1u);
  EXPECT_EQ(t.trainMetadata["hosts"][0], "h");

  RunFile d = classifyRun(diagToJson(DiagReport{}), "d.json");
  EXPECT_EQ(d.kind, RunKind::kDiag);
  EXPECT_TRUE(d.diag.has_value());
  RunFile w = classifyRun(worldToJson({RankRecord{}}), "w.json");
  EXPECT_EQ(w.kind, RunKind::kWorld);
  EXPECT_EQ(w.world->size(), 1u);
}

TEST(RunFile, RefusesNewerMajorsOtherSchemasAndNonJson) {
  auto j = sweepToJson(sweep());
  j["schema_version"] = "2.0";
  EXPECT_EQ(messageOf([&] { classifyRun(j, "report.json"); }),
            "report.json was written by a newer dsperf (schema dsperf.sweep 2.0); this dsperf reads 1.x. "
            "Upgrade dsperf on this machine.");
  nlohmann::json future{{"schema", "dsperf.cluster"}, {"schema_version", "3.1"}};
  EXPECT_NE(
      messageOf([&] { classifyRun(future, "f.json"); }).find("newer dsperf (schema dsperf.cluster 3.1)"),
      std::string::npos);
  EXPECT_NE(messageOf([&] {
              classifyRun(nlohmann::json{{"schema", "other"}}, "o.json");
            }).find("o.json is not a result dsreport knows: its schema is 'other'"),
            std::string::npos);
  EXPECT_NE(messageOf([&] {
              classifyRun(nlohmann::json{{"a", 1}}, "n.json");
            }).find("no \"schema\" field"),
            std::string::npos);
  EXPECT_THROW(classifyRun(nlohmann::json::array(), "a.json"), ds::ConfigError);

  ds::testing::TempDir dir;
  writeText(dir.file("cut.json"), sweepToJson(sweep()).dump().substr(0, 100));
  EXPECT_NE(messageOf([&] { loadRunFile(dir.file("cut.json")); }).find("is not valid JSON"),
            std::string::npos);
  writeText(dir.file("empty.json"), "\n");
  EXPECT_NE(messageOf([&] { loadRunFile(dir.file("empty.json")); }).find("is empty"), std::string::npos);
  EXPECT_THROW(loadRunFile(dir.file("missing.json")), ds::IoError);
  auto broken = sweepToJson(sweep());
  broken["results"][0].erase("size");
  EXPECT_THROW(classifyRun(broken, "b.json"), ds::ConfigError);
  // Fields that compare and html read after loading are checked when loading, with the file's name.
  nlohmann::json train = trainToJson({TrainRunRecord{}}, nlohmann::json{{"world_size", "4"}});
  EXPECT_NE(messageOf([&] {
              classifyRun(train, "t.json");
            }).find("t.json: at /metadata/world_size: expected a number, found a string (\"4\")"),
            std::string::npos);
  auto hugeVersion = sweepToJson(sweep());
  hugeVersion["schema_version"] = 4294967297LL;  // would wrap to major 1 in an int
  EXPECT_NE(messageOf([&] { classifyRun(hugeVersion, "v.json"); }).find("not a dsperf schema version"),
            std::string::npos);
}

TEST(RunFile, ReadsTheJournalOfAKilledSweep) {
  ds::testing::TempDir dir;
  std::string path = dir.file("r.journal.jsonl");
  SweepRun s = sweep("lab");
  {
    SweepJournal j(path, s.args, s.metadata);
    j.append(s.results[0]);
    j.append(s.results[1]);
  }
  {
    std::ofstream out(path, std::ios::app);
    out << R"({"type": "measurement", "result": {"backend": "gl)";  // cut by the kill
  }
  RunFile f = loadRunFile(path);
  EXPECT_EQ(f.kind, RunKind::kSweep);
  EXPECT_EQ(f.origin, "journal");
  EXPECT_EQ(f.label, "lab");
  ASSERT_EQ(f.sweep->results.size(), 2u);
  EXPECT_EQ(f.sweep->summary.status, "incomplete");
  EXPECT_EQ(f.runId.size(), 16u);
  // The same journal under another name is recognised by its content.
  writeText(dir.file("copy.txt"), ds::testing::readFile(path));
  EXPECT_EQ(loadRunFile(dir.file("copy.txt")).runId, f.runId);
}

TEST(RunFile, ReadsATrainJournal) {
  ds::testing::TempDir dir;
  std::string path = dir.file("t.journal.jsonl");
  TrainRunRecord r;
  r.model = "mlp:64x2";
  appendTrainJournal(path, r);
  r.bucketCapMb = 5;
  appendTrainJournal(path, r);
  RunFile f = loadRunFile(path);
  EXPECT_EQ(f.kind, RunKind::kTrain);
  ASSERT_EQ(f.train->size(), 2u);
  EXPECT_EQ((*f.train)[1].bucketCapMb, 5);
  writeText(dir.file("bad.jsonl"), "not json\n");
  EXPECT_THROW(loadRunFile(dir.file("bad.jsonl")), ds::ConfigError);
}

TEST(RunFile, RunIdIsStableAndIgnoresLabelAndVersionForm) {
  auto a = classifyRun(sweepToJson(sweep("a")), "a.json");
  auto b = classifyRun(sweepToJson(sweep("b")), "b.json");
  auto j = sweepToJson(sweep("a"));
  j["schema_version"] = 1;
  auto c = classifyRun(j, "c.json");
  EXPECT_EQ(a.runId.size(), 16u);
  EXPECT_EQ(a.runId.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(a.runId, b.runId);
  EXPECT_EQ(a.runId, c.runId);
  SweepRun other = sweep("a");
  other.results[1].outOfPlace.busBw = 2.6;
  EXPECT_NE(classifyRun(sweepToJson(other), "o.json").runId, a.runId);
  // A known value, so that the hash never changes by accident between releases (history keys on it).
  EXPECT_EQ(runIdOf(RunKind::kWorld, nlohmann::json::object()), "c294aaba96ba8407");
  EXPECT_NE(runIdOf(RunKind::kWorld, nlohmann::json::object()),
            runIdOf(RunKind::kDiag, nlohmann::json::object()));
}

TEST(Label, OneRuleForEveryTool) {
  EXPECT_EQ(checkLabel("dgx-a100 pod2"), "dgx-a100 pod2");
  EXPECT_EQ(checkLabel(std::string(64, 'x')), std::string(64, 'x'));
  EXPECT_NE(messageOf([] { checkLabel("", "--label"); }).find("--label is empty"), std::string::npos);
  EXPECT_NE(messageOf([] { checkLabel(std::string(65, 'x')); }).find("is 65 characters long"),
            std::string::npos);
  EXPECT_NE(messageOf([] { checkLabel("a\tb"); }).find("(byte 0x09) at position 2"), std::string::npos);
  EXPECT_NE(messageOf([] { checkLabel("caf\xc3\xa9"); }).find("non-ASCII"), std::string::npos);
  EXPECT_NE(messageOf([] { checkLabel(" a"); }).find("starts or ends with a space"), std::string::npos);
}

// Golden files: the writers' exact output for fixed records (a change to a key or its form shows up
// here, and must come with a schema version decision), and the readers' round trip from them.
namespace {

std::string goldenPath(const std::string& name) { return std::string(DS_REPORTS_TEST_DATA) + "/" + name; }

void checkGolden(const nlohmann::json& got, const std::string& name) {
  if (std::getenv("DS_UPDATE_GOLDEN")) {
    writeJsonAtomic(goldenPath(name), got);
    GTEST_SKIP() << name << " rewritten (DS_UPDATE_GOLDEN); rerun without it to compare";
  }
  nlohmann::json want = readJson(goldenPath(name));
  EXPECT_EQ(got, want) << name << ": " << nlohmann::json::diff(want, got).dump(1);
  // The text on disk is the writer's own formatting too (2-space indent, sorted keys, final newline).
  EXPECT_EQ(ds::testing::readFile(goldenPath(name)), got.dump(2) + "\n") << name;
}

}  // namespace

TEST(Golden, SweepWriterAndReader) {
  SweepRun s = sweep("pod-7");
  s.args.minBytes = 1024;
  s.args.maxBytes = 2048;
  s.args.stepFactor = 2;
  s.args.iters = 3;
  s.metadata.ranks = {SweepRank{0, 0, 0, "node-a", 4242, "cpu"}, SweepRank{1, 1, 0, "node-a", 4243, "cpu"}};
  s.metadata.versions = {{"dsperf", "0.1.0"}, {"gloo", "0.5.0"}};
  s.metadata.startTime = "2026-01-31T12:00:00.000Z";
  s.metadata.endTime = "2026-01-31T12:00:01.500Z";
  s.results[1].inPlace = s.results[1].outOfPlace;
  s.results[1].inPlace.wrong = -1;
  s.results[1].outOfPlace.ranks = {{0, 9.5, computeIterStats({9, 10})},
                                   {1, 10.5, computeIterStats({10, 11})}};
  s.notes = {"backend mpi does not support avg"};
  // Schema 1.1: --repeat 2 keeps both passes of a row.
  s.args.repeat = 2;
  s.results[0].outOfPlace.repeats = {{10.0, 0.1, 0.1, computeIterStats({10, 10})},
                                     {12.0, 0.0833, 0.0833, computeIterStats({12, 12})}};
  // Schema 1.2: -I 2 -K 1 keeps the first row's per-iteration times; every iter block has p90 and p99.9.
  s.args.perIterTiming = 2;
  s.args.perIterSkip = 1;
  s.results[0].outOfPlace.timesUs = {14.0, 10.0, 11.0, 12.0};
  s.summary = summarize(s.results);
  checkGolden(sweepToJson(s), "sweep_golden.json");
  auto back = sweepFromJson(readJson(goldenPath("sweep_golden.json")), "sweep_golden.json");
  EXPECT_EQ(sweepToJson(back), sweepToJson(s));
  EXPECT_EQ(back.metadata.label, "pod-7");
  EXPECT_EQ(back.results[1].inPlace.wrong, -1);
  EXPECT_EQ(back.results[1].outOfPlace.ranks[1].iter.p50Us, 10.5);
  EXPECT_EQ(back.args.perIterTiming, 2);
  EXPECT_EQ(back.args.perIterSkip, 1);
  EXPECT_EQ(back.results[0].outOfPlace.timesUs, (std::vector<double>{14.0, 10.0, 11.0, 12.0}));
  EXPECT_TRUE(back.results[1].outOfPlace.timesUs.empty());
  ASSERT_TRUE(back.results[1].outOfPlace.ranks[1].iter.p999Us.has_value());
}

TEST(Golden, TrainWriterAndReader) {
  TrainRunRecord t;
  t.model = "mlp:1024x24";
  t.params = 25190400;
  t.worldSize = 2;
  t.backend = "gloo";
  t.device = "cpu";
  t.perRankBatch = 32;
  t.steps = 20;
  t.warmup = 3;
  t.optimizer = "sgd";
  t.bucketCapMb = 25;
  t.commHook = "allreduce";
  t.buckets = 5;
  t.stepMs = summarize(std::vector<double>{10, 11, 12, 14});
  t.samplesPerSec = 5818.2;
  t.overlapEfficiency = 0.25;
  t.ddp.bucket_sizes = {1048576, 26214400};
  t.repeats = {{t.stepMs, 5818.2}, {summarize(std::vector<double>{11, 12}), 5500}};  // schema 1.1
  t.dtype = "bf16";  // --dtype (optional fields: older files read as f32)
  t.gemmFlopsPerStep = 4.8e9;
  t.gemmTflops = 0.44;
  nlohmann::json meta{{"label", "pod-7"}, {"hosts", {"node-a", "node-a"}}, {"world_size", 2}};
  checkGolden(trainToJson({t}, meta), "train_golden.json");
  RunFile f = classifyRun(readJson(goldenPath("train_golden.json")), "train_golden.json");
  EXPECT_EQ(trainToJson(*f.train, f.trainMetadata), trainToJson({t}, meta));
  EXPECT_EQ(f.label, "pod-7");
}

// Issue 18: readers take regular files only, of a bounded size, and say what they found.
TEST(InputFiles, ADirectoryIsADirectoryNotEmpty) {
  ds::testing::TempDir d;
  try {
    loadRunFile(d.path());
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(d.path() + " is a directory"), std::string::npos) << e.what();
  }
}

TEST(InputFiles, DevicesAndFifosAreRefusedWithoutReading) {
  ds::testing::TempDir d;
  const std::string fifo = d.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo}) {
    try {
      readInputFile(path);  // /dev/zero would read forever, the FIFO block forever
      FAIL() << path;
    } catch (const ds::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
}

TEST(InputFiles, TheSizeCapSaysHowBigAndHowToRaiseIt) {
  ds::testing::TempDir d;
  { std::ofstream(d.file("big.json")) << std::string(3 << 20, ' ') << "{}"; }
  setMaxInputBytes(2 << 20);
  try {
    readInputFile(d.file("big.json"));
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("is 3 MiB, more than dsreport reads (2 MiB"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--max-input-mb"), std::string::npos);
  }
  setMaxInputBytes(kDefaultMaxInputBytes);
  EXPECT_EQ(readInputFile(d.file("big.json")).size(), (3u << 20) + 2);
}

TEST(InputFiles, JsonErrorsNameTheFileWithoutTheLibrarysCodes) {
  ds::testing::TempDir d;
  auto doc =
      nlohmann::json::parse(ds::testing::readFile(std::string(DS_REPORTS_TEST_DATA) + "/sweep_golden.json"));
  doc["results"][0]["out_of_place"]["bus_bw"] = "fast";
  { std::ofstream(d.file("bad.json")) << doc.dump(); }
  try {
    loadRunFile(d.file("bad.json"));
    FAIL();
  } catch (const ds::ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(d.file("bad.json")), std::string::npos) << m;
    EXPECT_NE(m.find("at /results/0/out_of_place/bus_bw: expected a number, found a string"), std::string::npos)
        << m;
    EXPECT_EQ(m.find("[json.exception"), std::string::npos) << m;
  }
}
