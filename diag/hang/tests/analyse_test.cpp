// The cross-rank analysis (diag/hang/analyse.h) on synthetic dumps built here, one fault class each:
// the rank named, its kind, and that no innocent rank is named. The real torch dumps under fixtures/
// are read by the reader's tests; these pin the rules one at a time.
#include "diag/hang/analyse.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace ds::diag::hang;
using ds::report::FaultKind;
using ds::report::HangReport;
using ds::report::HangVerdict;

namespace {

constexpr int64_t kT0 = 1'767'225'600'000'000'000;  // 2026-01-01T00:00:00Z in ns
constexpr int64_t kSec = 1'000'000'000;

// A job of `n` ranks in the default group "0"; every rank completed collectives 1..done.
struct Job {
  std::map<int, RankDump> dumps;

  Job(int n, int64_t done, const std::string& op = "all_reduce") {
    std::vector<int> world(n);
    for (int r = 0; r < n; ++r) world[r] = r;
    for (int r = 0; r < n; ++r) {
      RankDump& d = dumps[r];
      d.rank = r;
      d.file = "dumps/rank_" + std::to_string(r);
      d.format = "pickle";
      d.version = "2.10";
      group(r, "0", "default_pg", world);
      for (int64_t s = 1; s <= done; ++s) add(r, "0", s, op, {{10}}, "completed");
      status(r, "0", done, done, done);
    }
  }
  void group(int r, const std::string& name, const std::string& desc, std::vector<int> ranks) {
    dumps[r].groups[name] = FrGroup{name, desc, std::move(ranks), true};
  }
  FrEntry& add(int r, const std::string& pg, int64_t seq, const std::string& op, std::vector<std::vector<int64_t>> in,
               const std::string& state, std::string dtype = "Float") {
    FrEntry e;
    e.recordId = static_cast<int64_t>(dumps[r].entries.size());
    e.pgId = pg;
    e.pgName = pg;
    e.pgDesc = pg == "0" ? "default_pg" : "undefined";
    e.collectiveSeqId = seq;
    e.p2pSeqId = 0;
    e.profilingName = "nccl:" + op;
    e.backend = "nccl";
    e.op = op;
    e.outputSizes = in;
    e.inputSizes = std::move(in);
    e.inputDtypes = {dtype};
    e.outputDtypes = {dtype};
    e.state = state;
    e.timeCreatedNs = kT0 + (pg == "0" ? seq : 1000 + seq) * kSec;
    e.isP2p = false;
    dumps[r].entries.push_back(std::move(e));
    return dumps[r].entries.back();
  }
  void status(int r, const std::string& pg, int64_t enq, int64_t started, int64_t done) {
    dumps[r].pgStatus[pg] = FrPgStatus{enq, started, done};
  }
  // Rank r enters collective `seq` of group "0" and waits in it.
  void enter(int r, int64_t seq, const std::string& op = "all_reduce", std::vector<std::vector<int64_t>> in = {{10}},
             std::string dtype = "Float") {
    add(r, "0", seq, op, std::move(in), "started", std::move(dtype));
    status(r, "0", seq, seq, seq - 1);
  }
  HangReport analyse(const ExternalEvidence& ev = {}) const {
    return ds::diag::hang::analyse(dumps, ev, {}, {});
  }
};

std::vector<int> culpritRanks(const HangReport& r) {
  std::vector<int> out;
  for (const auto& c : r.culprits) out.push_back(c.rank);
  return out;
}

RasRank ras(int rank, const std::string& state, Source source) {
  RasRank r;
  r.rank = rank;
  r.host = "gpu-" + std::to_string(rank);
  r.state = state;
  r.worldComm = true;
  r.source = std::move(source);
  return r;
}

LogFact logFact(LogFact::Kind kind, int rank, int64_t seq, Source source) {
  LogFact f{};
  f.kind = kind;
  f.rank = rank;
  f.rankFrom = "log_prefix";
  f.pgId = "0";
  f.seq = seq;
  f.source = std::move(source);
  return f;
}

const ds::report::HangWaiting* waitingIn(const HangReport& r, bool blocked) {
  for (const auto& w : r.waiting)
    if (w.blockedByOtherGroup == blocked) return &w;
  return nullptr;
}

bool anyClaim(const ds::report::HangCulprit& c, const std::string& text) {
  return std::any_of(c.evidence.begin(), c.evidence.end(),
                     [&](const auto& e) { return e.claim.find(text) != std::string::npos; });
}

}  // namespace

TEST(HangAnalyse, HealthyDumpsFindNoFault) {
  Job job(4, 10);
  HangReport r = job.analyse();
  EXPECT_EQ(r.verdict, HangVerdict::kNoFaultFound);
  EXPECT_TRUE(r.culprits.empty());
  EXPECT_TRUE(r.waiting.empty());
  EXPECT_TRUE(r.undecided.empty());
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].lastCompletedByAll, 10);
  EXPECT_EQ(r.groups[0].minSeq, 1);
  EXPECT_EQ(r.groups[0].maxSeq, 10);
  EXPECT_EQ(r.worldSize, 4);
  EXPECT_EQ(r.dumpsRead, 4);
  ASSERT_EQ(r.timelines.size(), 4u);
  EXPECT_EQ(r.timelines[0].entries.size(), 10u);
  EXPECT_EQ(r.inputs.front(), "dumps/rank_0");
}

