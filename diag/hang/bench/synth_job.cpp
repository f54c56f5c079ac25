#include "diag/hang/bench/synth_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/common/error.h"

namespace ds::diag::hang::bench {

namespace {

constexpr int kWorldEvery = 25;                        // a loss all_reduce on the world every 25 steps
constexpr std::int64_t kStepNs = 400'000'000;          // 400 ms a step
constexpr std::int64_t kOpGapNs = 30'000'000;          // ops of a step 30 ms apart
constexpr std::int64_t kTimeoutMs = 600'000;           // NCCL's default 10 minutes
constexpr const char* kTpDesc = "TENSOR_MODEL_PARALLEL_GROUP";
constexpr const char* kDpDesc = "DATA_PARALLEL_GROUP";

// Writes a pickle the way torch's C++ Pickler (torch/csrc/jit/serialization/pickler.cpp) does: protocol
// 2; a string is BINUNICODE + BINPUT the first time and BINGET after; a dict is EMPTY_DICT MARK ...
// SETITEMS, a list EMPTY_LIST MARK ... APPENDS; ints take the smallest of BININT1, BININT2, BININT and
// LONG1 (8 bytes); a value used by several others (a frame shared by entries) is BINPUT after it is
// built and BINGET after that.
class TorchPickler {
 public:
  explicit TorchPickler(std::string& out) : out_(out) {
    byte(0x80);
    byte(2);
  }

  void str(std::string_view s) {
    if (auto it = strings_.find(s); it != strings_.end()) return get(it->second);
    byte('X');
    le(static_cast<std::uint32_t>(s.size()), 4);
    out_.append(s);
    strings_.emplace(std::string(s), put());
  }
  void integer(std::int64_t v) {
    if (v >= 0 && v <= 0xff) {
      byte('K');
      le(static_cast<std::uint64_t>(v), 1);
    } else if (v >= 0 && v <= 0xffff) {
      byte('M');
      le(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      byte('J');
      le(static_cast<std::uint64_t>(static_cast<std::uint32_t>(static_cast<std::int32_t>(v))), 4);
    } else {
      byte(0x8a);
      byte(8);
      le(static_cast<std::uint64_t>(v), 8);
    }
  }
  void real(double v) {
    byte('G');
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
    for (int k = 7; k >= 0; --k) byte(static_cast<std::uint8_t>(bits >> (8 * k)));  // big-endian
  }
  void none() { byte('N'); }
  void boolean(bool b) { byte(b ? 0x88 : 0x89); }
  void dictBegin() { byte('}'), byte('('); }
  void dictEnd() { byte('u'); }
  void listBegin() { byte(']'), byte('('); }
  void listEnd() { byte('e'); }
  void tuple2() { byte(0x86); }
  // Memoizes the value just written; returns its memo id.
  std::uint32_t put() {
    const std::uint32_t id = next_++;
    if (id <= 0xff) {
      byte('q');
      le(id, 1);
    } else {
      byte('r');
      le(id, 4);
    }
    return id;
  }
  void get(std::uint32_t id) {
    if (id <= 0xff) {
      byte('h');
      le(id, 1);
    } else {
      byte('j');
      le(id, 4);
    }
  }
  void stop() { byte('.'); }

 private:
  void byte(std::uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void le(std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) byte(static_cast<std::uint8_t>(v >> (8 * k)));
  }

  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::string& out_;
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> strings_;
  std::uint32_t next_ = 0;
};

enum class Pg { kWorld, kTp, kDp };

struct Op {
  Pg pg;
  std::int64_t step = 0;
  int pos = 0;             // its place in the step
  std::int64_t seq = 0;    // collective_seq_id in its group, from 1
  std::int64_t record = 0; // record_id: the rank's op count before it
};

// The ops of step s, each with its group's seq id: TP, TP, DP, DP, and the world every 25th step.
std::vector<Op> stepOps(std::int64_t s) {
  std::vector<Op> ops;
  std::int64_t record = 4 * s + s / kWorldEvery;
  auto add = [&](Pg pg, std::int64_t seq) { ops.push_back({pg, s, static_cast<int>(ops.size()), seq, record++}); };
  add(Pg::kTp, 2 * s + 1);
  add(Pg::kTp, 2 * s + 2);
  add(Pg::kDp, 2 * s + 1);
  add(Pg::kDp, 2 * s + 2);
  if (s % kWorldEvery == kWorldEvery - 1) add(Pg::kWorld, s / kWorldEvery + 1);
  return ops;
}

std::string ranksText(int first, int step, int count) {
  std::string s = "[";
  for (int i = 0; i < count; ++i) fmt::format_to(std::back_inserter(s), "{}{}", i ? ", " : "", first + i * step);
  return s + "]";
}

struct Frame {
  const char* name;
  const char* file;
  int line;
};

// Python frames, innermost first, of the three call sites.
constexpr const char* kC10d = "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py";
constexpr const char* kLogger = "/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py";
constexpr const char* kTpFile = "/workspace/Megatron-LM/megatron/core/tensor_parallel/mappings.py";
constexpr const char* kDpFile = "/workspace/Megatron-LM/megatron/core/distributed/param_and_grad_buffer.py";
constexpr const char* kTrain = "/workspace/Megatron-LM/megatron/training/training.py";
const std::vector<Frame> kFrames = {
    {"all_reduce", kC10d, 2806},         {"wrapper", kLogger, 81},
    {"_reduce", kTpFile, 24},            {"forward", kTpFile, 231},
    {"start_grad_sync", kDpFile, 345},   {"finish_grad_sync", kDpFile, 402},
    {"train_step", kTrain, 1187},        {"train", kTrain, 1663},
    {"_reduce_loss", kTrain, 1244},      {"pretrain", kTrain, 379},
};
const std::vector<int> kTpStack = {0, 1, 2, 3, 6, 7, 9};
const std::vector<int> kDpStack = {0, 1, 4, 5, 6, 7, 9};
const std::vector<int> kWorldStack = {0, 1, 8, 6, 7, 9};

class DumpWriter {
 public:
  explicit DumpWriter(const SynthJob& job) : job_(job), worldRanks_(ranksText(0, 1, job.ranks)) {
    for (int d = 0; d < job.tp; ++d) dpRanks_.push_back(ranksText(d, job.tp, job.ranks / job.tp));
  }

