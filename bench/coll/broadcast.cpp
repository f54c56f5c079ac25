// broadcast: the root's buffer lands on every rank. S = count x eltsize, busbw factor 1.
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kBroadcastSpec{
    .facts = &kBroadcastFacts,
    .type = comm::OpType::kBroadcast,
    .inPlace = true,
    .counts =
        [](std::size_t count, int) {
          return CollCounts{count, count, count, 0, 0};
        },
    .algBytesTimesRanks = false,
    .run = [](comm::ProcessGroup& pg,
              const RunArgs& a) { return Launch{{pg.broadcast(a.send, a.recv, a.root, a.timeout)}}; },
    .input = moveInput,
    .checked = [](const CheckArgs&) { return true; },
    .expected = [](const CheckArgs& a, std::size_t i) { return moveInput(a, a.root, i); },
    .period = kMovePeriod,
};

}  // namespace ds::bench::coll