TEST(HangAnalyse, EnqueueLagIsAHostStall) {
  Job job(4, 10);
  for (int r : {0, 1, 3}) job.enter(r, 11);
  HangReport r = job.analyse();
  ASSERT_EQ(r.verdict, HangVerdict::kCulpritFound);
  ASSERT_EQ(culpritRanks(r), std::vector<int>{2});
  const auto& c = r.culprits[0];
  EXPECT_EQ(c.kind, FaultKind::kStalledHost);
  EXPECT_EQ(c.seq, 11);
  EXPECT_EQ(c.op, "all_reduce");
  EXPECT_EQ(c.pgId, "0");
  EXPECT_EQ(c.group.pgDesc, "default_pg");
  EXPECT_NE(r.headline.find("rank 2 never entered all_reduce #11 of group 0 (default_pg)"), std::string::npos)
      << r.headline;
  EXPECT_NE(r.headline.find("ranks 0-1,3 wait in it since 00:00:11 UTC"), std::string::npos) << r.headline;
  EXPECT_TRUE(anyClaim(c, "rank 2 never enqueued all_reduce #11"));
  const auto* w = waitingIn(r, false);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ranks, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(w->waitsFor, std::vector<int>{2});
  EXPECT_EQ(w->sinceNs, kT0 + 11 * kSec);
  EXPECT_EQ(r.groups[0].firstDivergentSeq, 11);
}

TEST(HangAnalyse, RankZeroCanBeTheCulprit) {
  Job job(4, 10);
  for (int r : {1, 2, 3}) job.enter(r, 11);
  HangReport r = job.analyse();
  EXPECT_EQ(culpritRanks(r), std::vector<int>{0});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kStalledHost);
}

TEST(HangAnalyse, SkippedCollectiveIsNeverEntered) {
  // Rank 2 did not enter #11 of the world group and went on with group 1's ops (with rank 3).
  Job job(4, 10);
  for (int r = 0; r < 4; ++r) job.group(r, "1", "undefined", {2, 3});
  for (int r : {2, 3}) {
    for (int64_t s = 1; s <= 3; ++s) job.add(r, "1", s, "broadcast", {{8}}, "completed");
    job.status(r, "1", 3, 3, 3);
  }
  for (int r : {0, 1, 3}) job.enter(r, 11);
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{2});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kNeverEntered);
  EXPECT_NE(r.headline.find("went on to broadcast #3 of group 1 (completed)"), std::string::npos) << r.headline;
  EXPECT_TRUE(anyClaim(r.culprits[0], "its last op: broadcast #3 of group 1, completed"));
}

TEST(HangAnalyse, OtherSizeIsASizeMismatch) {
  Job job(4, 10);
  for (int r : {0, 2, 3}) job.enter(r, 11);
  job.enter(1, 11, "all_reduce", {{20}});
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{1});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kMismatchedSize);
  EXPECT_NE(r.headline.find("[[20]]"), std::string::npos) << r.headline;
  EXPECT_NE(r.headline.find("ranks 0,2-3 used [[10]]"), std::string::npos) << r.headline;
  EXPECT_EQ(r.groups[0].firstDivergentSeq, 11);
}

TEST(HangAnalyse, OtherOpIsAnOpMismatch) {
  Job job(4, 10);
  for (int r : {0, 1, 2}) job.enter(r, 11);
  job.enter(3, 11, "broadcast");
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{3});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kMismatchedOp);
  EXPECT_EQ(r.culprits[0].op, "broadcast");
  EXPECT_NE(r.headline.find("called broadcast as #11"), std::string::npos) << r.headline;
}

TEST(HangAnalyse, OtherDtypeIsADtypeMismatchAlsoOnRankZero) {
  Job job(4, 10);
  for (int r : {1, 2, 3}) job.enter(r, 11);
  job.enter(0, 11, "all_reduce", {{10}}, "Half");
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{0});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kMismatchedDtype);
}

TEST(HangAnalyse, MismatchWithoutMajorityCannotDecide) {
  Job job(4, 10);
  for (int r : {0, 1}) job.enter(r, 11);
  for (int r : {2, 3}) job.enter(r, 11, "all_reduce", {{20}});
  HangReport r = job.analyse();
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_TRUE(r.culprits.empty());
  ASSERT_EQ(r.undecided.size(), 1u);
  EXPECT_NE(r.undecided[0].reason.find("no side is a majority"), std::string::npos);
  EXPECT_EQ(r.undecided[0].ranks, (std::vector<int>{0, 1, 2, 3}));
}

