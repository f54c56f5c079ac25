// The shipped JSON Schema (reports/schema/dsperf.schema.json) accepts what our writers write, journals
// included, and rejects a newer major version and a document with a missing field. Runs the shipped
// validator (reports/schema/validate_json.py, python3-jsonschema).
#include <gtest/gtest.h>

#include <fstream>

#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/diag/diag_schema.h"
#include "reports/gpu/gpu_copy.h"
#include "reports/json_io.h"
#include "reports/schema/world.h"
#include "reports/sweep/sweep_journal.h"
#include "reports/sweep/sweep_schema.h"
#include "reports/train/train_schema.h"

using namespace ds::report;

namespace {

const std::string kValidator = std::string(DS_SCHEMA_DIR) + "/validate_json.py";

ds::testing::RunResult validate(const std::vector<std::string>& files) {
  std::vector<std::string> argv{"python3", kValidator};
  argv.insert(argv.end(), files.begin(), files.end());
  return ds::testing::run(argv, ds::testing::cleanOptions(std::chrono::seconds(60)));
}

bool haveJsonschema() {
  return ds::testing::run({"python3", "-c", "import jsonschema"}, ds::testing::cleanOptions()).exitCode == 0;
}

SweepMeasurement row(std::size_t bytes, bool inPlace) {
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
  m.outOfPlace.timeUs = 5;
  m.outOfPlace.wrong = 0;
  m.outOfPlace.iter = computeIterStats({4, 5, 6});
  m.outOfPlace.ranks = {{0, 5, computeIterStats({4, 5, 6})}};
  if (inPlace) {
    m.inPlace = m.outOfPlace;
    m.inPlace.wrong = -1;
  }
  return m;
}

}  // namespace

TEST(JsonSchema, OurWritersOutputValidates) {
  if (!haveJsonschema()) GTEST_SKIP() << "python3-jsonschema is not installed (scripts/setup.sh installs it)";
  ds::testing::TempDir dir;
  SweepRun s;
  s.metadata.hosts = {"node-a"};
  s.metadata.label = "lab pod-1";
  s.metadata.ranks = {SweepRank{0, 0, 0, "node-a", 42, "cpu"}};
  // Hardware recorded: metadata "hardware" and a "bound" per row (reports/baseline/expected.h).
  ds::hw::HostHardware hw;
  hw.host = "node-a";
  hw.cpuModel = "AMD EPYC";
  hw.nics = {{"eth0", "ethernet", "1af4:0001", 0, true}};
  hw.pcie = {{"gpu0", "0000:17:00.0", 4, 16, 31.5}};
  hw.memBwGBps = 20;
  s.metadata.hardware = {hw};
  s.results = {row(8, true), row(1024, false)};
  s.notes = {"skipped: x"};
  s.summary = summarize(s.results);
  writeJsonAtomic(dir.file("sweep.json"), sweepToJson(s));
  {
    SweepJournal j(dir.file("sweep.journal.jsonl"), s.args, s.metadata);
    j.append(s.results[0]);
    j.note("a note");
    j.end(s.summary, "2026-01-01T00:00:00Z");
  }
  TrainRunRecord t;
  t.model = "mlp:64x2";
  t.stepMs = summarize(std::vector<double>{1, 2, 3});
  t.ddp.bucket_sizes = {1024};
  writeJsonAtomic(dir.file("train.json"),
                  trainToJson({t}, {{"label", "x"}, {"hosts", {"h"}}, {"world_size", 1}}));
  appendTrainJournal(dir.file("train.journal.jsonl"), t);
  DiagReport d;
  DiagRecord rec;
  rec.id = "net.x";
  rec.family = "net";
  rec.status = DiagStatus::kWarn;
  rec.message = "m";
  d.checks = {rec};
  writeJsonAtomic(dir.file("diag.json"), diagToJson(d));
  RankRecord rr;
  rr.host = "h";
  writeJsonAtomic(dir.file("world.json"), worldToJson({rr}));
  // dsbench gpu: one measured row with a bound, one skipped peer row with an unknown bound.
  GpuCopyRun g;
  g.host = "h";
  g.bytes = 1 << 20;
  g.iters = 3;
  g.label = "lab pod-1";
  GpuCopyDevice gd;
  gd.pcieGen = 5;
  gd.pcieWidth = 16;
  gd.nvlinks = -1;
  GpuCopyDevice gd1 = gd;
  gd1.index = 1;
  g.devices = {gd, gd1};
  GpuCopyRow h2d;
  h2d.testcase = "host_to_device_memcpy_ce";
  h2d.bytes = g.bytes;
  h2d.iters = 3;
  h2d.medianGBps = h2d.minGBps = h2d.maxGBps = 50;
  h2d.medianUs = 21;
  GpuCopyRow peer = h2d;
  peer.testcase = "device_to_device_memcpy_read_sm";
  peer.path = CopyPath::kPeerRead;
  peer.method = CopyMethod::kKernel;
  peer.peer = 1;
  peer.skipped = true;
  peer.medianGBps = peer.minGBps = peer.maxGBps = peer.medianUs = 0;
  g.rows = {h2d, peer};
  boundCopyRows(g.rows, g.devices);
  writeJsonAtomic(dir.file("gpu.json"), gpuCopyRunToJson(g));
  auto r = validate({dir.file("sweep.json"), dir.file("sweep.journal.jsonl"), dir.file("train.json"),
                     dir.file("train.journal.jsonl"), dir.file("diag.json"), dir.file("world.json"), dir.file("gpu.json"),
                     std::string(DS_IMPORT_GOLDEN), std::string(DS_REPORTS_TEST_DATA) + "/sweep_golden.json",
                     std::string(DS_REPORTS_TEST_DATA) + "/train_golden.json"});
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("10 file(s) valid"), std::string::npos) << r.out;
}

