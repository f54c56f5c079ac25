// The readers of a hung job's other evidence: rank logs (PyTorch's watchdog lines of several torch
// versions, NCCL WARN lines, launcher prefixes), NCCL RAS answers (text of 2.24 and 2.29, JSON) and
// dsdiag's fleet report, and the rank->host map joined from them. Samples and what each mimics:
// diag/hang/tests/data/evidence/README.md.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "diag/hang/evidence_reader.h"
#include "engine/common/error.h"
#include "engine/testing/paths.h"

#ifndef DS_HANG_EVIDENCE_DATA
#define DS_HANG_EVIDENCE_DATA "diag/hang/tests/data/evidence"
#endif

using namespace ds::diag::hang;
using Kind = LogFact::Kind;
namespace fs = std::filesystem;

namespace {

std::string data(const std::string& rel) { return std::string(DS_HANG_EVIDENCE_DATA) + "/" + rel; }

ExternalEvidence logsOf(const std::string& text, const std::string& file = "combined.log") {
  std::istringstream in(text);
  ExternalEvidence ev;
  detail::readLogStream(in, file, ev);
  return ev;
}

std::vector<const LogFact*> facts(const ExternalEvidence& ev, Kind kind) {
  std::vector<const LogFact*> out;
  for (const auto& f : ev.logs)
    if (f.kind == kind) out.push_back(&f);
  return out;
}

const LogFact* fact(const ExternalEvidence& ev, Kind kind, std::optional<int64_t> seq = std::nullopt) {
  for (const auto& f : ev.logs)
    if (f.kind == kind && (!seq || f.seq == seq)) return &f;
  return nullptr;
}

std::vector<const RasRank*> rasState(const ExternalEvidence& ev, const std::string& state) {
  std::vector<const RasRank*> out;
  for (const auto& r : ev.ras)
    if (r.state == state) out.push_back(&r);
  return out;
}

bool anyProblem(const ExternalEvidence& ev, const std::vector<std::string>& words) {
  return std::any_of(ev.problems.begin(), ev.problems.end(), [&](const std::string& p) {
    return std::all_of(words.begin(), words.end(),
                       [&](const std::string& w) { return p.find(w) != std::string::npos; });
  });
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// A folder of its own under the test's temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ds_evidence_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Watchdog lines of several torch versions

TEST(EvidenceLogs, Torch24WordingWithC10PrefixAndGroupPrefix) {
  ExternalEvidence ev;
  readLogs({data("logs/job_a/rank_3.log")}, ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);

  // The LOG(ERROR) line and the same text inside what() are one fact; the second fills the group.
  ASSERT_EQ(facts(ev, Kind::kWatchdogTimeout).size(), 1u);
  const LogFact* t = fact(ev, Kind::kWatchdogTimeout);
  EXPECT_EQ(t->rank, 3);
  EXPECT_EQ(t->rankFrom, "log_prefix");
  EXPECT_EQ(t->groupRank, 3);
  EXPECT_EQ(t->seq, 20536);
  EXPECT_EQ(t->opType, "ALLREDUCE");
  EXPECT_EQ(t->timeoutMs, 600000);
  EXPECT_EQ(t->ranForMs, 600043);
  EXPECT_EQ(t->pgId, "0");
  EXPECT_EQ(t->source.line, 5);
  EXPECT_NE(t->source.file.find("rank_3.log"), std::string::npos);
  EXPECT_NE(t->source.text.find("Watchdog caught"), std::string::npos);
  EXPECT_LE(t->source.text.size(), 303u);

  const LogFact* f = fact(ev, Kind::kWatchdogFailure);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 3);
  EXPECT_EQ(f->rankFrom, "log_prefix");
  EXPECT_EQ(f->seq, 20536);
  EXPECT_EQ(f->lastEnqueued, 20537);
  EXPECT_EQ(f->lastCompleted, 20535);
  EXPECT_EQ(f->pgId, "0");

  const LogFact* d = fact(ev, Kind::kDumpSignal);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->fromRank, 7);  // "from  rank 7" (two spaces, as torch prints it)
  EXPECT_EQ(d->lastEnqueued, 20537);
  EXPECT_EQ(d->lastCompleted, 20535);

  const LogFact* n = fact(ev, Kind::kNcclNetError);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->peerAddr, "10.79.0.9");
  EXPECT_EQ(n->hca, "mlx5_3");
  EXPECT_EQ(n->host, "node04");
  EXPECT_EQ(n->rank, 3);
  EXPECT_EQ(n->rankFrom, "file_name");  // NCCL's own lines carry no rank

  ASSERT_EQ(ev.rankHost.count(3), 1u);
  EXPECT_EQ(ev.rankHost.at(3), "node04");
  EXPECT_EQ(ev.rankHostSource.at(3).line, 2);  // the first NCCL line
}

TEST(EvidenceLogs, ARankNamedInsideASubgroupIsNotTakenAsTheGlobalRank) {
  ExternalEvidence ev;
  readLogs({data("logs/job_a/rank_7.log")}, ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);

  const LogFact* sub = fact(ev, Kind::kWatchdogFailure, 57);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->rank, 7);  // c10's "[rank7]:"
  EXPECT_EQ(sub->groupRank, 1);
  EXPECT_EQ(sub->pgId, "1");

  // what() carries no c10 prefix; "[PG ID 1 ... Rank 1]" and "[Rank 1]" are ranks of group 1.
  const LogFact* t57 = fact(ev, Kind::kWatchdogTimeout, 57);
  ASSERT_NE(t57, nullptr);
  EXPECT_EQ(t57->rank, 7);
  EXPECT_EQ(t57->rankFrom, "file_name");
  EXPECT_EQ(t57->groupRank, 1);
  EXPECT_EQ(t57->pgId, "1");
  EXPECT_EQ(t57->opType, "ALLGATHER");

  const LogFact* d = fact(ev, Kind::kDumpSignal);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->fromRank, 7);  // "from this local rank"
  EXPECT_EQ(d->lastEnqueued, 20536);

  const LogFact* n = fact(ev, Kind::kNcclNetError);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->peerAddr, "10.79.0.5");
  EXPECT_EQ(n->hca, "mlx5_1");
  EXPECT_EQ(ev.rankHost.at(7), "node08");
}