TEST(HangAnalyse, AllGatherAndReduceScatterSizesFollowTorchRules) {
  // 4 ranks: all_gather [4] -> [16], reduce_scatter [16] -> [4], and an uneven list all_gather where
  // each rank's input is its own slot of the output: none of it is a mismatch.
  Job job(4, 0);
  for (int r = 0; r < 4; ++r) {
    job.add(r, "0", 1, "_allgather_base", {{4}}, "completed").outputSizes = {{16}};
    job.add(r, "0", 2, "_reduce_scatter_base", {{16}}, "completed").outputSizes = {{4}};
    job.add(r, "0", 3, "all_gather", {{r + 1}}, "completed").outputSizes = {{1}, {2}, {3}, {4}};
    job.status(r, "0", 3, 3, 3);
  }
  HangReport ok = job.analyse();
  EXPECT_EQ(ok.verdict, HangVerdict::kNoFaultFound) << ok.headline;
  // Rank 2's all_gather output that does not hold 4 inputs is.
  job.dumps[2].entries[0].outputSizes = {{12}};
  HangReport bad = job.analyse();
  ASSERT_EQ(culpritRanks(bad), std::vector<int>{2});
  EXPECT_EQ(bad.culprits[0].kind, FaultKind::kMismatchedSize);
  EXPECT_EQ(bad.culprits[0].seq, 1);
}

TEST(HangAnalyse, CompletionLagIsADeviceStall) {
  Job job(4, 10);
  for (int r : {0, 1, 3}) {
    job.add(r, "0", 11, "all_reduce", {{10}}, "completed");
    job.add(r, "0", 12, "all_reduce", {{10}}, "started");
    job.status(r, "0", 12, 12, 11);
  }
  job.enter(2, 11);
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{2});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kStalledDevice);
  EXPECT_NE(r.headline.find("never completed it while ranks 0-1,3 did"), std::string::npos) << r.headline;
  const auto* w = waitingIn(r, false);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->seq, 12);  // they wait in the next op, which needs rank 2
  EXPECT_EQ(w->ranks, (std::vector<int>{0, 1, 3}));
}

TEST(HangAnalyse, StartLagIsADeviceStall) {
  Job job(4, 10);
  for (int r = 0; r < 4; ++r) job.enter(r, 11);
  job.status(1, "0", 11, 10, 10);  // enqueued #11, never started it (timing on: the others started)
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{1});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kStalledDevice);
  EXPECT_NE(r.headline.find("never started it"), std::string::npos) << r.headline;
}

TEST(HangAnalyse, CrashedRankWithoutDumpIsNamedWhenEveryPeerWaitsForIt) {
  Job job(4, 10);
  job.dumps.erase(3);
  for (int r : {0, 1, 2}) job.enter(r, 11);
  ExternalEvidence ev;
  ev.rankHost = {{0, "gpu-a"}, {3, "gpu-017"}};
  HangReport r = job.analyse(ev);
  ASSERT_EQ(culpritRanks(r), std::vector<int>{3});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kNoDump);
  EXPECT_EQ(r.culprits[0].host, "gpu-017");
  EXPECT_NE(r.headline.find("rank 3 on gpu-017 left no dump; its peers last saw it at #10 of group 0 (default_pg)"),
            std::string::npos)
      << r.headline;
  ASSERT_EQ(r.noDump.size(), 1u);
  EXPECT_EQ(r.noDump[0].rank, 3);
  EXPECT_EQ(r.noDump[0].lastSeenSeq, 10);
  EXPECT_EQ(r.worldSize, 4);
}

// A rank frozen inside a ring allreduce: some peers completed #11 (its part had reached them) and wait
// in #12, the rest wait in #11, and it left no dump. It is named, whichever side is the larger; the
// split alone (no rank missing) stays a question.
TEST(HangAnalyse, ARankWithoutDumpFrozenInsideAnOpSomeCompletedIsNamed) {
  for (int completedBy : {1, 2, 4}) {
    Job job(6, 10);
    job.dumps.erase(3);
    std::vector<int> live = {0, 1, 2, 4, 5};
    for (int i = 0; i < 5; ++i) {
      const int r = live[i];
      if (i < completedBy) {
        job.add(r, "0", 11, "all_reduce", {{10}}, "completed");
        job.enter(r, 12);
        job.status(r, "0", 12, 12, 11);
      } else {
        job.enter(r, 11);
      }
    }
    HangReport r = job.analyse();
    ASSERT_EQ(culpritRanks(r), std::vector<int>{3}) << completedBy << ": " << r.headline;
    EXPECT_EQ(r.culprits[0].kind, FaultKind::kNoDump);
    EXPECT_NE(r.headline.find("rank 3 left no dump; it stopped inside all_reduce #11 of group 0 (default_pg) ("),
              std::string::npos)
        << r.headline;
  }
  Job split(6, 10);
  for (int r : {0, 1}) {
    split.add(r, "0", 11, "all_reduce", {{10}}, "completed");
    split.enter(r, 12);
    split.status(r, "0", 12, 12, 11);
  }
  for (int r : {2, 3, 4, 5}) split.enter(r, 11);
  EXPECT_EQ(split.analyse().verdict, HangVerdict::kCannotDecide);
}

