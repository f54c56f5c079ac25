// ds_mpi_matrix_worker: started by mpirun from mpi_backend_test.cpp (one process per rank).
//
//   matrix   --store PATH            every collective x in/out-of-place x dtype x op x count, checked
//                                    against a reference computed from every rank's known inputs
//   p2p      --store PATH            send/recv patterns where every rank sends first (matrix.h)
//   p2p-mismatch --store PATH        rank 1 receives fewer elements than rank 0 sent
//   mismatch --store PATH            creates the group with size = MPI size + 1 (must fail)
//   timeout  --store PATH --ms N [--count N] [--poll 1]  the last rank skips op #2 (an allreduce of
//                                    N floats, default 1); the others must time out (--poll 1: they
//                                    only poll op #2 and a queued op #3, never wait)
//            [--cpus 1]              the group believes its process has one CPU (ops run on the
//                                    caller's thread, the blocking ones too: a hang there must end
//                                    the job through the watchdog)
//
// Exit: 0 all checks passed, 1 a mismatch, 2 usage, 3 an unexpected error.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/half.h"
#include "engine/comm/process_group.h"
#include "engine/comm/reduce.h"
#include "engine/comm/tests/matrix.h"
#include "engine/common/error.h"
#include "engine/env/mpi_runtime.h"
#include "engine/store/file_store.h"

using namespace ds::comm;
using Bytes = std::vector<char>;