  std::string dump(int rank) const {
    const int tpIndex = rank % job_.tp;
    const int tpGroup = rank / job_.tp;
    const bool culprit = rank == job_.culprit;
    const bool inCulpritsDp = !culprit && tpIndex == job_.culprit % job_.tp;
    const std::int64_t f = job_.faultStep;
    // The rank's ops, oldest first, up to the one it is blocked in (or, for the culprit, its last).
    std::vector<Op> ops;
    const std::int64_t first = std::max<std::int64_t>(0, f - job_.entries / 4 - 2);
    for (std::int64_t s = first; s <= f + 1; ++s)
      for (const Op& o : stepOps(s)) ops.push_back(o);
    // Step f: TP, TP, DP, DP (no world op; resolved() makes sure); step f+1 starts with TP.
    const std::size_t fAt = static_cast<std::size_t>(std::find_if(ops.begin(), ops.end(), [&](const Op& o) {
                                                        return o.step == f;
                                                      }) - ops.begin());
    const std::size_t end = culprit ? fAt + 2 : inCulpritsDp ? fAt + 3 : fAt + 5;  // one past the last op
    ops.resize(end);
    const bool lastPending = !culprit;
    if (ops.size() > static_cast<std::size_t>(job_.entries))
      ops.erase(ops.begin(), ops.end() - job_.entries);

    const std::string names[3] = {"0", std::to_string(1 + tpGroup), std::to_string(1 + job_.ranks / job_.tp + tpIndex)};
    const char* descs[3] = {"default_pg", kTpDesc, kDpDesc};
    // pg_status from the ops: every op before the last is completed.
    std::int64_t enq[3], done[3];
    const Op& last = ops.back();
    for (int g = 0; g < 3; ++g) {
      enq[g] = lastSeq(static_cast<Pg>(g), last.step, last.pos + 1);
      done[g] = lastPending && static_cast<int>(last.pg) == g ? enq[g] - 1 : enq[g];
    }

    std::string out;
    out.reserve(static_cast<std::size_t>(job_.entries) * 180 + worldRanks_.size() + 20'000);
    TorchPickler p(out);
    p.dictBegin();
    p.str("version"), p.str("2.10");
    p.str("pg_config");
    p.dictBegin();
    for (int g = 0; g < 3; ++g) {
      p.str(names[g]);
      p.dictBegin();
      p.str("name"), p.str(names[g]);
      p.str("desc"), p.str(descs[g]);
      p.str("ranks");
      p.str(g == 0 ? std::string_view(worldRanks_)
                   : g == 1 ? std::string_view(ranksText(tpGroup * job_.tp, 1, job_.tp))
                            : std::string_view(dpRanks_[tpIndex]));
      p.dictEnd();
    }
    p.dictEnd();
    p.str("comm_lib_version"), p.str("2.21.5");
    p.str("pg_status");
    p.dictBegin();
    for (int g = 0; g < 3; ++g) {
      p.str(std::to_string(g));
      p.dictBegin();
      p.str("last_enqueued_collective"), p.integer(enq[g]);
      p.str("last_started_collective"), p.integer(enq[g]);
      p.str("last_completed_collective"), p.integer(done[g]);
      p.dictEnd();
    }
    p.dictEnd();
    p.str("entries");
    p.listBegin();
    std::vector<std::int64_t> frameMemo(kFrames.size(), -1);
    const std::int64_t jitterNs = static_cast<std::int64_t>((rank * 7919) % 1000) * 1000;
    const std::string threadId = std::to_string(140'000'000'000'000 + rank);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& o = ops[i];
      const bool pending = lastPending && i + 1 == ops.size();
      const int g = static_cast<int>(o.pg);
      p.dictBegin();
      p.str("frames");
      p.listBegin();
      for (int fi : o.pg == Pg::kTp ? kTpStack : o.pg == Pg::kDp ? kDpStack : kWorldStack) {
        if (frameMemo[fi] >= 0) {
          p.get(static_cast<std::uint32_t>(frameMemo[fi]));
          continue;
        }
        p.dictBegin();
        p.str("name"), p.str(kFrames[fi].name);
        p.str("filename"), p.str(kFrames[fi].file);
        p.str("line"), p.integer(kFrames[fi].line);
        p.dictEnd();
        frameMemo[fi] = p.put();
      }
      p.listEnd();
      p.str("record_id"), p.integer(o.record);
      p.str("pg_id"), p.integer(g);
      p.str("process_group"), p.str(names[g]), p.str(descs[g]), p.tuple2();
      p.str("thread_name"), p.str("pt_main_thread");
      p.str("thread_id"), p.str(threadId);
      p.str("collective_seq_id"), p.integer(o.seq);
      p.str("p2p_seq_id"), p.integer(0);
      p.str("op_id"), p.integer(o.seq);
      p.str("profiling_name"), p.str("nccl:all_reduce");
      const std::int64_t created = job_.startNs + o.step * kStepNs + o.pos * kOpGapNs + jitterNs;
      p.str("time_created_ns"), p.integer(created);
      const bool tp = o.pg == Pg::kTp;
      auto sizes = [&] {
        p.listBegin();
        p.listBegin();
        if (tp) {
          p.integer(4), p.integer(2048), p.integer(4096);
        } else {
          p.integer(o.pg == Pg::kWorld ? 1 : o.seq % 2 ? 26'214'400 : 13'107'200);
        }
        p.listEnd();
        p.listEnd();
      };
      auto dtypes = [&] {
        p.listBegin();
        p.str(tp ? "BFloat16" : "Float");
        p.listEnd();
      };
      p.str("input_sizes"), sizes();
      p.str("input_dtypes"), dtypes();
      p.str("output_sizes"), sizes();
      p.str("output_dtypes"), dtypes();
      p.str("state"), p.str(pending ? "started" : "completed");
      p.str("time_discovered_started_ns"), p.integer(created + 1'000'000);
      p.str("time_discovered_completed_ns");
      pending ? p.none() : p.integer(created + 20'000'000);
      p.str("retired"), p.boolean(!pending);
      p.str("timeout_ms"), p.integer(kTimeoutMs);
      p.str("is_p2p"), p.boolean(false);
      p.str("duration_ms");
      pending ? p.none() : p.real(19.0);
      p.dictEnd();
    }
    p.listEnd();
    p.dictEnd();
    p.put();
    p.stop();
    return out;
  }