// Ranks 2 and 3 left no dump; 0 and 1 wait in #11 (give the two ranks their hosts in the evidence).
static Job twoRanksGoneOnTwoHosts() {
  Job job(4, 10);
  job.dumps.erase(2);
  job.dumps.erase(3);
  for (int r : {0, 1}) job.enter(r, 11);
  return job;
}

TEST(HangAnalyse, TwoRanksWithoutDumpOnTwoHostsCannotDecide) {
  Job job = twoRanksGoneOnTwoHosts();
  ExternalEvidence ev;
  ev.rankHost = {{2, "gpu-b"}, {3, "gpu-c"}};
  HangReport r = job.analyse(ev);
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_TRUE(r.culprits.empty());
  EXPECT_NE(r.headline.find("ranks 2-3 left no dump; their peers last saw them at #10"), std::string::npos)
      << r.headline;
  EXPECT_EQ(r.noDump.size(), 2u);
  // Both on one host: the host died, and both are named.
  ev.rankHost[3] = "gpu-b";
  EXPECT_EQ(culpritRanks(job.analyse(ev)), (std::vector<int>{2, 3}));
  // NCCL RAS names one of them dead: it settles the question.
  ev.rankHost[3] = "gpu-c";
  ev.ras.push_back(ras(3, "dead", {"ras.txt", 4, "Rank 3 ... DEAD"}));
  HangReport settled = job.analyse(ev);
  ASSERT_EQ(culpritRanks(settled), std::vector<int>{3});
  EXPECT_TRUE(anyClaim(settled.culprits[0], "NCCL RAS reports rank 3 dead"));
}

LogFact exceptionFact(int rank, const std::string& type, const std::string& message, bool consequence, Source source) {
  LogFact f{};
  f.kind = LogFact::Kind::kException;
  f.rank = rank;
  f.rankFrom = "file_name";
  f.exception = type;
  f.message = message;
  f.frame = "load_batch (train.py:88)";
  f.hangConsequence = consequence;
  f.source = std::move(source);
  return f;
}

// A rank's own exception in its log (a Python traceback) settles what the dumps leave open; an error a
// hang raises on the ranks that wait settles nothing.
TEST(HangAnalyse, ARanksOwnExceptionSettlesAQuestionAndAHangsConsequenceDoesNot) {
  Job job = twoRanksGoneOnTwoHosts();
  ExternalEvidence ev;
  ev.rankHost = {{2, "gpu-b"}, {3, "gpu-c"}};
  ev.logs.push_back(exceptionFact(2, "RuntimeError", "Connection closed by peer [10.0.0.3]:13716", true,
                                  {"logs/rank_2.log", 30, "RuntimeError: ... Connection closed by peer"}));
  EXPECT_EQ(job.analyse(ev).verdict, HangVerdict::kCannotDecide);
  ev.logs.push_back(exceptionFact(3, "ValueError", "batch 11: 17 tokens", false,
                                  {"logs/rank_3.log", 14, "ValueError: batch 11: 17 tokens"}));
  HangReport r = job.analyse(ev);
  ASSERT_EQ(culpritRanks(r), std::vector<int>{3});
  EXPECT_EQ(r.culprits[0].kind, ds::report::FaultKind::kNoDump);
  EXPECT_NE(r.culprits[0].summary.find("its log shows it raised ValueError: batch 11: 17 tokens in load_batch "
                                       "(train.py:88) (logs/rank_3.log:14)"),
            std::string::npos)
      << r.culprits[0].summary;
  EXPECT_TRUE(anyClaim(r.culprits[0], "an error in its own code"));
  // Two ranks that raised errors of their own: still a question.
  ev.logs.push_back(exceptionFact(2, "KeyError", "'labels'", false, {"logs/rank_2.log", 12, "KeyError: 'labels'"}));
  EXPECT_EQ(job.analyse(ev).verdict, HangVerdict::kCannotDecide);

  // The peers idle (gloo counts the failed op completed) and one rank gone: its exception names it, with
  // the last op its peers saw.
  Job idle(4, 10);
  idle.dumps.erase(1);
  ExternalEvidence one;
  one.logs.push_back(exceptionFact(1, "ValueError", "bad", false, {"logs/rank_1.log", 9, "ValueError: bad"}));
  HangReport named = idle.analyse(one);
  ASSERT_EQ(culpritRanks(named), std::vector<int>{1});
  EXPECT_NE(named.headline.find("rank 1 left no dump; its peers last saw it at #10"), std::string::npos)
      << named.headline;

  // gloo's blind spot (a quiet dump may be a rank blocked in a send/recv): a rank that raised an error of
  // its own was not blocked in gloo; it is named.
  Job gloo(4, 10);
  for (int r : {0, 1, 3}) gloo.enter(r, 11);
  for (auto& [rank, d] : gloo.dumps)
    for (auto& e : d.entries) e.backend = "gloo";
  ExternalEvidence raised;
  raised.logs.push_back(exceptionFact(2, "ValueError", "bad", false, {"logs/rank_2.log", 9, "ValueError: bad"}));
  HangReport g = gloo.analyse(raised);
  ASSERT_EQ(culpritRanks(g), std::vector<int>{2});
  EXPECT_EQ(g.culprits[0].kind, ds::report::FaultKind::kStalledHost);
}

