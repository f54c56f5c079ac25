// Flight Recorder dumps into RankDump: every format version, pickle and JSON, real torch 2.15 dumps,
// unknown and wrong-typed fields, broken files, and loading a set of files, folders and globs.
#include "diag/hang/dump_reader.h"
#include "diag/hang/tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "engine/common/error.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"

#ifndef DS_HANG_FR_DUMP_DATA
#define DS_HANG_FR_DUMP_DATA "diag/hang/tests/data/fr_dump"
#endif

using namespace ds::diag::hang;
using ds::ConfigError;
using namespace std::string_literals;

namespace {

std::string dataPath(const std::string& name) { return std::string(DS_HANG_FR_DUMP_DATA) + "/" + name; }
std::string data(const std::string& name) { return ds::testing::readFile(dataPath(name)); }

bool has(const std::vector<std::string>& sentences, const std::string& part) {
  for (const auto& s : sentences) {
    if (s.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string configError(const std::string& bytes) {
  try {
    parseDump(bytes, "rank_9", 9);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The fixtures (make_fixtures.py) hold rank 1 of 4: five entries on groups "0" and "1".
void expectFixture(const RankDump& d, const std::string& version) {
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.version, version);
  EXPECT_TRUE(d.warnings.empty()) << d.warnings.front();
  ASSERT_EQ(d.entries.size(), 5u);
  const FrEntry& e = d.entries[0];
  EXPECT_EQ(e.recordId, 10);
  EXPECT_EQ(e.pgId, "0");
  EXPECT_EQ(e.pgName, "0");
  EXPECT_EQ(e.pgDesc, "default_pg");
  EXPECT_EQ(e.collectiveSeqId, 5);
  EXPECT_EQ(e.p2pSeqId, 0);
  EXPECT_EQ(e.opId, 20);
  EXPECT_EQ(e.profilingName, "nccl:all_reduce");
  EXPECT_EQ(e.backend, "nccl");
  EXPECT_EQ(e.op, "all_reduce");
  EXPECT_FALSE(e.p2pPeer.has_value());
  EXPECT_EQ(e.inputSizes, (std::vector<std::vector<std::int64_t>>{{1024, 4}}));
  EXPECT_EQ(e.outputDtypes, std::vector<std::string>{"Float"});
  EXPECT_EQ(e.state, "completed");
  EXPECT_EQ(e.timeCreatedNs, 1'700'000'000'000'000'000);
  EXPECT_FALSE(e.timeDiscoveredStartedNs.has_value());
  EXPECT_EQ(e.durationMs, 1.25);
  EXPECT_EQ(e.timeoutMs, 600000);
  EXPECT_EQ(e.isP2p, false);
  EXPECT_EQ(e.retired, true);
  EXPECT_FALSE(d.entries[1].durationMs.has_value());  // not completed: no duration
  EXPECT_EQ(d.entries[2].op, "send");
  EXPECT_EQ(d.entries[2].p2pPeer, 0);
  EXPECT_EQ(d.entries[2].isP2p, true);
  EXPECT_EQ(d.entries[3].op, "recv");
  EXPECT_EQ(d.entries[3].p2pPeer, 0);
  EXPECT_EQ(d.entries[3].pgDesc, "sub");
  EXPECT_EQ(d.entries[4].collectiveSeqId, 7);
  ASSERT_EQ(d.groups.size(), 2u);
  EXPECT_EQ(d.groups.at("0").ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(d.groups.at("0").desc, "default_pg");
  EXPECT_EQ(d.groups.at("1").ranks, (std::vector<int>{0, 1}));  // written "[0,1]"
  EXPECT_TRUE(d.groups.at("1").ranksKnown);
  EXPECT_FALSE(d.extra.contains("entries"));
  EXPECT_FALSE(d.extra.contains("version"));
  if (version == "2.2") {
    EXPECT_TRUE(d.pgStatus.empty());
  } else {
    EXPECT_EQ(d.pgStatus.at("0").lastEnqueued, 7);
    EXPECT_EQ(d.pgStatus.at("0").lastStarted, 6);
    EXPECT_EQ(d.pgStatus.at("0").lastCompleted, 5);
    EXPECT_EQ(d.pgStatus.at("1").lastStarted, -1);
  }
}

TEST(DumpReader, ReadsEveryVersionOfThePickle) {
  const std::map<std::string, std::string> libVersion = {
      {"2.2", ""}, {"2.4", "2.21.5"}, {"2.9", "2.21.5"}, {"2.10", "2.27.3"}};
  for (const auto& [version, lib] : libVersion) {
    SCOPED_TRACE(version);
    const RankDump d = readDump(dataPath("fr_" + version + ".pkl"), 1);
    EXPECT_EQ(d.format, "pickle");
    EXPECT_EQ(d.file, dataPath("fr_" + version + ".pkl"));
    EXPECT_EQ(d.commLibVersion, lib);  // nccl_version before 2.10
    expectFixture(d, version);
    EXPECT_EQ(d.entries[0].topFrame, "all_reduce (torch/distributed/c10d.py:2500)");
    EXPECT_EQ(d.entries[1].topFrame, "all_reduce (torch/distributed/c10d.py:2501)");
    EXPECT_EQ(d.extra.contains("nccl_comm_state"), version == "2.10");
  }
}

TEST(DumpReader, ReadsTheJsonForm) {
  const RankDump d = parseDump(data("fr_2.10.json"), "rank_1.json", 1);
  EXPECT_EQ(d.format, "json");
  EXPECT_EQ(d.commLibVersion, "2.27.3");
  expectFixture(d, "2.10");
  EXPECT_EQ(d.entries[0].topFrame, "");  // the JSON form has no frames
  EXPECT_EQ(d.extra["nccl_comm_state"]["0"]["commId"], "abc");
}

// torch 2.15's own files (gloo, a dtype mismatch): its JSON writes pg_status as text and 0 where
// the pickle has None.
TEST(DumpReader, ReadsRealTorchDumpsAlikeInBothFormats) {
  const RankDump p = readDump(dataPath("torch-2.15-gloo/rank_1"), 1);
  const RankDump j = readDump(dataPath("torch-2.15-gloo/rank_1.json"), 1);
  for (const RankDump* d : {&p, &j}) {
    SCOPED_TRACE(d->format);
    EXPECT_TRUE(d->warnings.empty()) << d->warnings.front();
    EXPECT_EQ(d->version, "2.10");
    ASSERT_EQ(d->entries.size(), 24u);
    EXPECT_EQ(d->entries.back().backend, "gloo");
    EXPECT_EQ(d->entries.back().op, "all_reduce");
    EXPECT_EQ(d->entries.back().collectiveSeqId, 21);
    EXPECT_FALSE(d->entries.back().timeDiscoveredStartedNs.has_value());
    EXPECT_EQ(d->pgStatus.at("0").lastEnqueued, 21);
    EXPECT_EQ(d->pgStatus.at("0").lastStarted, -1);
    EXPECT_EQ(d->groups.at("").ranks, (std::vector<int>{0, 1}));
  }
  EXPECT_NE(p.entries.front().topFrame.find("all_reduce (/root/"), std::string::npos);
  for (std::size_t i = 0; i < p.entries.size(); ++i) {
    EXPECT_EQ(p.entries[i].inputSizes, j.entries[i].inputSizes);
    EXPECT_EQ(p.entries[i].inputDtypes, j.entries[i].inputDtypes);
    EXPECT_EQ(p.entries[i].timeCreatedNs, j.entries[i].timeCreatedNs);
  }
}

TEST(DumpReader, MissingFieldsStayUnknown) {
  const RankDump d = parseDump(R"({"entries": [{"profiling_name": "gloo:barrier"}], "pg_status": {"0": {}}})",
                               "rank_2.json", 2);
  ASSERT_EQ(d.entries.size(), 1u);
  const FrEntry& e = d.entries[0];
  EXPECT_FALSE(e.recordId || e.collectiveSeqId || e.p2pSeqId || e.opId || e.timeCreatedNs || e.durationMs ||
               e.timeoutMs || e.isP2p || e.retired);
  EXPECT_EQ(e.pgId, "");
  EXPECT_EQ(e.state, "");
  EXPECT_EQ(e.backend, "gloo");
  EXPECT_TRUE(e.inputSizes.empty());
  EXPECT_EQ(d.version, "");
  EXPECT_TRUE(d.groups.empty());
  EXPECT_FALSE(d.pgStatus.at("0").lastCompleted.has_value());
  EXPECT_TRUE(d.warnings.empty());
}

TEST(DumpReader, WrongTypedFieldsWarnAndStayUnknown) {
  const RankDump d = parseDump(R"({"version": 2.1, "entries": [{"record_id": 3, "collective_seq_id": "abc",
      "input_sizes": "x", "process_group": 5, "retired": "yes", "profiling_name": "nccl:send 1->x"}, 7],
      "pg_config": {"0": {"ranks": "zero"}, "1": 4}, "pg_status": {"0": {"last_completed_collective": [1]}}})",
                               "rank_4.json", 4);
  ASSERT_EQ(d.entries.size(), 1u);  // 7 is no entry
  const FrEntry& e = d.entries[0];
  EXPECT_EQ(e.recordId, 3);
  EXPECT_FALSE(e.collectiveSeqId.has_value());
  EXPECT_TRUE(e.inputSizes.empty());
  EXPECT_EQ(e.pgName, "");
  EXPECT_FALSE(e.retired.has_value());
  EXPECT_FALSE(e.p2pPeer.has_value());
  EXPECT_EQ(d.version, "");
  EXPECT_FALSE(d.groups.at("0").ranksKnown);
  EXPECT_FALSE(d.pgStatus.at("0").lastCompleted.has_value());
  const auto& w = d.warnings;
  EXPECT_TRUE(has(w,
                  "rank_4.json: entry 0 (record_id 3): 'collective_seq_id' is a string (\"abc\"), not an "
                  "integer; it is treated as unknown."));
  for (const char* field :
       {"'input_sizes'", "'process_group' is the number 5", "'retired'", "'profiling_name'",
        "top level: 'version' is the number 2.1", "entry 1 is the number 7", "pg_config['0']: 'ranks'",
        "pg_config: '1'", "pg_status['0']: 'last_completed"}) {
    EXPECT_TRUE(has(w, field)) << field;
  }
}

TEST(DumpReader, ARepeatedFaultWarnsAFewTimesThenCounts) {
  std::string json = R"({"entries": [)";
  for (int i = 0; i < 10; ++i) json += std::string(i ? "," : "") + R"({"op_id": "x"})";
  const RankDump d = parseDump(json + "]}", "rank_5.json", 5);
  EXPECT_EQ(d.entries.size(), 10u);
  EXPECT_EQ(d.warnings.size(), 4u);
  EXPECT_TRUE(has(d.warnings, "'op_id' was unreadable in 7 more places"));
}

TEST(DumpReader, BrokenFilesAreConfigErrorsNamingTheFile) {
  EXPECT_NE(configError("").find("rank_9 is empty"), std::string::npos);
  EXPECT_NE(configError(" \n").find("rank_9 is empty"), std::string::npos);
  EXPECT_NE(configError("hello").find("rank_9 is neither a pickle nor JSON"), std::string::npos);
  EXPECT_NE(configError(R"({"entries": [{"a": 1)").find("rank_9: not valid JSON"), std::string::npos);
  EXPECT_NE(configError(R"({"entries": [{"time_created_ns": 1e99999}]})").find("rank_9: not valid JSON"),
            std::string::npos);  // nlohmann's out_of_range, found by fuzzing
  EXPECT_NE(configError("\x80\x02]q\x00."s).find("rank_9: the pickle holds a list, not the dict"),
            std::string::npos);
  const std::string pickle = data("fr_2.4.pkl");
  EXPECT_NE(configError(pickle.substr(0, pickle.size() / 2)).find("rank_9: byte"), std::string::npos);
  EXPECT_NE(configError("\x80\x02\x63os\nsystem\n.").find("would import code"), std::string::npos);
  EXPECT_THROW(readDump(DS_HANG_FR_DUMP_DATA, 0), ConfigError);  // a directory
  EXPECT_THROW(readDump(dataPath("no_such_rank_3"), 3), ds::IoError);
}

TEST(DumpReader, RankFromFileName) {
  EXPECT_EQ(rankFromFileName("rank_3"), 3);
  EXPECT_EQ(rankFromFileName("nccl_trace_rank_12"), 12);
  EXPECT_EQ(rankFromFileName("comm_lib_trace_rank_7.json"), 7);
  EXPECT_EQ(rankFromFileName("rank_07.pickle"), 7);
  EXPECT_EQ(rankFromFileName("dump5.pkl"), 5);
  EXPECT_FALSE(rankFromFileName("notes.txt"));
  EXPECT_FALSE(rankFromFileName("rank_.json"));
  EXPECT_FALSE(rankFromFileName("rank_99999999999999999999"));
}

// --- findDumpFiles and forEachDump ---

struct DumpSet {
  std::map<int, RankDump> ranks;
  std::vector<std::string> problems;
  std::vector<int> order;  // ranks in the order the sink received them
};

// Every dump the paths name, as dsdiag hang reads them (threads > 1: read ahead on other threads).
DumpSet loadDumps(const std::vector<std::string>& args, int threads = 1) {
  const DumpFiles files = findDumpFiles(args);
  DumpSet set;
  set.problems = files.problems;
  ReadOptions o;
  o.threads = threads;
  const std::size_t n = forEachDump(
      files,
      [&](RankDump&& d) {
        set.order.push_back(d.rank);
        set.ranks.emplace(d.rank, std::move(d));
      },
      set.problems, o);
  EXPECT_EQ(n, set.ranks.size());
  return set;
}

void copy(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(dataPath(from), to, std::filesystem::copy_options::overwrite_existing);
}
void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(LoadDumps, ReadsAFolderQuietlySkippingOtherFiles) {
  ds::testing::TempDir dir("ds_hang_dumps");
  copy("fr_2.2.pkl", dir.file("nccl_trace_rank_0"));
  copy("fr_2.10.json", dir.file("nccl_trace_rank_1.json"));
  write(dir.file("README.txt"), "not a dump");
  write(dir.file("nccl_trace_rank_2"), "");
  const DumpSet set = loadDumps({dir.path()});
  ASSERT_EQ(set.ranks.size(), 2u);
  EXPECT_EQ(set.ranks.at(0).format, "pickle");
  EXPECT_EQ(set.ranks.at(1).format, "json");
  EXPECT_EQ(set.ranks.at(1).rank, 1);
  ASSERT_EQ(set.problems.size(), 1u);
  EXPECT_NE(set.problems[0].find("nccl_trace_rank_2 is empty"), std::string::npos);
}

TEST(LoadDumps, ReadsAGlobAndNamesMissingPaths) {
  ds::testing::TempDir dir("ds_hang_dumps");
  copy("fr_2.4.pkl", dir.file("rank_3"));
  copy("fr_2.9.pkl", dir.file("rank_4"));
  copy("fr_2.9.pkl", dir.file("other_5"));
  const DumpSet set = loadDumps({dir.path() + "/rank_*", dir.path() + "/missing_6"});
  EXPECT_EQ(set.ranks.size(), 2u);
  EXPECT_TRUE(set.ranks.count(3) && set.ranks.count(4));
  EXPECT_TRUE(has(set.problems, "missing_6 does not exist"));
}

TEST(LoadDumps, ADuplicateRankKeepsTheFirstByNameAndNamesBoth) {
  ds::testing::TempDir dir("ds_hang_dumps");
  copy("fr_2.2.pkl", dir.file("a_rank_5"));
  copy("fr_2.4.pkl", dir.file("b_rank_5"));
  const DumpSet set = loadDumps({dir.path()});
  ASSERT_EQ(set.ranks.size(), 1u);
  EXPECT_EQ(set.ranks.at(5).version, "2.2");
  ASSERT_EQ(set.problems.size(), 1u);
  EXPECT_NE(set.problems[0].find("a_rank_5 and " + dir.file("b_rank_5") + " are both dumps of rank 5"),
            std::string::npos);
}

TEST(LoadDumps, ThePickleAndJsonOfOneDumpAreOnlyANoteAndThePickleIsKept) {
  ds::testing::TempDir dir("ds_hang_dumps");
  copy("torch-2.15-gloo/rank_1", dir.file("b_rank_1"));
  copy("torch-2.15-gloo/rank_1.json", dir.file("a_rank_1.json"));  // read first, then replaced
  const DumpSet set = loadDumps({dir.path()});
  ASSERT_EQ(set.ranks.size(), 1u);
  EXPECT_EQ(set.ranks.at(1).format, "pickle");
  ASSERT_EQ(set.problems.size(), 1u);
  EXPECT_EQ(set.problems[0].rfind("note: ", 0), 0u) << set.problems[0];
}

TEST(LoadDumps, ANameWithoutARankIsAProblemAndNothingFoundIsAnError) {
  ds::testing::TempDir dir("ds_hang_dumps");
  copy("fr_2.2.pkl", dir.file("dump.pkl"));
  copy("fr_2.2.pkl", dir.file("rank_0"));
  const DumpSet set = loadDumps({dir.file("dump.pkl"), dir.file("rank_0")});
  EXPECT_EQ(set.ranks.size(), 1u);
  EXPECT_TRUE(has(set.problems, "dump.pkl: its name does not end in a rank number"));

  ds::testing::TempDir empty("ds_hang_empty");
  write(empty.file("notes.txt"), "x");
  try {
    loadDumps({empty.path()});
    FAIL() << "no dumps, no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no Flight Recorder dumps found in " + empty.path()),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("TORCH_FR_DUMP_TEMP_FILE"), std::string::npos);
  }
  EXPECT_THROW(loadDumps({empty.path() + "/*.pkl"}), ConfigError);
}

}  // namespace