TEST(EvidenceLogs, Torch113WordingTakesTheRankFromTheFileName) {
  ExternalEvidence ev;
  readLogs({data("logs/torch113/worker-5.err")}, ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  const LogFact* t = fact(ev, Kind::kWatchdogTimeout);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->rank, 5);
  EXPECT_EQ(t->rankFrom, "file_name");  // beats the bare "[Rank 5]", which may be a subgroup's rank
  EXPECT_EQ(t->groupRank, 5);
  EXPECT_EQ(t->seq, 20536);
  EXPECT_EQ(t->timeoutMs, 1800000);
  EXPECT_EQ(t->ranForMs, 1802710);
  EXPECT_EQ(t->pgId, "");

  const LogFact* n = fact(ev, Kind::kNcclNetError);
  ASSERT_NE(n, nullptr);  // NCCL <= 2.18: "with error 12, opcode 0, ..." and no HCA
  EXPECT_EQ(n->peerAddr, "10.0.0.17");
  EXPECT_EQ(n->hca, "");
  EXPECT_EQ(n->host, "gpu-005");
  EXPECT_EQ(ev.rankHost.at(5), "gpu-005");
}

TEST(EvidenceLogs, Torch22And23Wording) {
  ExternalEvidence ev;
  readLogs({data("logs/torch22/rank1.log")}, ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  // "Timeout at NCCL work" and "Exception (either an error or timeout) detected by watchdog" say the same.
  ASSERT_EQ(facts(ev, Kind::kWatchdogFailure).size(), 1u);
  const LogFact* f = fact(ev, Kind::kWatchdogFailure);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->seq, 6463);
  EXPECT_EQ(f->lastEnqueued, 6464);
  EXPECT_EQ(f->lastCompleted, 6462);
  EXPECT_EQ(f->pgId, "0");

  const LogFact* t = fact(ev, Kind::kWatchdogTimeout);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->opType, "_ALLGATHER_BASE");

  const LogFact* d = fact(ev, Kind::kDumpSignal);
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->fromRank.has_value());  // "a global timeout from another rank": not named
  EXPECT_EQ(d->lastEnqueued, 6464);

  EXPECT_EQ(facts(ev, Kind::kNcclRemoteError).size(), 1u);  // the error and its "ncclRemoteError:" line
  const LogFact* n = fact(ev, Kind::kNcclNetError);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->peerAddr, "gpu-node1.int.example.org");
  EXPECT_EQ(n->host, "");
}

TEST(EvidenceLogs, WorkWithoutSeqNumAndTorch215Nccl2Wording) {
  auto ev = logsOf(
      "[E ProcessGroupNCCL.cpp:587] [Rank 2] Watchdog caught collective operation timeout: "
      "WorkNCCL(OpType=ALLREDUCE, "
      "Timeout(ms)=1800000) ran for 1800995 milliseconds before timing out.\n"
      "[rank6]:[E1204 14:02:11.000000000 ProcessGroupNCCL.cpp:301] [TC][rank=6][name=default_pg] Watchdog "
      "caught "
      "collective operation timeout: NCCL operation timed out\n");
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  auto t = facts(ev, Kind::kWatchdogTimeout);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_FALSE(t[0]->seq.has_value());  // unknown, not 0
  EXPECT_EQ(t[0]->opType, "ALLREDUCE");
  EXPECT_EQ(t[0]->rank, 2);
  EXPECT_EQ(t[0]->rankFrom, "group_rank");
  EXPECT_EQ(t[1]->rank, 6);
  EXPECT_EQ(t[1]->groupRank, 6);
  EXPECT_FALSE(t[1]->seq.has_value());
}

// gloo's transport errors as torch 2.15's ranks raised them (diag/hang/tests/fixtures/torch-2.15-gloo/p2p
// expected.json, rank_outcome), under torchrun's "[rankN]:" prefix and in a file named for its rank.
TEST(EvidenceLogs, GlooTransportErrors) {
  auto ev = logsOf(
      "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection "
      "closed by peer [127.0.0.1]:13716. This is typically caused by a remote worker crashing. Check the logs of the "
      "remote worker before reporting an error. GLHF!\n"
      "[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:129] "
      "Timed out waiting 5000ms for send operation to complete\n"
      "[rank2]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
      "Timed out waiting 99999999999999999999ms for recv operation to complete\n");
  auto closed = facts(ev, Kind::kGlooPeerClosed);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0]->rank, 0);
  EXPECT_EQ(closed[0]->peerAddr, "[127.0.0.1]:13716");
  auto timeouts = facts(ev, Kind::kGlooTimeout);
  ASSERT_EQ(timeouts.size(), 1u);
  EXPECT_EQ(timeouts[0]->rank, 1);
  EXPECT_EQ(timeouts[0]->opType, "send");
  EXPECT_EQ(timeouts[0]->timeoutMs, 5000);
  // A number no int64 holds is a problem, not a wrapped value.
  EXPECT_TRUE(anyProblem(ev, {"gloo timeout", "99999999999999999999"})) << joined(ev.problems);
  // The rank from the file name where the line has no prefix.
  auto bare = logsOf("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
                     "1800000ms for recv operation to complete\n",
                     "rank_3.log");
  auto t = facts(bare, Kind::kGlooTimeout);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0]->rank, 3);
  EXPECT_EQ(t[0]->opType, "recv");
}

