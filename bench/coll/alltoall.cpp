// alltoall: chunk j of rank i's input lands as chunk i of rank j's output. S = count x eltsize x n
// (the whole buffer), busbw factor (n-1)/n. Sizes round down to a multiple of n elements.
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kAlltoallSpec{
    .facts = &kAlltoallFacts,
    .type = comm::OpType::kAlltoall,
    .inPlace = true,
    .counts =
        [](std::size_t count, int n) {
          std::size_t per = count / static_cast<std::size_t>(n);
          return CollCounts{per * n, per * n, per, 0, 0};
        },
    .algBytesTimesRanks = true,
    .run = [](comm::ProcessGroup& pg,
              const RunArgs& a) { return Launch{{pg.alltoall(a.send, a.recv, a.timeout)}}; },
    .input = moveInput,
    .checked = [](const CheckArgs&) { return true; },
    .expected =
        [](const CheckArgs& a, std::size_t i) {
          std::size_t per = a.counts.paramCount;
          return moveInput(a, static_cast<int>(i / per), static_cast<std::size_t>(a.rank) * per + i % per);
        },
    .period = kMovePeriod,
    .checkBlock = [](const CheckArgs& a) { return a.counts.paramCount; },
};

}  // namespace ds::bench::coll