namespace {

// Read ahead on several threads, the dumps still arrive one by one in rank order, the problems in
// rank order, and what the sink throws stops the reading and reaches the caller.
TEST(LoadDumps, ReadAheadKeepsRankOrderAndStopsOnTheSinksError) {
  ds::testing::TempDir dir("ds_hang_dumps");
  for (int r : {0, 1, 2, 3, 5, 8, 9, 10, 11, 12}) copy(r % 2 ? "fr_2.9.pkl" : "fr_2.10.json", dir.file("rank_" + std::to_string(r)));
  write(dir.file("rank_4"), "");
  write(dir.file("rank_7"), "\x80\x02}");
  for (int threads : {1, 2, 4}) {
    const DumpSet set = loadDumps({dir.path()}, threads);
    EXPECT_EQ(set.order, (std::vector<int>{0, 1, 2, 3, 5, 8, 9, 10, 11, 12})) << threads << " threads";
    ASSERT_EQ(set.problems.size(), 2u) << threads << " threads";
    EXPECT_NE(set.problems[0].find("rank_4 is empty"), std::string::npos) << set.problems[0];
    EXPECT_NE(set.problems[1].find("rank_7"), std::string::npos) << set.problems[1];
  }
  const DumpFiles files = findDumpFiles({dir.path()});
  std::vector<std::string> problems;
  ReadOptions o;
  o.threads = 3;
  int seen = 0;
  EXPECT_THROW(forEachDump(
                   files,
                   [&](RankDump&&) {
                     if (++seen == 4) throw std::runtime_error("the sink gave up");
                   },
                   problems, o),
               std::runtime_error);
  EXPECT_EQ(seen, 4);
}

// Read-ahead is bounded by bytes too: with a budget smaller than one file, the readers still make
// progress one rank at a time.
TEST(LoadDumps, ReadAheadWithATinyByteBudgetStillReadsEveryRank) {
  ds::testing::TempDir dir("ds_hang_dumps");
  for (int r = 0; r < 6; ++r) copy("fr_2.10.pkl", dir.file("rank_" + std::to_string(r)));
  const DumpFiles files = findDumpFiles({dir.path()});
  std::vector<std::string> problems;
  ReadOptions o;
  o.threads = 2;
  o.maxBytesInFlight = 1;
  std::vector<int> order;
  EXPECT_EQ(forEachDump(files, [&](RankDump&& d) { order.push_back(d.rank); }, problems, o), 6u);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(problems.empty());
}

}  // namespace