TEST(HangAnalyse, MissingRankWhileThePeersAreIdleCannotDecide) {
  Job job(4, 10);
  job.dumps.erase(1);
  HangReport r = job.analyse();
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_NE(r.headline.find("rank 1 left no dump; its peers last saw it at #10"), std::string::npos) << r.headline;
}

// Rank 0 completed group 1's #5 and went on to the world's #11: a completion followed by work in another
// group is a success (not gloo's failed-and-counted-completed), so rank 1, still in #5, holds it.
TEST(HangAnalyse, SubgroupDeviceStallHoldsTheWorldGroup) {
  // Rank 1 is stuck in group 1 ([0,1]) op #5, which rank 0 completed; ranks 0,2,3 wait in world #11.
  Job job(4, 10);
  for (int r = 0; r < 4; ++r) job.group(r, "1", "undefined", {0, 1});
  for (int64_t s = 1; s <= 4; ++s)
    for (int r : {0, 1}) job.add(r, "1", s, "all_reduce", {{4}}, "completed");
  job.add(0, "1", 5, "all_reduce", {{4}}, "completed");
  job.status(0, "1", 5, 5, 5);
  job.add(1, "1", 5, "all_reduce", {{4}}, "started");
  job.status(1, "1", 5, 5, 4);
  for (int r : {0, 2, 3}) job.enter(r, 11);
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{1}) << r.headline;
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kStalledDevice);
  EXPECT_EQ(r.culprits[0].group.pgName, "1");
  EXPECT_TRUE(anyClaim(r.culprits[0], "wait in all_reduce #11 of group 0 (default_pg) for rank 1"));
  const auto* blocked = waitingIn(r, true);
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->ranks, std::vector<int>{1});
  EXPECT_EQ(blocked->group.pgName, "0");
  const auto* w = waitingIn(r, false);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ranks, (std::vector<int>{0, 2, 3}));
  EXPECT_NE(w->reason.find("the chain ends at rank 1"), std::string::npos) << w->reason;
}

TEST(HangAnalyse, CollectivesInAnotherOrderAreVotedOnByTheRanksInBothGroups) {
  // Group 1 is [0, 1, 2]. Rank 2 entered its #5, which ranks 0 and 1 never entered: they wait in world
  // #11 (with rank 3), which rank 2 never entered. Of the three ranks in both groups, two are in world
  // #11: rank 2 called the ops in another order.
  Job job(4, 10);
  for (int r = 0; r < 4; ++r) job.group(r, "1", "undefined", {0, 1, 2});
  for (int r : {0, 1, 2}) {
    for (int64_t s = 1; s <= 4; ++s) job.add(r, "1", s, "all_reduce", {{4}}, "completed");
    job.status(r, "1", 4, 4, 4);
  }
  job.add(2, "1", 5, "all_reduce", {{4}}, "started");
  job.status(2, "1", 5, 5, 4);
  for (int r : {0, 1, 3}) job.enter(r, 11);
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{2});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kNeverEntered);
  EXPECT_EQ(r.culprits[0].group.pgName, "0");
  EXPECT_NE(r.headline.find("it waits in all_reduce #5 of group 1 instead"), std::string::npos) << r.headline;
  const auto* blocked = waitingIn(r, true);
  ASSERT_NE(blocked, nullptr);
  EXPECT_EQ(blocked->ranks, (std::vector<int>{0, 1}));  // they hold group 1's #5, stuck in world #11
  EXPECT_EQ(blocked->group.pgName, "1");
}

TEST(HangAnalyse, CollectivesInAnotherOrderWithOneVoteEachCannotDecide) {
  // torch's `subgroup` fixture: rank 1 skipped group 1's ([0, 1]) #4 and waits in world #11 with 2
  // and 3; rank 0 waits in #4. Ranks 2 and 3 are not in group 1: they say nothing about the order.
  Job job(4, 10);
  for (int r = 0; r < 4; ++r) job.group(r, "1", "undefined", {0, 1});
  for (int64_t s = 1; s <= 3; ++s)
    for (int r : {0, 1}) job.add(r, "1", s, "all_reduce", {{4}}, "completed");
  job.status(1, "1", 3, 3, 3);
  job.add(0, "1", 4, "all_reduce", {{4}}, "started");
  job.status(0, "1", 4, 4, 3);
  for (int r : {1, 2, 3}) job.enter(r, 11);
  HangReport r = job.analyse();
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_TRUE(r.culprits.empty()) << r.headline;
  EXPECT_NE(r.headline.find("the members 0-1 of these groups split evenly"), std::string::npos) << r.headline;
}

