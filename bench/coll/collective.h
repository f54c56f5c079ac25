// One collective of the sweep, as a small spec (nccl-tests' struct testColl): how buffer sizes
// follow from the swept size, the bus-bandwidth factor, the data each rank puts in, the result each
// rank must see, and how to run it on a ProcessGroup. One file per collective fills one of these;
// the harness (harness.h) does everything else.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/common/collectives.h"

namespace ds::bench::coll {

// Element counts for one size, as nccl-tests' getCollByteCount computes them from
// count = size / element size. Offsets place the in-place buffers inside the receive buffer.
struct CollCounts {
  std::size_t sendCount = 0;
  std::size_t recvCount = 0;
  std::size_t paramCount = 0;         // the count column and what the collective is called with
  std::size_t sendInplaceOffset = 0;  // elements, times the rank
  std::size_t recvInplaceOffset = 0;  // elements, times the rank
};

// One launch. `send` and `recv` already point where in-place or out-of-place puts them.
struct RunArgs {
  comm::Buffer send;
  comm::Buffer recv;
  comm::ReduceOp op = comm::ReduceOp::kSum;
  int root = 0;
  comm::Timeout timeout;
};

// A launched operation: one or more Works (sendrecv posts a send and a receive).
struct Launch {
  std::vector<std::shared_ptr<comm::Work>> works;
  // Waits for every Work, each at most `timeout` from this call (default: the op's own timeout);
  // rethrows the first error. A caller timeout throws TimeoutError and leaves the op running.
  void wait(comm::Timeout timeout = {}) const;
  // The sum of the Works' execution times (they run one after another on the group's worker).
  double durationUs() const;
  // When every Work has completed (an op the fast path finished on the caller's thread): sets `us`
  // to durationUs() and returns true, or rethrows the first error. False while one still runs.
  bool completedIn(double& us) const;
};

struct CheckArgs {
  int rank = 0;
  int nranks = 1;
  int root = 0;
  comm::ReduceOp op = comm::ReduceOp::kSum;
  comm::DType dtype = comm::DType::kF32;
  int rep = 0;  // varies the data between check iterations
  CollCounts counts;
};

struct CollSpec {
  // Name, reduces, rooted, bus factor: the collective's facts (engine/common/collectives.h).
  const CollectiveFacts* facts;
  comm::OpType type;
  // Has an in-place form. sendrecv has none here: a rank that receives first would overwrite what
  // it still has to send (its in-place columns print "-").
  bool inPlace;
  CollCounts (*counts)(std::size_t count, int nranks);
  // S, the bytes algbw divides by time: paramCount x element size, times n for the collectives
  // whose S is a whole buffer of n chunks.
  bool algBytesTimesRanks;
  Launch (*run)(comm::ProcessGroup& pg, const RunArgs& args);
  // The value of element i of `rank`'s send buffer (sendCount elements).
  double (*input)(const CheckArgs& a, int rank, std::size_t i);
  // Whether this rank's receive buffer has a defined result (reduce: the root only).
  bool (*checked)(const CheckArgs& a);
  // The value element i of this rank's receive buffer (recvCount elements) must hold.
  double (*expected)(const CheckArgs& a, std::size_t i);
  // The data's period in elements (kReducePeriod or kMovePeriod, data_check.h): input(a, rank, i)
  // equals input(a, rank, i + period), and each block of the expected result (checkBlock) repeats
  // its own first `period` values. This is what keeps filling and checking cheap at any size. 0: no
  // period, every element is computed.
  std::size_t period = 0;
  // The length of the receive buffer's blocks (allgather: one block per rank, each starting the
  // pattern afresh); nullptr: the whole buffer is one block.
  std::size_t (*checkBlock)(const CheckArgs& a) = nullptr;
};

// algbw bytes S for one size (REFERENCE.md §5).
double algBytes(const CollSpec& spec, const CollCounts& c, std::size_t eltSize, int nranks);

// Every collective, in the order "all" runs them.
const std::vector<const CollSpec*>& allCollectives();
// By name (also nccl-tests' all_reduce, all_gather, reduce_scatter, alltoall, sendrecv spellings).
// Throws ConfigError listing the names.
const CollSpec& findCollective(const std::string& name);

// The specs (one per file).
extern const CollSpec kAllreduceSpec;
extern const CollSpec kAllgatherSpec;
extern const CollSpec kReduceScatterSpec;
extern const CollSpec kAlltoallSpec;
extern const CollSpec kBroadcastSpec;
extern const CollSpec kReduceSpec;
extern const CollSpec kSendrecvSpec;

}  // namespace ds::bench::coll