 private:
  // The last seq of group pg issued before position `pos` of step s.
  static std::int64_t lastSeq(Pg pg, std::int64_t s, int pos) {
    std::int64_t n = 0;
    for (const Op& o : stepOps(s))
      if (o.pos < pos && o.pg == pg) n = o.seq;
    if (n > 0) return n;
    switch (pg) {
      case Pg::kTp:
      case Pg::kDp:
        return 2 * s;
      case Pg::kWorld:
        return s / kWorldEvery;
    }
    return 0;
  }

  const SynthJob& job_;
  std::string worldRanks_;
  std::vector<std::string> dpRanks_;
};

}  // namespace

SynthJob SynthJob::resolved() const {
  SynthJob j = *this;
  if (j.ranks < 2 || j.tp < 1 || j.ranks % j.tp != 0 || j.ranks / j.tp < 2) {
    throw ConfigError(fmt::format("a synthetic job of {} ranks in tensor-parallel groups of {} is impossible: the "
                                  "group size must divide the ranks and leave at least 2 data-parallel ranks.",
                                  j.ranks, j.tp));
  }
  if (j.entries < 8) throw ConfigError(fmt::format("--entries {} is too few; a ring buffer of at least 8 ops is needed.", j.entries));
  if (j.culprit < 0) j.culprit = j.ranks * 3 / 4 + 5 < j.ranks ? j.ranks * 3 / 4 + 5 : j.ranks - 1;
  if (j.culprit >= j.ranks) throw ConfigError(fmt::format("culprit rank {} is not one of the {} ranks.", j.culprit, j.ranks));
  if (j.faultStep < 0) j.faultStep = std::max(1250, j.entries / 4 + 10);
  if (j.faultStep % kWorldEvery == kWorldEvery - 1) ++j.faultStep;  // no world op in the fault's step
  return j;
}

SynthExpectation expectationOf(const SynthJob& job) {
  const SynthJob j = job.resolved();
  SynthExpectation e;
  e.culprit = j.culprit;
  e.kind = "stalled_host";
  e.dp = {std::to_string(1 + j.ranks / j.tp + j.culprit % j.tp), 2 * j.faultStep + 1};
  e.tp = {std::to_string(1 + j.culprit / j.tp), 2 * j.faultStep + 3};
  return e;
}

std::string synthDumpPickle(const SynthJob& job, int rank) { return DumpWriter(job).dump(rank); }

std::uint64_t writeSynthDumps(const SynthJob& job, const std::string& dir) {
  const DumpWriter writer(job);
  std::uint64_t bytes = 0;
  for (int r = 0; r < job.ranks; ++r) {
    const std::string data = writer.dump(r);
    const std::string path = fmt::format("{}/rank_{}", dir, r);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) throw IoError(fmt::format("cannot write {}: {}; is the disk full?", path, errnoText(errno)));
    bytes += data.size();
  }
  return bytes;
}

}  // namespace ds::diag::hang::bench