// ---- the fast reading of a pickle's entries against the general rules (dump_reader.h EntryPath) ----

namespace {

// Everything a RankDump holds, as text: two dumps read alike when these are equal.
template <class T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

std::string everything(const RankDump& d) {
  nlohmann::json j;
  j["rank"] = d.rank, j["file"] = d.file, j["format"] = d.format, j["version"] = d.version;
  j["comm"] = d.commLibVersion, j["extra"] = d.extra, j["warnings"] = d.warnings;
  for (const auto& [k, g] : d.groups) j["groups"][k] = {g.name, g.desc, g.ranks, g.ranksKnown};
  for (const auto& [k, st] : d.pgStatus) j["status"][k] = {opt(st.lastEnqueued), opt(st.lastStarted), opt(st.lastCompleted)};
  for (const FrEntry& e : d.entries) {
    j["entries"].push_back({opt(e.recordId), e.pgId, e.pgName, e.pgDesc, opt(e.collectiveSeqId), opt(e.p2pSeqId),
                            opt(e.opId), e.profilingName, e.backend, e.op, opt(e.p2pPeer), e.inputSizes,
                            e.outputSizes, e.inputDtypes, e.outputDtypes, e.state, opt(e.timeCreatedNs),
                            opt(e.timeDiscoveredStartedNs), opt(e.timeDiscoveredCompletedNs), opt(e.durationMs),
                            opt(e.timeoutMs), opt(e.isP2p), opt(e.retired), e.topFrame});
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Both paths on `bytes`: the same dump, or the same refusal (except where an entry is changed after
// later ones began, which the fast path refuses as such, pickle.h).
void expectFastAsGeneral(const std::string& bytes, const std::string& what) {
  std::string fast, general, fastError, generalError;
  try {
    fast = everything(parseDump(bytes, "rank_9", 9, EntryPath::kFast));
  } catch (const ConfigError& e) {
    fastError = e.what();
  }
  try {
    general = everything(parseDump(bytes, "rank_9", 9, EntryPath::kGeneral));
  } catch (const ConfigError& e) {
    generalError = e.what();
  }
  if (fastError.find("after later elements were written") != std::string::npos) return;  // pickle.h
  EXPECT_EQ(fastError, generalError) << what;
  EXPECT_EQ(fast, general) << what;
}

}  // namespace

TEST(DumpReaderFast, EveryPickleReadsAsTheGeneralRulesReadIt) {
  const auto dumps = ds::diag::hang::testing::picklesInTestData(false);
  ASSERT_GE(dumps.size(), 5u);
  for (const auto& [path, bytes] : dumps) expectFastAsGeneral(bytes, path);
}

// Fields of unexpected types, repeated keys, None and odd frames: the fast path gives way, and the
// general rules warn as before.
TEST(DumpReaderFast, OddEntriesReadAsTheGeneralRulesReadThem) {
  const std::string base = data("fr_2.10.pkl");
  // Byte patterns of fr_2.10.pkl's first entry swapped for odd values of the same length.
  const std::vector<std::pair<std::string, std::string>> swaps = {
      {"nccl:all_reduce", "nccl:send 1->x"}, {"nccl:all_reduce", "nccl:send 1->2"},
      {"completed", "xompleted"},           {"default_pg", "\xff\xfe" "fault_pg"},
  };
  for (const auto& [from, to] : swaps) {
    std::string bytes = base;
    for (std::size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at + 1))
      bytes.replace(at, from.size(), to);
    expectFastAsGeneral(bytes, from + " -> " + to);
  }
}

TEST(DumpReaderFast, MutatedDumpsReadAlike) {
  std::mt19937 rng(7122026);
  int compared = 0;
  for (const auto& [path, original] : ds::diag::hang::testing::picklesInTestData(false)) {
    for (int round = 0; round < 300; ++round) {
      std::string bytes = original;
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
        const std::size_t at = rng() % bytes.size();
        if (rng() % 2)
          bytes[at] = static_cast<char>(rng());
        else
          bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
      }
      expectFastAsGeneral(bytes, path + " mutation " + std::to_string(round));
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000);
}
