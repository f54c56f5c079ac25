// allreduce: every rank ends with the reduction of all inputs. S = count x eltsize, busbw factor
// 2(n-1)/n (REFERENCE.md §5).
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kAllreduceSpec{
    .facts = &kAllreduceFacts,
    .type = comm::OpType::kAllreduce,
    .inPlace = true,
    .counts =
        [](std::size_t count, int) {
          return CollCounts{count, count, count, 0, 0};
        },
    .algBytesTimesRanks = false,
    .run = [](comm::ProcessGroup& pg,
              const RunArgs& a) { return Launch{{pg.allreduce(a.send, a.recv, a.op, a.timeout)}}; },
    .input = reduceInput,
    .checked = [](const CheckArgs&) { return true; },
    .expected = reducedValue,
    .period = kReducePeriod,
};

}  // namespace ds::bench::coll