// Python tracebacks: the exception that ended each one, its innermost frame, and whether it is an error a
// hang raises on the ranks that wait. The first case is torch 2.15's own printing of an uncaught
// exception (fixtures/torch-2.15-gloo/raise/logs/rank_3.log: "[rankN]: " before every line).
TEST(EvidenceLogs, PythonTracebacksUnderTorchsRankPrefix) {
  auto ev = logsOf(
      "[rank 3 +6.30s] raising ValueError in load_batch (uncaught)\n"
      "[rank3]: Traceback (most recent call last):\n"
      "[rank3]:   File \"/job/train.py\", line 481, in <module>\n"
      "[rank3]:     main()\n"
      "[rank3]:   File \"/job/train.py\", line 206, in load_batch\n"
      "[rank3]:     raise ValueError(f\"batch {step}: ...\")\n"
      "[rank3]:     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
      "[rank3]: ValueError: batch 21: sample 1834 has 17 tokens, expected 16\n");
  auto ex = facts(ev, Kind::kException);
  ASSERT_EQ(ex.size(), 1u) << joined(ev.problems);
  EXPECT_EQ(ex[0]->rank, 3);
  EXPECT_EQ(ex[0]->rankFrom, "log_prefix");
  EXPECT_EQ(ex[0]->exception, "ValueError");
  EXPECT_EQ(ex[0]->message, "batch 21: sample 1834 has 17 tokens, expected 16");
  EXPECT_EQ(ex[0]->frame, "load_batch (/job/train.py:206)");
  EXPECT_FALSE(ex[0]->hangConsequence);
  EXPECT_EQ(ex[0]->source.line, 8);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
}

TEST(EvidenceLogs, ExceptionsAHangRaisesAreToldApartFromARanksOwn) {
  // A waiting rank's traceback in a file named for its rank: gloo's timeout is also read as its own fact.
  auto ev = logsOf(
      "Traceback (most recent call last):\n"
      "  File \"/job/train.py\", line 238, in step\n"
      "    dist.all_reduce(t16)\n"
      "  File \"/venv/torch/distributed/distributed_c10d.py\", line 4181, in all_reduce\n"
      "    work.wait()\n"
      "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
      "waiting 5000ms for recv operation to complete\n",
      "rank_1.log");
  auto ex = facts(ev, Kind::kException);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0]->rank, 1);
  EXPECT_EQ(ex[0]->exception, "RuntimeError");
  EXPECT_EQ(ex[0]->frame, "all_reduce (/venv/torch/distributed/distributed_c10d.py:4181)");
  EXPECT_TRUE(ex[0]->hangConsequence);
  EXPECT_EQ(facts(ev, Kind::kGlooTimeout).size(), 1u);
  // The watchdog's abort, a closed connection, the launcher's SIGTERM: consequences. A CUDA error, an OOM,
  // a KeyError: a rank's own.
  struct Case {
    std::string line;
    bool consequence;
  };
  for (const Case& c : std::vector<Case>{
           {"torch.distributed.DistBackendError: [PG ID 0 PG GUID 0(default_pg) Rank 5] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=20536, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)",
            true},
           {"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer "
            "[10.0.0.7]:13716",
            true},
           {"torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 15", true},
           {"torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /barrier", true},
           {"RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms "
            "for recv operation to complete",
            true},
           {"RuntimeError: Socket Timeout", true},
           // A timeout of the rank's own: its data loader or a lock stalled it, which is why the others wait.
           {"RuntimeError: DataLoader timed out after 1800 seconds", false},
           {"TimeoutError: timed out acquiring the lock /scratch/ckpt/step_40000.lock", false},
           {"ValueError: invalid timeout value in the config: -1", false},
           {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", false},
           {"RuntimeError: CUDA error: an illegal memory access was encountered", false},
           {"KeyError: 'labels'", false},
           {"AssertionError", false},
       }) {
    auto one = logsOf("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n" + c.line + "\n",
                      "rank_2.log");
    auto f = facts(one, Kind::kException);
    ASSERT_EQ(f.size(), 1u) << c.line;
    EXPECT_EQ(f[0]->hangConsequence, c.consequence) << c.line;
  }
  const auto bareLog = logsOf("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
                              "AssertionError\n",
                              "rank_2.log");
  auto bare = facts(bareLog, Kind::kException);  // pointers into bareLog: keep it alive
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0]->exception, "AssertionError");
  EXPECT_EQ(bare[0]->message, "");
}

TEST(EvidenceLogs, InterleavedChainedCutAndCxxTracebacks) {
  // torchrun's console: two ranks' tracebacks interleaved under their "[defaultN]:" prefixes; rank 1's is
  // chained (the first exception is its root, both are kept).
  auto ev = logsOf(
      "[default0]:Traceback (most recent call last):\n"
      "[default1]:Traceback (most recent call last):\n"
      "[default0]:  File \"/job/data.py\", line 12, in fetch\n"
      "[default1]:  File \"/job/train.py\", line 40, in step\n"
      "[default1]:KeyError: 'labels'\n"
      "[default1]:\n"
      "[default1]:During handling of the above exception, another exception occurred:\n"
      "[default1]:\n"
      "[default1]:Traceback (most recent call last):\n"
      "[default1]:  File \"/job/train.py\", line 44, in step\n"
      "[default1]:RuntimeError: bad batch\n"
      "[default0]:OSError: [Errno 5] Input/output error: '/data/shard-0007'\n");
  auto ex = facts(ev, Kind::kException);
  ASSERT_EQ(ex.size(), 3u) << joined(ev.problems);
  EXPECT_EQ(ex[0]->rank, 1);
  EXPECT_EQ(ex[0]->rankFrom, "local_rank");
  EXPECT_EQ(ex[0]->exception, "KeyError");
  EXPECT_EQ(ex[0]->frame, "step (/job/train.py:40)");
  EXPECT_EQ(ex[1]->rank, 1);
  EXPECT_EQ(ex[1]->exception, "RuntimeError");
  EXPECT_EQ(ex[2]->rank, 0);
  EXPECT_EQ(ex[2]->exception, "OSError");
  EXPECT_EQ(ex[2]->message, "[Errno 5] Input/output error: '/data/shard-0007'");
  EXPECT_EQ(ex[2]->frame, "fetch (/job/data.py:12)");

  // srun -l labels; gloo killing a rank whose peer sent another size (fixtures/torch-2.15-gloo/size).
  auto cxx = logsOf(
      "0: terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
      "0:   what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:464] op.preamble.length <= "
      "op.nbytes. 12 vs 8\n");
  auto t = facts(cxx, Kind::kException);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0]->rank, 0);
  EXPECT_EQ(t[0]->rankFrom, "launcher_label");
  EXPECT_EQ(t[0]->exception, "gloo::EnforceNotMet");
  EXPECT_TRUE(t[0]->hangConsequence);
  EXPECT_EQ(t[0]->source.line, 2);

  // A log cut inside a traceback, and one cut before a C++ exception's message: a problem each; the
  // termination is still a fact.
  auto cut = logsOf("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n", "rank_4.log");
  EXPECT_TRUE(facts(cut, Kind::kException).empty());
  EXPECT_TRUE(anyProblem(cut, {"rank_4.log:1", "ends inside a Python traceback"})) << joined(cut.problems);
  auto cutCxx = logsOf("terminate called after throwing an instance of 'std::bad_alloc'\n", "rank_5.log");
  auto b = facts(cutCxx, Kind::kException);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0]->rank, 5);
  EXPECT_EQ(b[0]->exception, "std::bad_alloc");
  EXPECT_FALSE(b[0]->hangConsequence);
  EXPECT_TRUE(anyProblem(cutCxx, {"rank_5.log:1", "std::bad_alloc", "before its message"})) << joined(cutCxx.problems);
  // A traceback whose next line is no exception (another log line of the same rank): skipped, said.
  auto odd = logsOf("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
                    "[W1206 12:00:00.000 ProcessGroupGloo.cpp:123] Warning: something\n",
                    "rank_6.log");
  EXPECT_TRUE(facts(odd, Kind::kException).empty());
  EXPECT_TRUE(anyProblem(odd, {"rank_6.log:1", "no exception line ends it"})) << joined(odd.problems);
}