TEST(HangAnalyse, EqualSharesInACycleCannotDecide) {
  // Two groups of two: rank 0 waits in A#2 for rank 1, rank 1 waits in B#2 for rank 0.
  Job job(2, 0);
  for (int r : {0, 1}) {
    job.group(r, "A", "undefined", {0, 1});
    job.group(r, "B", "undefined", {0, 1});
    job.add(r, "A", 1, "all_reduce", {{4}}, "completed");
    job.add(r, "B", 1, "all_reduce", {{4}}, "completed");
  }
  job.add(0, "A", 2, "all_reduce", {{4}}, "started");
  job.status(0, "A", 2, 2, 1);
  job.status(0, "B", 1, 1, 1);
  job.add(1, "B", 2, "all_reduce", {{4}}, "started");
  job.status(1, "B", 2, 2, 1);
  job.status(1, "A", 1, 1, 1);
  HangReport r = job.analyse();
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_TRUE(r.culprits.empty());
  EXPECT_NE(r.headline.find("cannot tell which order the program meant"), std::string::npos) << r.headline;
  ASSERT_EQ(r.undecided.size(), 2u);
  EXPECT_EQ(r.undecided[0].ranks, (std::vector<int>{0, 1}));
}

TEST(HangAnalyse, RolledOffEntriesAreNotNeverEntered) {
  // Rank 3's ring buffer starts at #8 (older entries rolled off); rank 1 stalls. Only rank 1 is named.
  Job job(4, 10);
  auto& e = job.dumps[3].entries;
  e.erase(e.begin(), e.begin() + 7);
  for (int r : {0, 2, 3}) job.enter(r, 11);
  HangReport r = job.analyse();
  EXPECT_EQ(culpritRanks(r), std::vector<int>{1});
  // Without pg_status (older dumps) the entries' states are used, windows and all: still healthy.
  Job healthy(4, 10);
  healthy.dumps[2].entries.erase(healthy.dumps[2].entries.begin(), healthy.dumps[2].entries.begin() + 6);
  for (auto& [rank, d] : healthy.dumps) d.pgStatus.clear();
  HangReport h = healthy.analyse();
  EXPECT_EQ(h.verdict, HangVerdict::kNoFaultFound) << h.headline;
  EXPECT_EQ(h.groups[0].lastCompletedByAll, 10);
}

TEST(HangAnalyse, SendWithoutItsRecvNamesThePeer) {
  Job job(4, 10);
  FrEntry& s = job.add(0, "0", 10, "send", {{6}}, "started");
  s.isP2p = true;
  s.p2pSeqId = 1;
  s.p2pPeer = 1;
  s.profilingName = "nccl:send 0->1";
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{1});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kP2pUnmatched);
  EXPECT_TRUE(r.culprits[0].p2p);
  EXPECT_EQ(r.culprits[0].seq, 1);
  EXPECT_EQ(r.culprits[0].op, "recv");
  EXPECT_NE(r.headline.find("rank 1 never posted the recv matching rank 0's send #1 (p2p)"), std::string::npos)
      << r.headline;
  // With the recv posted on rank 1 both wait: the dumps cannot say whose link holds them.
  FrEntry& v = job.add(1, "0", 10, "recv", {{6}}, "started");
  v.isP2p = true;
  v.p2pSeqId = 1;
  v.p2pPeer = 0;
  HangReport both = job.analyse();
  EXPECT_EQ(both.verdict, HangVerdict::kCannotDecide);
  EXPECT_TRUE(both.culprits.empty());
}

// A pipeline group {1, 3}: rank 1's "send 0->1" names group rank 1, which is global rank 3. Rank 3
// never posted the recv: it is named, not rank 1 of the world.
TEST(HangAnalyse, AP2pPeerIsTheGroupsMemberNotTheWorldsRank) {
  Job job(4, 10);
  for (int r : {1, 3}) job.group(r, "pp", "pipeline", {1, 3});
  FrEntry& s = job.add(1, "pp", 1, "send", {{6}}, "started");
  s.pgName = "pp";
  s.isP2p = true;
  s.collectiveSeqId = 0;
  s.p2pSeqId = 1;
  s.p2pPeer = 1;
  s.profilingName = "nccl:send 0->1";
  job.status(1, "pp", 0, 0, 0);
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{3}) << r.headline;
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kP2pUnmatched);
  EXPECT_NE(r.headline.find("rank 3 never posted the recv matching rank 1's send #1"), std::string::npos)
      << r.headline;
  // A peer beyond the group's members is unknown, and said so.
  s.p2pPeer = 5;
  s.profilingName = "nccl:send 0->5";
  HangReport bad = job.analyse();
  EXPECT_TRUE(std::any_of(bad.problems.begin(), bad.problems.end(), [](const std::string& p) {
    return p.find("names peer 5 of group pp, which has 2 members") != std::string::npos;
  })) << bad.problems.size();
}

TEST(HangAnalyse, MostMembersOutsideAnOpCannotDecide) {
  Job job(4, 10);
  job.enter(0, 11);
  HangReport r = job.analyse();
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_TRUE(r.culprits.empty()) << r.headline;
}