TEST(JsonSchema, RejectsANewerMajorAndAMissingField) {
  if (!haveJsonschema()) GTEST_SKIP() << "python3-jsonschema is not installed (scripts/setup.sh installs it)";
  ds::testing::TempDir dir;
  SweepRun s;
  s.results = {row(8, false)};
  auto j = sweepToJson(s);
  j["schema_version"] = "2.0";
  writeJsonAtomic(dir.file("v2.json"), j);
  j = sweepToJson(s);
  j["results"][0].erase("bus_factor");
  writeJsonAtomic(dir.file("missing.json"), j);
  j = sweepToJson(s);
  j["metadata"]["label"] = "";
  writeJsonAtomic(dir.file("label.json"), j);
  for (const char* name : {"v2.json", "missing.json", "label.json"}) {
    auto r = validate({dir.file(name)});
    EXPECT_EQ(r.exitCode, 1) << name << ": " << r.out << r.err;
  }
  auto ok = sweepToJson(s);
  ok["schema_version"] = 1;  // the integer of older files
  ok["a_field_from_1_4"] = {1, 2};
  writeJsonAtomic(dir.file("old.json"), ok);
  EXPECT_EQ(validate({dir.file("old.json")}).exitCode, 0);
}

// Placement (schema 1.x, optional): accepted in sweep, train and world ranks; a malformed one is not.
TEST(JsonSchema, PlacementValidatesAndAMalformedOneDoesNot) {
  if (!haveJsonschema()) GTEST_SKIP() << "python3-jsonschema is not installed (scripts/setup.sh installs it)";
  ds::testing::TempDir dir;
  Placement p{"0-1,3", 3, 4, 0.75, 2};
  SweepRun s;
  s.results = {row(8, false)};
  SweepRank sr{0, 0, 0, "node-a", 42, "cpu"};
  sr.placement = p;
  s.metadata.ranks = {sr};
  writeJsonAtomic(dir.file("sweep.json"), sweepToJson(s));
  RankRecord rr;
  rr.host = "h";
  rr.placement = p;
  writeJsonAtomic(dir.file("world.json"), worldToJson({rr}));
  TrainRunRecord t;
  t.model = "mlp:64x2";
  t.stepMs = summarize(std::vector<double>{1, 2, 3});
  nlohmann::json placement = p;
  writeJsonAtomic(dir.file("train.json"),
                  trainToJson({t}, {{"ranks", {{{"rank", 0}, {"host", "h"}, {"placement", placement}}}}}));
  auto r = validate({dir.file("sweep.json"), dir.file("world.json"), dir.file("train.json")});
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  auto bad = worldToJson({rr});
  bad["ranks"][0]["placement"]["cpus"] = "zero";
  writeJsonAtomic(dir.file("bad.json"), bad);
  EXPECT_EQ(validate({dir.file("bad.json")}).exitCode, 1);
  EXPECT_EQ(sweepFromJson(sweepToJson(s), "s.json").metadata.ranks[0].placement->cpus, "0-1,3");
}

// Fleet mode (dsperf.fleet 1.0): the fixture on its own and inside a dsdiag report validate; a pair with
// an unknown outcome, a host with an unknown state or a missing judgement do not.
TEST(JsonSchema, FleetReportValidatesAloneAndInsideADiagReport) {
  if (!haveJsonschema()) GTEST_SKIP() << "python3-jsonschema is not installed (scripts/setup.sh installs it)";
  ds::testing::TempDir dir;
  const std::string fixture = std::string(DS_REPORTS_TEST_DATA) + "/fleet16.json";
  DiagReport d;
  d.mode = "world";
  d.worldSize = 16;
  d.fleet = fleetFromJson(readJson(fixture), fixture);
  writeJsonAtomic(dir.file("diag.json"), diagToJson(d));
  nlohmann::json alone = *d.fleet;
  writeJsonAtomic(dir.file("fleet.json"), alone);
  auto r = validate({fixture, dir.file("diag.json"), dir.file("fleet.json")});
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  auto bad = diagToJson(d);
  bad["fleet"]["input"]["pairs"][2]["outcome"] = "slow";
  writeJsonAtomic(dir.file("outcome.json"), bad);
  bad = diagToJson(d);
  bad["fleet"]["judgement"]["hosts"][0]["state"] = "dead";
  writeJsonAtomic(dir.file("state.json"), bad);
  auto noJudgement = alone;
  noJudgement.erase("judgement");
  writeJsonAtomic(dir.file("nojudgement.json"), noJudgement);
  for (const char* name : {"outcome.json", "state.json", "nojudgement.json"}) {
    auto v = validate({dir.file(name)});
    EXPECT_EQ(v.exitCode, 1) << name << ": " << v.out << v.err;
  }
}
