// reduce: the reduction of all inputs lands on the root only. S = count x eltsize, busbw factor 1.
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kReduceSpec{
    .facts = &kReduceFacts,
    .type = comm::OpType::kReduce,
    .inPlace = true,
    .counts =
        [](std::size_t count, int) {
          return CollCounts{count, count, count, 0, 0};
        },
    .algBytesTimesRanks = false,
    .run = [](comm::ProcessGroup& pg,
              const RunArgs& a) { return Launch{{pg.reduce(a.send, a.recv, a.root, a.op, a.timeout)}}; },
    .input = reduceInput,
    .checked = [](const CheckArgs& a) { return a.rank == a.root; },
    .expected = reducedValue,
    .period = kReducePeriod,
};

}  // namespace ds::bench::coll