TEST(EvidenceLogs, DumpSignalVariants) {
  auto ev = logsOf(
      "[rank0]:[E ProcessGroupNCCL.cpp:1255] [PG 0 Rank 0] Received a dump signal from this local rank and "
      "will start "
      "to dump the debug info. Last enqueued NCCL work: 41, last completed NCCL work: 40.\n"
      "[rank5]:[E703 17:54:18.884528282 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
      "Received a "
      "dump signal due to a collective timeout from rank 12 and we will try our best to dump the debug info. "
      "Last "
      "enqueued NCCL work: 56116, last completed NCCL work: 56116.\n");
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  auto d = facts(ev, Kind::kDumpSignal);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0]->rank, 0);
  EXPECT_EQ(d[0]->fromRank, 0);
  EXPECT_EQ(d[0]->lastCompleted, 40);
  EXPECT_EQ(d[1]->rank, 5);
  EXPECT_EQ(d[1]->fromRank, 12);
  EXPECT_EQ(d[1]->lastEnqueued, 56116);
}

// ---------------------------------------------------------------------------------------------
// Launchers, NCCL lines, rank->host ties

TEST(EvidenceLogs, SrunLabelsNcclWarnLinesAndTorchrunSummary) {
  ExternalEvidence ev;
  readLogs({data("logs/srun_console.log")}, ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  auto net = facts(ev, Kind::kNcclNetError);
  ASSERT_EQ(net.size(), 2u);
  EXPECT_EQ(net[0]->rank, 12);
  EXPECT_EQ(net[0]->rankFrom, "launcher_label");
  EXPECT_EQ(net[0]->host, "gpu-013");
  EXPECT_EQ(net[0]->peerAddr, "10.1.2.3");
  EXPECT_EQ(net[1]->rank, 9);
  EXPECT_EQ(net[1]->peerRank, 8);  // "[Proxy Service 9] ... from rank 8"
  EXPECT_EQ(ev.rankHost.at(12), "gpu-013");
  EXPECT_EQ(ev.rankHost.at(9), "gpu-010");
  EXPECT_EQ(ev.rankHost.size(), 2u);
}

TEST(EvidenceLogs, TorchrunSummaryAloneTiesItsRankToItsHost) {
  auto ev = logsOf(
      "Root Cause (first observed failure):\n[0]:\n  time      : 2024-12-04_14:02:12\n  host      : gpu-017\n"
      "  rank      : 12 (local_rank: 4)\n  exitcode  : -6 (pid: 30411)\n");
  EXPECT_EQ(ev.rankHost.at(12), "gpu-017");
  EXPECT_EQ(ev.rankHostSource.at(12).line, 5);
  EXPECT_TRUE(ev.logs.empty());
}

TEST(EvidenceLogs, C10PrefixBeatsTorchrunsLocalRankWhichNeverTiesAHost) {
  ExternalEvidence ev;
  readLogs({data("logs/torchrun_console.log")}, ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  auto t = facts(ev, Kind::kWatchdogTimeout);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0]->rank, 11);
  EXPECT_EQ(t[0]->rankFrom, "log_prefix");
  EXPECT_EQ(t[1]->rank, 4);  // behind a Ray worker prefix: only the bare "[Rank 4]"
  EXPECT_EQ(t[1]->rankFrom, "group_rank");
  EXPECT_EQ(t[1]->seq, 20518);

  const LogFact* n = fact(ev, Kind::kNcclNetError);
  ASSERT_NE(n, nullptr);  // NCCL 2.28.7+: "status=IBV_WC_RETRY_EXC_ERR(12) ... vendor_err=129 ... hca mlx5_0"
  EXPECT_EQ(n->rank, 2);
  EXPECT_EQ(n->rankFrom, "local_rank");
  EXPECT_EQ(n->hca, "mlx5_0");
  EXPECT_EQ(n->peerAddr, "10.79.0.12");
  EXPECT_TRUE(ev.rankHost.empty());  // a local rank is not a rank of the job
}