namespace {

int gRank = 0;
int gSize = 1;
long gChecks = 0;
long gFailures = 0;

// Rank r's element i of stream `salt`: small values (halves for floats) so sums and products are
// exact in every type; integers wrap identically in MPI and in reduceInto.
double value(int r, std::size_t i, int salt, DType t) {
  long v = static_cast<long>((static_cast<std::size_t>(r) * 7 + i * 3 + static_cast<std::size_t>(salt)) % 9);
  if (t == DType::kU8) return static_cast<double>(v);
  if (isFloating(t)) return static_cast<double>(v - 4) * 0.5;
  return static_cast<double>(v - 4);
}

Bytes input(int r, DType t, std::size_t count, int salt) {
  Bytes b(std::max<std::size_t>(count * dtypeSize(t), 1));
  for (std::size_t i = 0; i < count; ++i) setElementFromDouble(b.data(), i, t, value(r, i, salt, t));
  return b;
}

Bytes sentinel(DType t, std::size_t count) {
  return Bytes(std::max<std::size_t>(count * dtypeSize(t), 1), 0x5a);
}

Bytes reference(DType t, std::size_t count, ReduceOp op, int salt) {
  Bytes acc = input(0, t, count, salt);
  for (int r = 1; r < gSize; ++r) {
    Bytes x = input(r, t, count, salt);
    reduceInto(acc.data(), x.data(), count, t, op);
  }
  if (op == ReduceOp::kAvg) divideBy(acc.data(), count, t, gSize);
  return acc;
}

Buffer buf(Bytes& b, DType t, std::size_t count, std::size_t offset = 0) {
  return Buffer{b.data() + offset * dtypeSize(t), count, t, Device{}};
}

// Compares `count` elements of got (from element gotOff) with want (from wantOff).
void expectEqual(const std::string& what, const Bytes& got, std::size_t gotOff, const Bytes& want,
                 std::size_t wantOff, std::size_t count, DType t) {
  ++gChecks;
  const double tol = (t == DType::kF16 || t == DType::kBF16) ? 1e-2 : (isFloating(t) ? 1e-6 : 0.0);
  for (std::size_t i = 0; i < count; ++i) {
    double g = elementAsDouble(got.data(), gotOff + i, t);
    double w = elementAsDouble(want.data(), wantOff + i, t);
    if (std::abs(g - w) > tol * std::max(1.0, std::abs(w))) {
      if (gFailures < 30) {
        std::fprintf(stderr, "rank %d: MISMATCH %s element %zu: got %g, want %g\n", gRank, what.c_str(), i, g,
                     w);
      }
      ++gFailures;
      return;
    }
  }
}

// Bitwise: the bytes MPI must not have touched.
void expectUntouched(const std::string& what, const Bytes& got, const Bytes& want) {
  ++gChecks;
  if (got != want) {
    if (gFailures < 30)
      std::fprintf(stderr, "rank %d: MISMATCH %s: memory that must not change changed\n", gRank,
                   what.c_str());
    ++gFailures;
  }
}

std::string label(const char* op, DType t, std::size_t n, bool inPlace, const char* extra = "") {
  return std::string(op) + "(" + dtypeName(t) + ", n=" + std::to_string(n) + (inPlace ? ", in-place" : "") +
         extra + ")";
}

void runMatrix(ProcessGroup& pg, std::size_t large) {
  const std::size_t counts[] = {0, 1, 7, large};
  int salt = 0;
  const int root = gSize - 1;
  for (DType t : kAllDTypes) {
    for (std::size_t n : counts) {
      for (bool inPlace : {false, true}) {
        ++salt;
        for (ReduceOp op : kAllReduceOps) {
          std::string extra = std::string(", op=") + reduceOpName(op);
          Bytes want = reference(t, n * gSize, op, salt);
          // allreduce
          {
            Bytes in = input(gRank, t, n, salt);
            Bytes orig = in;
            Bytes out = inPlace ? Bytes{} : sentinel(t, n);
            Bytes& res = inPlace ? in : out;
            pg.allreduce(buf(in, t, n), buf(res, t, n), op)->wait();
            expectEqual(label("allreduce", t, n, inPlace, extra.c_str()), res, 0, want, 0, n, t);
            if (!inPlace) expectUntouched(label("allreduce input", t, n, false), in, orig);
          }
          // reduce to the last rank
          {
            Bytes in = input(gRank, t, n, salt);
            Bytes orig = in;
            Bytes out = inPlace ? Bytes{} : sentinel(t, n);
            Bytes& res = inPlace ? in : out;
            pg.reduce(buf(in, t, n), buf(res, t, n), root, op)->wait();
            if (gRank == root) {
              expectEqual(label("reduce", t, n, inPlace, extra.c_str()), res, 0, want, 0, n, t);
            } else {
              expectUntouched(label("reduce non-root output", t, n, inPlace, extra.c_str()), res,
                              inPlace ? orig : sentinel(t, n));
            }
            if (!inPlace) expectUntouched(label("reduce input", t, n, false), in, orig);
          }
          // reduce_scatter: n per rank
          {
            Bytes in = input(gRank, t, n * gSize, salt);
            Bytes orig = in;
            Bytes out = sentinel(t, n);
            Buffer outBuf = inPlace ? buf(in, t, n, static_cast<std::size_t>(gRank) * n) : buf(out, t, n);
            pg.reduceScatter(buf(in, t, n * gSize), outBuf, op)->wait();
            const Bytes& res = inPlace ? in : out;
            std::size_t resOff = inPlace ? static_cast<std::size_t>(gRank) * n : 0;
            expectEqual(label("reduce_scatter", t, n, inPlace, extra.c_str()), res, resOff, want,
                        static_cast<std::size_t>(gRank) * n, n, t);
            if (inPlace) {
              // The other ranks' slots of the input stay as they were.
              Bytes a = in;
              Bytes b = orig;
              std::size_t es = dtypeSize(t);
              std::memset(a.data() + gRank * n * es, 0, n * es);
              std::memset(b.data() + gRank * n * es, 0, n * es);
              expectUntouched(label("reduce_scatter other slots", t, n, true), a, b);
            } else {
              expectUntouched(label("reduce_scatter input", t, n, false), in, orig);
            }
          }
        }
        // broadcast from the last rank
        {
          Bytes in = gRank == root ? input(root, t, n, salt) : sentinel(t, n);
          Bytes out = inPlace ? Bytes{} : sentinel(t, n);
          Bytes& res = inPlace ? in : out;
          pg.broadcast(buf(in, t, n), buf(res, t, n), root)->wait();
          expectEqual(label("broadcast", t, n, inPlace), res, 0, input(root, t, n, salt), 0, n, t);
        }
        // allgather: n per rank
        {
          Bytes in = input(gRank, t, n, salt);
          Bytes out = sentinel(t, n * gSize);
          if (inPlace) std::memcpy(out.data() + gRank * n * dtypeSize(t), in.data(), n * dtypeSize(t));
          Buffer inBuf = inPlace ? buf(out, t, n, static_cast<std::size_t>(gRank) * n) : buf(in, t, n);
          pg.allgather(inBuf, buf(out, t, n * gSize))->wait();
          for (int r = 0; r < gSize; ++r) {
            expectEqual(label("allgather", t, n, inPlace) + " slot " + std::to_string(r), out, r * n,
                        input(r, t, n, salt), 0, n, t);
          }
        }
        // alltoall: n per peer
        {
          Bytes in = input(gRank, t, n * gSize, salt);
          Bytes orig = in;
          Bytes out = inPlace ? Bytes{} : sentinel(t, n * gSize);
          Bytes& res = inPlace ? in : out;
          pg.alltoall(buf(in, t, n * gSize), buf(res, t, n * gSize))->wait();
          for (int r = 0; r < gSize; ++r) {
            expectEqual(label("alltoall", t, n, inPlace) + " from " + std::to_string(r), res, r * n,
                        input(r, t, n * gSize, salt), static_cast<std::size_t>(gRank) * n, n, t);
          }
          if (!inPlace) expectUntouched(label("alltoall input", t, n, false), in, orig);
        }
      }
      // send/recv in pairs (0,1), (2,3), ...: the lower sends first, so no cycle can form.
      int peer = gRank % 2 == 0 ? gRank + 1 : gRank - 1;
      if (peer < gSize) {
        Bytes mine = input(gRank, t, n, salt);
        Bytes got = sentinel(t, n);
        if (gRank < peer) {
          pg.send(buf(mine, t, n), peer, 7)->wait();
          pg.recv(buf(got, t, n), peer, 8)->wait();
        } else {
          pg.recv(buf(got, t, n), peer, 7)->wait();
          pg.send(buf(mine, t, n), peer, 8)->wait();
        }
        expectEqual(label("send/recv", t, n, false), got, 0, input(peer, t, n, salt), 0, n, t);
      }
      pg.barrier()->wait();
    }
  }
}

std::string arg(int argc, char** argv, const char* name, const char* def = "") {
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s matrix|mismatch|timeout|p2p|p2p-mismatch --store PATH [--ms N] [--count N] [--large N]\n",
                 argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  try {
    ds::mpi::ensureInitialized();
    MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
    MPI_Comm_size(MPI_COMM_WORLD, &gSize);
    ProcessGroupOptions o;
    o.rank = gRank;
    o.size = gSize;
    o.store = std::make_shared<ds::store::FileStore>(arg(argc, argv, "--store"), std::chrono::seconds(30));
    o.timeout = std::chrono::seconds(60);
    o.heartbeatInterval = std::chrono::milliseconds(200);
    if (mode == "mismatch") {
      o.size = gSize + 1;
      try {
        auto pg = createProcessGroup("mpi", o);
      } catch (const ds::ConfigError& e) {
        std::printf("rank %d CONFIG_ERROR: %s\n", gRank, e.what());
        return 0;
      }
      std::printf("rank %d: no error for a size mismatch\n", gRank);
      return 1;
    }
    if (mode == "timeout") {
      o.timeout = std::chrono::milliseconds(std::stoi(arg(argc, argv, "--ms", "1500")));
      o.cpus = std::stoi(arg(argc, argv, "--cpus", "0"));
      auto pg = createProcessGroup("mpi", o);
      std::vector<float> x(std::stoul(arg(argc, argv, "--count", "1")), 1.0f);
      Buffer b{x.data(), x.size(), DType::kF32, Device{}};
      pg->allreduce(b)->wait();
      std::fflush(stdout);
      if (gRank == gSize - 1) {
        std::printf("rank %d skips op #2 and stalls\n", gRank);
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::seconds(120));
        return 0;
      }
      auto start = std::chrono::steady_clock::now();
      auto msSinceStart = [&] {
        return static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start)
                .count());
      };
      if (pg->callerRunsOps()) {
        // Op #2 runs on this thread; a blocking call never comes back without the last rank, so the
        // watchdog must report it and abort the job.
        std::printf("rank %d CALLER_RUNS op #2\n", gRank);
        std::fflush(stdout);
        pg->allreduce(b)->wait();
        std::printf("rank %d: op #2 returned after %lld ms without the last rank\n", gRank, msSinceStart());
        return 1;
      }
      if (arg(argc, argv, "--poll") == "1") {
        // Nobody waits: op #2 and op #3 (queued behind it) are only polled, so the group's watchdog
        // alone can report the timeout.
        auto second = pg->allreduce(b);
        auto third = pg->allreduce(b);
        auto limit = start + o.timeout + std::chrono::seconds(20);
        while (!second->isCompleted() && std::chrono::steady_clock::now() < limit) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (!second->isCompleted()) {
          std::printf("rank %d: op #2 never completed or failed while polled (no watchdog)\n", gRank);
          return 1;
        }
        long long ms = msSinceStart();
        try {
          std::rethrow_exception(second->exception());
        } catch (const ds::TimeoutError& e) {
          std::printf("rank %d WATCHDOG after %lld ms: %s\n", gRank, ms, e.what());
        } catch (const std::exception& e) {
          std::printf("rank %d: op #2 failed with something else than a timeout: %s\n", gRank, e.what());
          return 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (!third->isCompleted() || third->exception() == nullptr) {
          std::printf("rank %d: op #3, queued behind the timed-out op, did not fail at once\n", gRank);
          return 1;
        }
        try {
          std::rethrow_exception(third->exception());
        } catch (const ds::BackendError& e) {
          std::printf("rank %d QUEUED_OP_FAILED: %s\n", gRank, e.what());
        }
        std::fflush(stdout);
        return 0;  // exit must abort the job: the blocking call is still in flight
      }
      try {
        pg->allreduce(b)->wait();
        std::printf("rank %d: op #2 completed without the last rank\n", gRank);
        return 1;
      } catch (const ds::TimeoutError& e) {
        std::printf("rank %d TIMEOUT after %lld ms: %s\n", gRank, msSinceStart(), e.what());
      }
      try {
        pg->allreduce(b)->wait();
        std::printf("rank %d: op #3 ran on a broken group\n", gRank);
        return 1;
      } catch (const ds::BackendError& e) {
        std::printf("rank %d LATER_OP_REFUSED: %s\n", gRank, e.what());
      }
      std::fflush(stdout);
      return 0;  // exit must abort the job (MPI is broken), not hang in MPI_Finalize
    }
    if (mode == "matrix") {
      auto pg = createProcessGroup("mpi", o);
      auto start = std::chrono::steady_clock::now();
      runMatrix(*pg, static_cast<std::size_t>(std::stoul(arg(argc, argv, "--large", "4099"))));
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("rank %d of %d: %ld checks, %ld mismatches, %.2f s\n", gRank, gSize, gChecks, gFailures, s);
      return gFailures == 0 ? 0 : 1;
    }
    if (mode == "p2p" || mode == "p2p-mismatch") {
      // The point-to-point patterns every rank starts by sending (issue 41), 16 KiB and 1.2 MB; or a
      // recv of the wrong size, whose error must name both ranks.
      auto pg = createProcessGroup("mpi", o);
      std::vector<std::string> fails;
      if (mode == "p2p") {
        for (std::size_t count : {std::size_t{4096}, std::size_t{300000}}) {
          for (auto& f : ds::comm::testing::runP2pPatterns(*pg, count)) fails.push_back(f);
        }
      } else {
        fails = ds::comm::testing::runP2pFault(*pg, "mismatch");
      }
      for (const auto& f : fails) std::printf("rank %d FAIL: %s\n", gRank, f.c_str());
      std::printf("rank %d of %d: p2p %zu failures\n", gRank, gSize, fails.size());
      std::fflush(stdout);
      return fails.empty() ? 0 : 1;
    }
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d ERROR: %s\n", gRank, e.what());
    return 3;
  }
}