TEST(HangAnalyse, AllInsideNoneCompletedCannotDecideUnlessRasNamesOne) {
  Job job(4, 10);
  for (int r = 0; r < 4; ++r) job.enter(r, 11);
  HangReport r = job.analyse();
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_NE(r.headline.find("none completed it"), std::string::npos);
  ExternalEvidence ev;
  ev.ras.push_back(ras(2, "dead", {"ras.json", 0, "rank 2 dead"}));
  HangReport settled = job.analyse(ev);
  ASSERT_EQ(culpritRanks(settled), std::vector<int>{2});
  EXPECT_EQ(settled.culprits[0].kind, FaultKind::kStalledDevice);
}

TEST(HangAnalyse, OutsideEvidenceIsJoinedAndContradictionsReported) {
  Job job(4, 10);
  for (int r : {0, 1, 3}) job.enter(r, 11);
  ExternalEvidence ev;
  ev.rankHost = {{2, "gpu-017"}};
  LogFact wd = logFact(LogFact::Kind::kWatchdogTimeout, 0, 11,
                       {"logs/rank0.err", 42, "[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=11"});
  wd.opType = "ALLREDUCE";
  ev.logs.push_back(wd);
  LogFact stale = logFact(LogFact::Kind::kWatchdogFailure, 3, 13,
                          {"logs/rank3.err", 7, "failure detected by watchdog at work sequence id: 13"});
  stale.lastEnqueued = 13;
  stale.lastCompleted = 12;
  ev.logs.push_back(stale);
  // A line whose rank is only torchrun's local rank names no global rank: not joined.
  LogFact local = logFact(LogFact::Kind::kNcclRemoteError, 2, 11, {"logs/node1.err", 3, "[default2]: ncclRemoteError"});
  local.rankFrom = "local_rank";
  ev.logs.push_back(local);
  ev.ras.push_back(ras(1, "dead", {"ras.txt", 9, "rank 1 DEAD"}));
  HangReport r = job.analyse(ev);
  ASSERT_EQ(culpritRanks(r), std::vector<int>{2});
  EXPECT_EQ(r.culprits[0].host, "gpu-017");
  EXPECT_NE(r.headline.find("rank 2 on gpu-017 never entered"), std::string::npos) << r.headline;
  auto it = std::find_if(r.culprits[0].evidence.begin(), r.culprits[0].evidence.end(),
                         [](const auto& e) { return e.file == "logs/rank0.err:42"; });
  ASSERT_NE(it, r.culprits[0].evidence.end());
  EXPECT_NE(it->claim.find("SeqNum=11"), std::string::npos);
  EXPECT_FALSE(anyClaim(r.culprits[0], "NCCL remote error"));
  auto problem = [&](const std::string& text) {
    return std::any_of(r.problems.begin(), r.problems.end(),
                       [&](const auto& p) { return p.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(problem("NCCL RAS reports rank 1 dead"));
  EXPECT_TRUE(problem("logs/rank3.err:7 says rank 3 had enqueued #13"));
  EXPECT_NE(std::find(r.inputs.begin(), r.inputs.end(), "ras.txt"), r.inputs.end());
}

// An NCCL WARN names its peer by address; where dsdiag's fleet JSON tied that address to a host, the
// claim names the host and the ranks on it (joinAddresses, evidence_reader.h).
TEST(HangAnalyse, ANetworkErrorsPeerAddressIsNamedByItsHost) {
  Job job(4, 10);
  for (int r : {0, 1, 3}) job.enter(r, 11);
  ExternalEvidence ev;
  ev.rankHost = {{2, "gpu-017"}, {3, "gpu-018"}};
  ev.addressHost = {{"10.0.0.9", "gpu-018"}};
  LogFact net = logFact(LogFact::Kind::kNcclNetError, 2, 11,
                        {"logs/rank2.err", 5, "NET/IB : Got completion from peer 10.0.0.9<5000> with error 12"});
  net.peerAddr = "10.0.0.9<5000>";
  net.hca = "mlx5_3";
  ev.logs.push_back(net);
  LogFact unknown = net;
  unknown.peerAddr = "10.0.0.77<5000>";
  unknown.source.line = 6;
  ev.logs.push_back(unknown);
  HangReport r = job.analyse(ev);
  ASSERT_EQ(culpritRanks(r), std::vector<int>{2});
  EXPECT_TRUE(anyClaim(r.culprits[0], "NCCL network error on rank 2: peer 10.0.0.9<5000> (gpu-018, rank(s) 3), HCA mlx5_3"));
  EXPECT_TRUE(anyClaim(r.culprits[0], "NCCL network error on rank 2: peer 10.0.0.77<5000>, HCA mlx5_3"));
}

TEST(HangAnalyse, InputProblemsAreSentences) {
  Job job(4, 10);
  job.group(3, "0", "default_pg", {0, 1, 2, 3, 4});
  HangAnalysis a;
  a.addProblem("dumps/rank_5: the file is empty.");
  for (const auto& [rank, d] : job.dumps) a.add(d);
  a.add(job.dumps.at(1));
  HangReport r = a.finish({});
  ASSERT_GE(r.problems.size(), 3u);
  EXPECT_EQ(r.problems[0], "dumps/rank_5: the file is empty.");
  auto has = [&](const std::string& t) {
    return std::any_of(r.problems.begin(), r.problems.end(), [&](auto& p) { return p.find(t) != std::string::npos; });
  };
  EXPECT_TRUE(has("a second dump of rank 1"));
  EXPECT_TRUE(has("The dumps disagree on the members of group 0: ranks 0-2 list [0-3], rank 3 lists [0-4]"));
  EXPECT_EQ(r.verdict, HangVerdict::kNoFaultFound);
}

TEST(HangAnalyse, NoDumpAtAllCannotDecide) {
  HangReport r = analyse({}, {}, {}, {"no file matched dumps/*"});
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_EQ(r.problems, std::vector<std::string>{"no file matched dumps/*"});
}

TEST(HangAnalyse, ArrivingPastThePeersTimeoutIsAHostStall) {
  // Rank 2 entered #11 12 s after the others (timeout 5 s); gloo then marked #11 completed everywhere.
  Job job(4, 10);
  for (int r = 0; r < 4; ++r) {
    FrEntry& e = job.add(r, "0", 11, "all_reduce", {{10}}, "completed");
    e.timeoutMs = 5000;
    if (r == 2) e.timeCreatedNs = *e.timeCreatedNs + 12 * kSec;
    job.status(r, "0", 11, 11, 11);
  }
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{2});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kStalledHost);
  EXPECT_NE(r.headline.find("entered all_reduce #11 of group 0 (default_pg) 12.0 s after its peers, past the op's "
                            "5000 ms timeout"),
            std::string::npos)
      << r.headline;
  EXPECT_NE(r.headline.find("ranks 0-1,3 had given up"), std::string::npos) << r.headline;
  // Within the timeout it is only slow: no fault.
  job.dumps[2].entries.back().timeCreatedNs = kT0 + 11 * kSec + 4 * kSec;
  EXPECT_EQ(job.analyse().verdict, HangVerdict::kNoFaultFound);
}

TEST(HangAnalyse, GlooDumpThatJustEndsIsAQuestionNotAVerdict) {
  // torch 2.15's gloo records no send/recv: rank 2 may be blocked in one rather than stalled.
  Job job(4, 10);
  for (int r : {0, 1, 3}) job.enter(r, 11);
  for (auto& [rank, d] : job.dumps)
    for (auto& e : d.entries) e.backend = "gloo";
  HangReport r = job.analyse();
  EXPECT_EQ(r.verdict, HangVerdict::kCannotDecide);
  EXPECT_TRUE(r.culprits.empty());
  ASSERT_EQ(r.undecided.size(), 1u);
  EXPECT_EQ(r.undecided[0].ranks, std::vector<int>{2});
  EXPECT_NE(r.headline.find("gloo records no send/recv"), std::string::npos) << r.headline;
  // Its own log's gloo error is cited beside the question: a gloo wait raised on it.
  ExternalEvidence ev;
  ev.addressHost = {{"10.0.0.9", "gpu-018"}};
  ev.rankHost = {{1, "gpu-018"}};
  LogFact closed = logFact(LogFact::Kind::kGlooPeerClosed, 2, 0,
                           {"logs/rank2.log", 7, "[rank2]: RuntimeError: [...] Connection closed by peer [10.0.0.9]:13716"});
  closed.seq.reset();
  closed.peerAddr = "[10.0.0.9]:13716";
  ev.logs.push_back(closed);
  HangReport withLog = job.analyse(ev);
  EXPECT_EQ(withLog.verdict, HangVerdict::kCannotDecide);
  ASSERT_EQ(withLog.undecided.size(), 1u);
  EXPECT_NE(withLog.undecided[0].reason.find(
                "(a gloo wait raised on it, so it was inside gloo, not in its own code, when it did); its log: rank 2's "
                "gloo connection to [10.0.0.9]:13716 (gpu-018, rank(s) 1) was closed by that peer: its process exited "
                "or dropped the connection (logs/rank2.log:7)"),
            std::string::npos)
      << withLog.undecided[0].reason;
  // Once a gloo dump shows a send, gloo records them: the quiet dump convicts again.
  FrEntry& s = job.add(3, "0", 10, "send", {{1}}, "completed");
  s.isP2p = true;
  s.p2pPeer = 0;
  s.backend = "gloo";
  EXPECT_EQ(culpritRanks(job.analyse()), std::vector<int>{2});
}

TEST(HangAnalyse, ACompletionNobodyWentOnFromIsAFailure) {
  // gloo counts a failed collective as completed: ranks 0 and 2 show #11 completed, but nobody went
  // on and rank 1 still waits in it. That is no completion lag of rank 1; rank 3 left no dump.
  Job job(4, 10);
  job.dumps.erase(3);
  for (int r : {0, 2}) {
    job.add(r, "0", 11, "all_reduce", {{10}}, "completed");
    job.status(r, "0", 11, 11, 11);
  }
  job.enter(1, 11);
  HangReport r = job.analyse();
  ASSERT_EQ(culpritRanks(r), std::vector<int>{3});
  EXPECT_EQ(r.culprits[0].kind, FaultKind::kNoDump);
  const auto* w = waitingIn(r, false);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ranks, (std::vector<int>{0, 1, 2}));
}