TEST(EvidenceLogs, PdshAndMpirunPrefixes) {
  auto ev = logsOf(
      "worker-3: [rank9]:[E1204 14:02:11.1 ProcessGroupNCCL.cpp:632] [Rank 9] Watchdog caught collective "
      "operation "
      "timeout: WorkNCCL(SeqNum=8, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
      "600001 "
      "milliseconds before timing out.\n"
      "[1,14]<stderr>:gpu-015:777:801 [6] NCCL WARN NET/IB : mlx5_2:1 Got async error event: port error\n"
      "RuntimeError: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8, "
      "OpType=BROADCAST, "
      "Timeout(ms)=600000) ran for 600002 milliseconds before timing out.\n");
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  EXPECT_EQ(ev.rankHost.at(9), "worker-3");
  EXPECT_EQ(ev.rankHost.at(14), "gpu-015");
  EXPECT_EQ(ev.rankHost.count(3), 0u);  // "RuntimeError: " is not a host prefix
  const LogFact* a = fact(ev, Kind::kNcclNetError);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->hca, "mlx5_2");
  EXPECT_EQ(a->rank, 14);
  EXPECT_EQ(a->rankFrom, "launcher_label");
}

TEST(EvidenceLogs, AFileOfSeveralGpusIsNotOneRanksLog) {
  // srun --output=%N.log: one file per node; its number is the node's, not a rank.
  auto ev = logsOf(
      "node01:4100:4100 [0] NCCL INFO Bootstrap : Using eth0:10.79.0.2<0>\n"
      "[E ProcessGroupNCCL.cpp:828] [Rank 0] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=5, "
      "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800350 milliseconds before timing out.\n"
      "node01:4101:4101 [1] NCCL INFO Bootstrap : Using eth0:10.79.0.2<0>\n"
      "[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=5, "
      "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800351 milliseconds before timing out.\n",
      "logs/node01.log");
  EXPECT_TRUE(anyProblem(ev, {"node01.log", "GPUs 0 and 1", "several ranks"})) << joined(ev.problems);
  EXPECT_TRUE(ev.rankHost.empty());  // the tie of "rank 1" made from the name is taken back
  auto t = facts(ev, Kind::kWatchdogTimeout);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_FALSE(t[0]->rank.has_value());
  EXPECT_EQ(t[0]->groupRank, 0);
  EXPECT_EQ(t[1]->rank, 1);  // from its own "[Rank 1]" now
  EXPECT_EQ(t[1]->rankFrom, "group_rank");
}

