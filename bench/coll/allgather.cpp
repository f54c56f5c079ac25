// allgather: rank j's chunk lands in slot j of every rank's output. S = the whole output
// (count x eltsize x n), busbw factor (n-1)/n. Sizes round down to a multiple of n elements.
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kAllgatherSpec{
    .facts = &kAllgatherFacts,
    .type = comm::OpType::kAllgather,
    .inPlace = true,
    .counts =
        [](std::size_t count, int n) {
          std::size_t per = count / static_cast<std::size_t>(n);
          return CollCounts{per, per * n, per, per, 0};
        },
    .algBytesTimesRanks = true,
    .run = [](comm::ProcessGroup& pg,
              const RunArgs& a) { return Launch{{pg.allgather(a.send, a.recv, a.timeout)}}; },
    .input = moveInput,
    .checked = [](const CheckArgs&) { return true; },
    .expected =
        [](const CheckArgs& a, std::size_t i) {
          std::size_t per = a.counts.sendCount;
          return moveInput(a, static_cast<int>(i / per), i % per);
        },
    .period = kMovePeriod,
    .checkBlock = [](const CheckArgs& a) { return a.counts.sendCount; },
};

}  // namespace ds::bench::coll
