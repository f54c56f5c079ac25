// broadcast: the root's buffer lands on every rank. S = count x eltsize, busbw factor 1.
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kBroadcastSpec{
    .name = "broadcast",
    .type = comm::OpType::kBroadcast,
    .reduces = false,
    .rooted = true,
    .inPlace = true,
    .counts =
        [](std::size_t count, int) {
          return CollCounts{count, count, count, 0, 0};
        },
    .busFactor = [](int) { return 1.0; },
    .busFactorText = "1",
    .algBytesTimesRanks = false,
    .run = [](comm::ProcessGroup& pg,
              const RunArgs& a) { return Launch{{pg.broadcast(a.send, a.recv, a.root, a.timeout)}}; },
    .input = moveInput,
    .checked = [](const CheckArgs&) { return true; },
    .expected = [](const CheckArgs& a, std::size_t i) { return moveInput(a, a.root, i); },
    .period = kMovePeriod,
};

}  // namespace ds::bench::coll