TEST(EvidenceLogs, RankFromFileName) {
  EXPECT_EQ(detail::rankFromFileName("logs/rank_3.log"), 3);
  EXPECT_EQ(detail::rankFromFileName("/x/worker-12.err"), 12);
  EXPECT_EQ(detail::rankFromFileName("rank7"), 7);
  EXPECT_EQ(detail::rankFromFileName("train.log.5"), 5);
  EXPECT_EQ(detail::rankFromFileName("node2-rank015.stderr.txt"), 15);
  EXPECT_EQ(detail::rankFromFileName("attempt_0/3/stderr.log"), std::nullopt);
  EXPECT_EQ(detail::rankFromFileName("slurm-4242.out"), std::nullopt);
  EXPECT_EQ(detail::rankFromFileName("job-12345678.log"), std::nullopt);  // a job id, not a rank
  EXPECT_EQ(detail::rankFromFileName("console.log"), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// Malformed and hostile input

TEST(EvidenceLogs, CutShortAndOverflowingLinesAreProblemsAndTheRestIsRead) {
  TempDir dir;
  const std::string longLine(kMaxLogLineBytes + 100, 'x');
  const std::string p = dir.file("rank_2.log",
                                 "[rank2]:[E1204 14:02:11.1 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog "
                                 "caught collective operation timeout: "
                                 "WorkNCCL(SeqNum=20536, OpTy\n" +
                                     longLine + "\n" +
                                     "[rank2]:[E1204 14:02:11.2 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID "
                                     "0(default_pg) Rank 2]  failure "
                                     "detected by watchdog at work sequence id: 99999999999999999999 PG "
                                     "status: last enqueued work: 1, last "
                                     "completed work: 0\n"
                                     "[rank2]:[E1204 14:02:11.3 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID "
                                     "0(default_pg) Rank 2]  failure "
                                     "detected by watchdog at work sequence id: 20536 PG status: last "
                                     "enqueued work: 20536, last completed "
                                     "work: 20535\n" +
                                     longLine);  // an overlong last line without a newline
  ExternalEvidence ev;
  readLogs({p}, ev);
  EXPECT_TRUE(anyProblem(ev, {"rank_2.log:1:", "watchdog timeout line that does not parse"}))
      << joined(ev.problems);
  EXPECT_TRUE(anyProblem(ev, {"rank_2.log:3:", "99999999999999999999"})) << joined(ev.problems);
  EXPECT_TRUE(anyProblem(ev, {"rank_2.log:", "2 lines longer than 64 KiB"})) << joined(ev.problems);
  EXPECT_TRUE(facts(ev, Kind::kWatchdogTimeout).empty());
  ASSERT_EQ(ev.logs.size(), 1u);
  EXPECT_EQ(ev.logs[0].seq, 20536);
  EXPECT_EQ(ev.logs[0].source.line, 4);  // the skipped long line still counts
}

TEST(EvidenceLogs, LineProblemsOfOneFileAreCapped) {
  std::string text;
  for (int i = 0; i < 30; ++i)
    text += "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=\n";
  auto ev = logsOf(text, "bad.log");
  EXPECT_EQ(ev.problems.size(), 21u) << joined(ev.problems);
  EXPECT_TRUE(anyProblem(ev, {"bad.log", "10 more lines"}));
}

TEST(EvidenceLogs, UnrelatedLinesAndBinaryGarbageGiveNothing) {
  std::string text = "step 1 loss 2.0\nNCCL_DEBUG=INFO\nWatchdog\n";
  const char garbage[] = "\0\x01\xff\xfe NCCL WARN \x80\x81 ran for\n";
  text += std::string(garbage, sizeof(garbage) - 1);
  auto ev = logsOf(text);
  EXPECT_TRUE(ev.logs.empty());
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
}

TEST(EvidenceLogs, MissingPathsAreConfigErrorsNamingThePath) {
  ExternalEvidence ev;
  try {
    readLogs({"/nonexistent/dir/rank_0.log"}, ev);
    FAIL() << "no exception";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/rank_0.log"), std::string::npos);
  }
  EXPECT_THROW(readLogs({data("logs/job_a/*.nothing")}, ev), ds::ConfigError);
  EXPECT_THROW(readRas("/nonexistent/ras.txt", ev), ds::ConfigError);
  EXPECT_THROW(readFleetJson("/nonexistent/diag.json", ev), ds::ConfigError);
}

TEST(EvidenceLogs, DirectoriesAndGlobsReadEachFileOnce) {
  ExternalEvidence ev;
  readLogs({data("logs/job_a"), data("logs/job_a/rank_*.log"), data("logs/job_a/rank_3.log")}, ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  auto t = facts(ev, Kind::kWatchdogTimeout);
  ASSERT_EQ(t.size(), 3u);   // rank 3's #20536, rank 7's #20536 and its #57
  EXPECT_EQ(t[0]->rank, 3);  // natural order: rank_3 before rank_7
  EXPECT_EQ(t[1]->rank, 7);
}

TEST(EvidenceLogs, AFifoOrADeviceIsAProblemNotAHang) {
  TempDir dir;
  const std::string fifo = dir.path() + "/rank_0.log";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ExternalEvidence ev;
  readLogs({fifo}, ev);
  readRas(dir.path(), ev);
  EXPECT_TRUE(anyProblem(ev, {"rank_0.log", "not a regular file"})) << joined(ev.problems);
  EXPECT_TRUE(anyProblem(ev, {dir.path(), "not a regular file", "NCCL RAS"})) << joined(ev.problems);
}

// ---------------------------------------------------------------------------------------------
// NCCL RAS

TEST(EvidenceRas, Text229) {
  ExternalEvidence ev;
  readRas(data("ras_status_2.29.txt"), ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);

  auto incomplete = rasState(ev, "incomplete");
  ASSERT_EQ(incomplete.size(), 1u);
  EXPECT_EQ(incomplete[0]->pid, 3487984);
  EXPECT_EQ(incomplete[0]->host, "172.16.64.213");
  EXPECT_EQ(incomplete[0]->gpu, 5);
  EXPECT_EQ(incomplete[0]->rank, 13);  // joined through the job-wide communicator's missing rank
  EXPECT_EQ(incomplete[0]->comm, "");

  auto missing = rasState(ev, "missing");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->rank, 13);
  EXPECT_EQ(missing[0]->comm, "#0-0 (cf264af53edbe986)");
  EXPECT_EQ(missing[0]->commSize, 16);
  EXPECT_TRUE(missing[0]->worldComm);
  EXPECT_EQ(missing[0]->source.line, 28);

  auto mismatch = rasState(ev, "mismatch");
  ASSERT_EQ(mismatch.size(), 2u);
  EXPECT_EQ(mismatch[0]->rank, 7);
  EXPECT_EQ(mismatch[0]->launchedUpTo, 20536);
  EXPECT_EQ(mismatch[0]->detail, "AllReduce operation counts");
  EXPECT_EQ(mismatch[0]->pid, 51077);
  EXPECT_TRUE(mismatch[0]->worldComm);
  EXPECT_EQ(mismatch[1]->rank, 4);
  EXPECT_EQ(mismatch[1]->detail, "status FINALIZE");
  EXPECT_EQ(mismatch[1]->commSize, 8);
  EXPECT_FALSE(mismatch[1]->worldComm);  // rank 4 of an 8-rank communicator is not global rank 4
  EXPECT_FALSE(mismatch[1]->launchedUpTo.has_value());

  EXPECT_EQ(ev.rankHost.at(7), "172.16.64.210");
  EXPECT_EQ(ev.rankHost.at(13), "172.16.64.213");
  EXPECT_EQ(ev.rankHost.count(4), 0u);
}

TEST(EvidenceRas, Text224) {
  ExternalEvidence ev;
  readRas(data("ras_status_2.24.txt"), ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  auto dead = rasState(ev, "dead");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0]->rank, -1);  // 2.24 names the missing rank without its process: no join
  EXPECT_EQ(dead[0]->pid, 3487984);
  auto missing = rasState(ev, "missing");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->rank, 21);  // "The missing rank: 21"
  EXPECT_EQ(missing[0]->host, "");
  auto mismatch = rasState(ev, "mismatch");
  ASSERT_EQ(mismatch.size(), 6u);
  for (const auto* r : mismatch) {
    EXPECT_EQ(r->launchedUpTo, 6649);
    EXPECT_EQ(r->detail, "collective operation counts");
    EXPECT_TRUE(r->worldComm);
  }
  EXPECT_EQ(mismatch[1]->rank, 2);
  EXPECT_EQ(mismatch[1]->gpu, 2);
  EXPECT_EQ(ev.rankHost.at(0), "172.16.64.210");
  EXPECT_EQ(ev.rankHost.count(21), 0u);
}

TEST(EvidenceRas, Json) {
  ExternalEvidence ev;
  readRas(data("ras_status_2.29.json"), ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  ASSERT_EQ(ev.ras.size(), 6u);
  const RasRank& r0 = ev.ras[0];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r0.state, "ok");
  EXPECT_EQ(r0.launchedUpTo, 6651);
  EXPECT_NE(r0.detail.find("AllReduce 6650"), std::string::npos);
  EXPECT_EQ(r0.comm, "0xae94423cfbb2ef4a");
  EXPECT_TRUE(r0.worldComm);
  const RasRank& r2 = ev.ras[1];
  EXPECT_EQ(r2.state, "error");
  EXPECT_NE(r2.detail.find("async_error 6"), std::string::npos);
  auto dead = rasState(ev, "dead");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0]->rank, 1);
  EXPECT_EQ(dead[0]->pid, 1524345);
  EXPECT_EQ(dead[0]->gpu, 1);
  EXPECT_FALSE(ev.ras[4].worldComm);  // the 2-rank communicator
  EXPECT_EQ(ev.rankHost.at(0), "172.16.64.245");
  EXPECT_EQ(ev.rankHost.at(1), "172.16.64.245");
  EXPECT_EQ(ev.rankHost.at(3), "172.16.64.246");
}

