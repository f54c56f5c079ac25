// sendrecv: every rank sends its buffer to the next rank and receives the previous rank's (a ring,
// as nccl-tests' sendrecv). S = count x eltsize, busbw factor 1. Even ranks send first and odd ranks
// receive first, so that backends whose send waits for the matching receive cannot deadlock.
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"

namespace ds::bench::coll {

const CollSpec kSendrecvSpec{
    .facts = &kSendrecvFacts,
    .type = comm::OpType::kSend,
    .inPlace = false,
    .counts =
        [](std::size_t count, int) {
          return CollCounts{count, count, count, 0, 0};
        },
    .algBytesTimesRanks = false,
    .run =
        [](comm::ProcessGroup& pg, const RunArgs& a) {
          int n = pg.size();
          int next = (pg.rank() + 1) % n;
          int prev = (pg.rank() + n - 1) % n;
          Launch l;
          if (pg.rank() % 2 == 0) {
            l.works.push_back(pg.send(a.send, next, 0, a.timeout));
            l.works.push_back(pg.recv(a.recv, prev, 0, a.timeout));
          } else {
            l.works.push_back(pg.recv(a.recv, prev, 0, a.timeout));
            l.works.push_back(pg.send(a.send, next, 0, a.timeout));
          }
          return l;
        },
    .input = moveInput,
    .checked = [](const CheckArgs&) { return true; },
    .expected = [](const CheckArgs& a,
                   std::size_t i) { return moveInput(a, (a.rank + a.nranks - 1) % a.nranks, i); },
    .period = kMovePeriod,
};

}  // namespace ds::bench::coll
