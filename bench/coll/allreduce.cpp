// allreduce: every rank ends with the reduction of all inputs. S = count x eltsize, busbw factor
// 2(n-1)/n (REFERENCE.md §5).
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kAllreduceSpec{
    .name = "allreduce",
    .type = comm::OpType::kAllreduce,
    .reduces = true,
    .rooted = false,
    .inPlace = true,
    .counts =
        [](std::size_t count, int) {
          return CollCounts{count, count, count, 0, 0};
        },
    .busFactor = [](int n) { return 2.0 * (n - 1) / n; },
    .busFactorText = "2(n-1)/n",
    .algBytesTimesRanks = false,
    .run = [](comm::ProcessGroup& pg,
              const RunArgs& a) { return Launch{{pg.allreduce(a.send, a.recv, a.op, a.timeout)}}; },
    .input = reduceInput,
    .checked = [](const CheckArgs&) { return true; },
    .expected = reducedValue,
    .period = kReducePeriod,
};

}  // namespace ds::bench::coll