TEST(EvidenceRas, ErrorBlock) {
  ExternalEvidence ev;
  detail::readRasText(
      "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
      "    #  in group  per comm  per node  per comm  in group\n"
      "    0         1         1         4         4         4   RUNNING   ERROR\n"
      "\n"
      "Errors\n"
      "======\n"
      "\n"
      "#0-0 (0badc0ffee123456) ERROR\n"
      "  Asynchronous errors on 2 ranks\n"
      "  2 ranks reported Remote process error\n"
      "  Rank 1 -- GPU 1 managed by process 901 on node 10.0.0.5\n"
      "  Rank 2 -- GPU 2 managed by process 902 on node 10.0.0.5\n"
      "  Initialization error on 1 rank\n"
      "  Rank 3 reported System error -- GPU 3 managed by process 903 on node 10.0.0.6\n",
      "ras_error.txt", ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  auto errors = rasState(ev, "error");
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0]->detail, "asynchronous error: Remote process error");
  EXPECT_EQ(errors[2]->rank, 3);
  EXPECT_EQ(errors[2]->detail, "initialization error: System error");
  EXPECT_TRUE(errors[2]->worldComm);  // 4 ranks, 4 GPUs named: the job-wide communicator
  EXPECT_EQ(ev.rankHost.at(3), "10.0.0.6");
}

TEST(EvidenceRas, MonitorEventsInJson) {
  ExternalEvidence ev;
  detail::readRasText(
      R"({"timestamp": "2025-12-19 13:07:01", "group": "LIFECYCLE", "event": "PEER_JOINED", "details": ""}
{
  "timestamp": "2025-12-19 13:07:07",
  "group": "LIFECYCLE",
  "event": "PEER_DEAD",
  "peer": {"host": "172.16.64.245", "pid": 1524345, "cuda_devs": [1], "nvml_devs": [1]},
  "details": ""
})",
      "monitor.json", ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  ASSERT_EQ(ev.ras.size(), 1u);
  EXPECT_EQ(ev.ras[0].state, "dead");
  EXPECT_EQ(ev.ras[0].pid, 1524345);
  EXPECT_EQ(ev.ras[0].gpu, 1);
  EXPECT_EQ(ev.ras[0].host, "172.16.64.245");
}

TEST(EvidenceRas, MalformedInputIsReportedAndTheRestRead) {
  ExternalEvidence ev;
  detail::readRasText(
      "#0-0 (cf264af53edbe986) MISMATCH\n"
      "  Communicator ranks have different AllReduce operation counts\n"
      "  3 ranks have launched up to operation 10\n"
      "  Rank seven -- GPU 7 managed by process 1 on node 10.0.0.1\n"
      "  Rank 3 has launched up to operation 9 -- GPU 3 managed by process 33 on node 10.0.0.1\n",
      "ras.txt", ev);
  EXPECT_TRUE(anyProblem(ev, {"ras.txt:4:", "does not parse"})) << joined(ev.problems);
  ASSERT_EQ(ev.ras.size(), 1u);
  EXPECT_EQ(ev.ras[0].rank, 3);
  EXPECT_EQ(ev.ras[0].launchedUpTo, 9);

  ExternalEvidence j;
  detail::readRasText(
      R"({"communicators": [{"hash": "0x1", "size": 2, "ranks": [{"rank": "three"}, )"
      R"({"rank": 1, "host": "10.0.0.2", "pid": 5, "cuda_dev": 0, "status": {"init_state": 0}}]}]})",
      "ras.json", j);
  EXPECT_TRUE(anyProblem(j, {"ras.json", "ranks[0]", "bad field"})) << joined(j.problems);
  ASSERT_EQ(j.ras.size(), 1u);
  EXPECT_EQ(j.ras[0].rank, 1);

  ExternalEvidence t;
  detail::readRasText(R"({"communicators": [)", "cut.json", t);
  EXPECT_TRUE(anyProblem(t, {"cut.json", "does not parse"})) << joined(t.problems);

  ExternalEvidence n;
  detail::readRasText("hello\nworld\n", "notras.txt", n);
  EXPECT_TRUE(anyProblem(n, {"notras.txt", "no NCCL RAS status"})) << joined(n.problems);
}

// ---------------------------------------------------------------------------------------------
// dsdiag's fleet report

TEST(EvidenceFleet, DiagReportWithFleet) {
  ExternalEvidence ev;
  readFleetJson(data("diag_fleet16.json"), ev);
  EXPECT_TRUE(ev.problems.empty()) << joined(ev.problems);
  ASSERT_EQ(ev.fleet.size(), 16u);
  const auto it =
      std::find_if(ev.fleet.begin(), ev.fleet.end(), [](const auto& h) { return h.host == "node07"; });
  ASSERT_NE(it, ev.fleet.end());
  EXPECT_EQ(it->state, "suspect");
  EXPECT_EQ(it->ranks, std::vector<int>{6});
  EXPECT_EQ(it->evidence, "bandwidth with node08 (rank 7) 0.033 GB/s, fleet median 1.885 GB/s");
  EXPECT_EQ(ev.fleet[0].state, "healthy");
  EXPECT_EQ(ev.fleet[0].evidence, "");
  EXPECT_EQ(ev.rankHost.at(6), "node07");
  EXPECT_EQ(ev.rankHost.at(13), "node14");
}

