// ds_mpi_latency: allreduce latency of blocking MPI, of MPI_Iallreduce + the backend's wait loop,
// and of the whole mpi ProcessGroup (issue + Work::wait), interleaved, for 8 B and 1 MiB of f32.
//   mpirun -np 2 build/bin/ds_mpi_latency STORE_PATH [rounds]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/backends/mpi/mpi_wait.h"
#include "engine/comm/process_group.h"
#include "engine/common/mpi_runtime.h"
#include "engine/store/file_store.h"

using namespace ds::comm;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STORE_PATH [rounds]\n", argv[0]);
    return 2;
  }
  int rounds = argc > 2 ? std::stoi(argv[2]) : 5;
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
  auto pg = createProcessGroup("mpi", o);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  auto policy = mpidetail::pollPolicyFromEnv(std::getenv("DS_MPI_WAIT"));

  for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 20}) {
    const int count = static_cast<int>(bytes / 4);
    const int iters = bytes <= 8 ? 20000 : 400;
    std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
    std::vector<double> tBlock, tWait, tPg;
    for (int round = 0; round < rounds; ++round) {
      for (int variant = 0; variant < 3; ++variant) {
        MPI_Barrier(comm);
        auto start = Clock::now();
        for (int i = 0; i < iters; ++i) {
          if (variant == 0) {
            MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, comm);
          } else if (variant == 1) {
            MPI_Request req;
            MPI_Iallreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, comm, &req);
            mpidetail::waitAll(&req, 1, MPI_STATUSES_IGNORE, bytes, Clock::now() + std::chrono::seconds(60),
                               policy, "bench");
          } else {
            pg->allreduce(Buffer{data.data(), static_cast<std::size_t>(count), DType::kF32, Device{}})
                ->wait();
          }
          if (bytes > 8) std::fill(data.begin(), data.end(), 1.0f);  // keep values finite
        }
        double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
        (variant == 0 ? tBlock : variant == 1 ? tWait : tPg).push_back(us);
      }
    }
    if (rank == 0) {
      auto line = [&](const char* name, const std::vector<double>& t) {
        double us = median(t);
        double busbw = 2.0 * (size - 1) / size * static_cast<double>(bytes) / (us * 1e-6) / 1e9;
        std::printf("%8zu B  %-34s %9.2f us  busbw %6.2f GB/s\n", bytes, name, us, busbw);
      };
      line("blocking MPI_Allreduce", tBlock);
      line("MPI_Iallreduce + waitAll", tWait);
      line("ProcessGroup::allreduce + wait", tPg);
    }
  }
  MPI_Comm_free(&comm);
  return 0;
}
