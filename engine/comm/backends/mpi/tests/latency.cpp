// ds_mpi_latency: the latency of one allreduce, issued and waited for one at a time, on every path
// from raw MPI to the mpi ProcessGroup, interleaved round by round in one run, so that the engine's
// cost per op shows apart from the machine's noise:
//   MPI_Allreduce                  blocking MPI (Open MPI's coll tuned)
//   MPI_Iallreduce + MPI_Wait      nonblocking MPI (libnbc: what the backend calls), MPI's own wait
//   MPI_Iallreduce + waitAll       the same, completed by the backend's wait loop (mpi_wait.h)
//   pg fast path                   ProcessGroup::allreduce + Work::wait, op started on the caller's thread
//   pg worker                      the same with DS_PG_INLINE_MAX_BYTES=0: every op handed to the worker
//   pg one-core path               the same on a group told it has one CPU (ProcessGroupOptions::cpus):
//                                  every op runs on the caller's thread, the blocking calls too, as
//                                  under mpirun's binding; unbound, it shows what the worker buys there
// For each: the median and the mean of the per-op times over all rounds (the median resists the
// stalls a loaded machine adds; the mean shows them).
//   mpirun -np 2 build/bin/ds_mpi_latency STORE_PATH [rounds] [bytes,...]
#include <mpi.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/comm/backends/mpi/mpi_wait.h"
#include "engine/comm/process_group.h"
#include "engine/env/mpi_runtime.h"
#include "engine/store/file_store.h"

using namespace ds::comm;
using Clock = std::chrono::steady_clock;

namespace {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STORE_PATH [rounds] [bytes,...]\n", argv[0]);
    return 2;
  }
  int rounds = argc > 2 ? std::stoi(argv[2]) : 5;
  std::vector<std::size_t> sizes{8, std::size_t{1} << 20};
  if (argc > 3) {
    sizes.clear();
    std::stringstream in(argv[3]);
    for (std::string item; std::getline(in, item, ',');) sizes.push_back(std::stoul(item));
  }
  ds::mpi::ensureInitialized();
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ProcessGroupOptions o;
  o.rank = rank;
  o.size = size;
  o.store = std::make_shared<ds::store::FileStore>(argv[1]);
  o.heartbeatInterval = std::chrono::milliseconds(0);
  o.groupName = "fast";
  auto fast = createProcessGroup("mpi", o);
  o.groupName = "onecore";
  o.cpus = 1;
  auto oneCore = createProcessGroup("mpi", o);
  o.cpus = 0;
  ::setenv("DS_PG_INLINE_MAX_BYTES", "0", 1);
  o.groupName = "worker";
  auto worker = createProcessGroup("mpi", o);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  auto policy = mpidetail::pollPolicyFromEnv(std::getenv("DS_MPI_WAIT"));
  const char* names[] = {"MPI_Allreduce",
                         "MPI_Iallreduce + MPI_Wait",
                         "MPI_Iallreduce + waitAll",
                         "pg fast path (issue + wait)",
                         "pg worker (issue + wait)",
                         "pg one-core path (cpus=1)"};
  constexpr int kVariants = 6;

  if (rank == 0) {
    std::printf("# ds_mpi_latency: %d ranks, %d rounds, variants interleaved per round; per-op times in us\n",
                size, rounds);
    std::printf("%10s  %-30s %10s %10s %10s\n", "bytes", "path", "p50", "p90", "mean");
  }
  for (std::size_t bytes : sizes) {
    const int count = static_cast<int>(std::max<std::size_t>(bytes / 4, 1));
    const int iters = bytes <= 4096 ? 4000 : bytes <= (1 << 20) ? 200 : 20;
    std::vector<float> data(static_cast<std::size_t>(count), 0.0f);
    Buffer buf{data.data(), static_cast<std::size_t>(count), DType::kF32, Device{}};
    std::vector<std::vector<double>> t(kVariants);
    for (int round = 0; round < rounds; ++round) {
      for (int k = 0; k < kVariants; ++k) {
        const int variant = (k + round) % kVariants;  // rotate: no path always runs first
        MPI_Barrier(comm);
        for (int i = 0; i < iters; ++i) {
          auto start = Clock::now();
          if (variant == 0) {
            MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, comm);
          } else if (variant == 1) {
            MPI_Request req;
            MPI_Iallreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, comm, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
          } else if (variant == 2) {
            MPI_Request req;
            MPI_Iallreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, comm, &req);
            mpidetail::waitAll(&req, 1, MPI_STATUSES_IGNORE, bytes, Clock::now() + std::chrono::seconds(60),
                               policy, [] { return std::string("bench"); });
          } else {
            (variant == 3 ? fast : variant == 4 ? worker : oneCore)->allreduce(buf)->wait();
          }
          t[static_cast<std::size_t>(variant)].push_back(
              std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        }
      }
    }
    // Rank 0 reports the slower rank's figures per path (max over ranks of each statistic).
    for (int v = 0; v < kVariants; ++v) {
      double mine[3] = {quantile(t[v], 0.5), quantile(t[v], 0.9), mean(t[v])};
      double worst[3] = {};
      MPI_Reduce(mine, worst, 3, MPI_DOUBLE, MPI_MAX, 0, comm);
      if (rank == 0) {
        std::printf("%10zu  %-30s %10.2f %10.2f %10.2f\n", bytes, names[v], worst[0], worst[1], worst[2]);
      }
    }
  }
  MPI_Comm_free(&comm);
  return 0;
}