TEST(EvidenceFleet, BareFleetDocumentAndBadReports) {
  TempDir dir;
  nlohmann::json diag = nlohmann::json::parse(std::ifstream(data("diag_fleet16.json")));
  ExternalEvidence bare;
  readFleetJson(dir.file("fleet.json", diag["fleet"].dump()), bare);
  EXPECT_TRUE(bare.problems.empty()) << joined(bare.problems);
  EXPECT_EQ(bare.fleet.size(), 16u);

  ExternalEvidence ev;
  nlohmann::json noFleet = diag;
  noFleet.erase("fleet");
  readFleetJson(dir.file("nofleet.json", noFleet.dump()), ev);
  EXPECT_TRUE(anyProblem(ev, {"nofleet.json", "without a \"fleet\" object"})) << joined(ev.problems);

  nlohmann::json badField = diag;
  badField["fleet"]["judgement"]["hosts"][2]["ranks"] = "two";
  readFleetJson(dir.file("badfield.json", badField.dump()), ev);
  EXPECT_TRUE(anyProblem(ev, {"badfield.json", "/fleet/judgement/hosts/2/ranks"})) << joined(ev.problems);

  nlohmann::json newer = diag;
  newer["schema_version"] = "2.0";
  readFleetJson(dir.file("newer.json", newer.dump()), ev);
  EXPECT_TRUE(anyProblem(ev, {"newer.json", "newer"})) << joined(ev.problems);

  readFleetJson(dir.file("other.json", R"({"schema": "dsperf.sweep"})"), ev);
  EXPECT_TRUE(anyProblem(ev, {"other.json", "not a dsdiag report"})) << joined(ev.problems);
  readFleetJson(dir.file("cut.json", R"({"schema": "dsperf.diag", "fleet": {)"), ev);
  EXPECT_TRUE(anyProblem(ev, {"cut.json"})) << joined(ev.problems);

  EXPECT_TRUE(ev.fleet.empty());  // nothing half-read from the bad files
  EXPECT_TRUE(ev.rankHost.empty());
}

// ---------------------------------------------------------------------------------------------
// rank -> host across sources

TEST(EvidenceJoin, FirstSourceWinsAndAConflictIsASentence) {
  ExternalEvidence ev;
  readLogs({data("logs/job_a"), data("logs/torch113")}, ev);
  ASSERT_TRUE(ev.problems.empty()) << joined(ev.problems);
  readFleetJson(data("diag_fleet16.json"), ev);
  readRas(data("ras_status_2.29.txt"), ev);

  EXPECT_EQ(ev.rankHost.at(3), "node04");   // logs and fleet agree
  EXPECT_EQ(ev.rankHost.at(5), "gpu-005");  // the logs came first
  EXPECT_EQ(ev.rankHost.at(6), "node07");   // only the fleet knows
  EXPECT_EQ(ev.rankHost.at(13), "node14");  // the fleet came before RAS
  EXPECT_NE(ev.rankHostSource.at(5).file.find("worker-5.err"), std::string::npos);
  EXPECT_TRUE(anyProblem(ev, {"diag_fleet16.json", "rank 5", "node06", "worker-5.err", "gpu-005"}))
      << joined(ev.problems);
  // RAS's IP addresses are not comparable with host names: no sentence about ranks 7 or 13.
  EXPECT_FALSE(anyProblem(ev, {"rank 7 "}));
  EXPECT_FALSE(anyProblem(ev, {"rank 13 "}));
  EXPECT_EQ(ev.problems.size(), 1u) << joined(ev.problems);
}

TEST(EvidenceJoin, AddRankHostComparesLikeWithLike) {
  ExternalEvidence ev;
  const Source a{"a.log", 1, ""}, b{"b.log", 2, ""};
  EXPECT_TRUE(addRankHost(ev, 1, "node04", a));
  EXPECT_FALSE(addRankHost(ev, 1, "NODE04.cluster.local", b));  // the same host, longer name
  EXPECT_TRUE(ev.problems.empty());
  EXPECT_TRUE(addRankHost(ev, 2, "10.0.0.1", a));
  EXPECT_FALSE(addRankHost(ev, 2, "node02", b));  // a name against an address: not comparable
  EXPECT_TRUE(ev.problems.empty());
  EXPECT_FALSE(addRankHost(ev, 2, "10.0.0.9", b));
  EXPECT_TRUE(anyProblem(ev, {"b.log:2 puts rank 2 on 10.0.0.9", "a.log:1 already put it on 10.0.0.1"}))
      << joined(ev.problems);
  EXPECT_FALSE(addRankHost(ev, -1, "x", a));
  EXPECT_FALSE(addRankHost(ev, 4, "", a));
  EXPECT_EQ(ev.rankHost.size(), 2u);
}

// RAS names hosts by IP address; dsdiag's fleet JSON ties addresses to host names (each rank's
// interfaces). joinAddresses puts a rank placed by an address on its host, and an address that
// belongs to another host than a name another source gave is a sentence naming both.
TEST(EvidenceJoin, AddressesBecomeHostNamesThroughTheFleetJson) {
  TempDir dir;
  nlohmann::json diag = nlohmann::json::parse(std::ifstream(data("diag_fleet16.json")));
  auto& ranks = diag["fleet"]["input"]["ranks"];
  ranks[13]["ifaces"][0]["addr"] = "172.16.64.213";  // node14
  ranks[2]["ifaces"][0]["addr"] = "172.16.64.210";   // node03, while the logs put rank 7 there... by IP
  const std::string fleet = dir.file("diag.json", diag.dump());

  ExternalEvidence ev;
  readRas(data("ras_status_2.29.txt"), ev);  // rank 7 on 172.16.64.210, rank 13 on 172.16.64.213
  readFleetJson(fleet, ev);
  joinAddresses(ev);
  EXPECT_EQ(ev.rankHost.at(13), "node14");
  EXPECT_EQ(hostOfAddress(ev, "172.16.64.213<43121>"), "node14");
  EXPECT_EQ(hostOfAddress(ev, "172.16.64.213:43121"), "node14");
  EXPECT_EQ(hostOfAddress(ev, "10.9.9.9"), "");
  EXPECT_NE(ev.rankHostSource.at(13).text.find("address 172.16.64.213 is node14's"), std::string::npos)
      << ev.rankHostSource.at(13).text;
  // RAS came first and put rank 7 on an address the fleet gives to node03, while the fleet puts rank
  // 7 on node08: the address wins (first source), and the disagreement is a sentence naming both.
  EXPECT_EQ(ev.rankHost.at(7), "node03");
  EXPECT_TRUE(anyProblem(ev, {"rank 7", "172.16.64.210", "node03", "node08"})) << joined(ev.problems);
}
