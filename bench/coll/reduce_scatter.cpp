// reduce_scatter: chunk j of the reduction of all inputs lands on rank j. S = the whole input
// (count x eltsize x n), busbw factor (n-1)/n. Sizes round down to a multiple of n elements.
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kReduceScatterSpec{
    .facts = &kReduceScatterFacts,
    .type = comm::OpType::kReduceScatter,
    .inPlace = true,
    .counts =
        [](std::size_t count, int n) {
          std::size_t per = count / static_cast<std::size_t>(n);
          return CollCounts{per * n, per, per, 0, per};
        },
    .algBytesTimesRanks = true,
    .run = [](comm::ProcessGroup& pg,
              const RunArgs& a) { return Launch{{pg.reduceScatter(a.send, a.recv, a.op, a.timeout)}}; },
    .input = reduceInput,
    .checked = [](const CheckArgs&) { return true; },
    .expected =
        [](const CheckArgs& a, std::size_t i) {
          return reducedValue(a, static_cast<std::size_t>(a.rank) * a.counts.recvCount + i);
        },
    .period = kReducePeriod,
};

}  // namespace ds::bench::coll
