// A rank for the process-group fault tests, started once per rank with env:// variables:
//   ds_comm_fault_worker MODE [ARG]
//   loop BYTES        allreduce BYTES of f32, forever (until killed or an error); prints "ready" after
//                     the first one
//   stop R            rank R stops itself with SIGSTOP before an allreduce; the others run it
//   mismatch          rank 1 issues a broadcast where the others issue an allreduce (run with
//                     DS_DISTRIBUTED_DEBUG=DETAIL)
//   hang N R          collectives #1..N-1 of several types, then rank R stops itself with SIGSTOP
//                     (or sleeps, with FAULT_VICTIM_SLEEPS) before #N (an allreduce) and the others
//                     print "at N <rank>" and wait in it; FAULT_SLOW_RANK's #N has the timeout
//                     FAULT_SLOW_TIMEOUT_MS instead; with FAULT_ODD_GROUP=1 the odd ranks first
//                     run an allreduce on a group of their own ("odd", members' global ranks 1,3,...)
// FAULT_BACKEND picks the backend (default: the accelerator's, gloo on cpu).
// Exit codes as dsbench's: 4 timeout, 3 backend error, 5 configuration error.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/common/error.h"
#include "engine/init.h"

namespace {

int run(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  ds::InitOptions o;
  o.verbose = false;
  if (const char* t = std::getenv("FAULT_TIMEOUT_MS")) o.timeout = std::chrono::milliseconds(std::atoi(t));
  if (const char* b = std::getenv("FAULT_BACKEND")) o.distBackend = b;
  auto world = ds::initDistributed(o);
  auto& pg = world->pg();
  const int rank = world->rank();
  if (mode == "loop") {
    std::size_t bytes = argc > 2 ? std::stoul(argv[2]) : (1u << 24);
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    ds::comm::Buffer b{data.data(), data.size(), ds::comm::DType::kF32, {}};
    for (long i = 0;; ++i) {
      pg.allreduce(b)->wait();
      if (i == 0) {
        std::printf("ready %d\n", rank);
        std::fflush(stdout);
      }
    }
  }
  if (mode == "stop") {
    int victim = argc > 2 ? std::atoi(argv[2]) : 1;
    float x = 1;
    ds::comm::Buffer b{&x, 1, ds::comm::DType::kF32, {}};
    pg.allreduce(b)->wait();  // everyone is up, heartbeats flowing
    if (rank == victim) ::raise(SIGSTOP);
    pg.allreduce(b)->wait();
    return 0;
  }
  if (mode == "hang") {
    const int n = argc > 2 ? std::atoi(argv[2]) : 5;
    const int victim = argc > 3 ? std::atoi(argv[3]) : 1;
    const int size = world->worldSize();
    std::vector<float> x(8, 1.0f);
    std::vector<float> all(8 * static_cast<std::size_t>(size), 0.0f);
    ds::comm::Buffer b{x.data(), x.size(), ds::comm::DType::kF32, {}};
    ds::comm::Buffer gathered{all.data(), all.size(), ds::comm::DType::kF32, {}};
    if (std::getenv("FAULT_ODD_GROUP") != nullptr && rank % 2 == 1) {
      ds::comm::ProcessGroupOptions go = pg.options();
      go.groupName = "odd";
      go.rank = rank / 2;
      go.size = size / 2;
      go.globalRanks.clear();
      for (int r = 1; r < size; r += 2) go.globalRanks.push_back(r);
      auto odd = ds::comm::createProcessGroup(world->backend(), go);
      odd->allreduce(b)->wait();  // then the group goes; its entries stay in the recorder
    }
    for (int op = 1; op < n; ++op) {
      switch (op % 3) {
        case 0:
          pg.broadcast(b, 0)->wait();
          break;
        case 1:
          pg.allreduce(b)->wait();
          break;
        default:
          pg.allgather(b, gathered)->wait();
      }
    }
    if (rank == victim) {
      // A stall on the host (FAULT_VICTIM_SLEEPS: its threads live on, and answer a dump signal), or
      // a stopped process.
      if (std::getenv("FAULT_VICTIM_SLEEPS") != nullptr) {
        ::sleep(3600);
      } else {
        ::raise(SIGSTOP);
      }
    }
    ds::comm::Timeout t;
    const char* slow = std::getenv("FAULT_SLOW_RANK");
    const char* slowMs = std::getenv("FAULT_SLOW_TIMEOUT_MS");
    if (slow != nullptr && slowMs != nullptr && std::atoi(slow) == rank)
      t = std::chrono::milliseconds(std::atoi(slowMs));
    std::printf("at %d %d\n", n, rank);
    std::fflush(stdout);
    pg.allreduce(b, ds::comm::ReduceOp::kSum, t)->wait();
    return 0;
  }
  if (mode == "mismatch") {
    float x[4] = {1, 2, 3, 4};
    ds::comm::Buffer b{x, 4, ds::comm::DType::kF32, {}};
    if (rank == 1) {
      pg.broadcast(b, 0)->wait();
    } else {
      pg.allreduce(b)->wait();
    }
    return 0;
  }
  std::fprintf(stderr, "usage: ds_comm_fault_worker loop BYTES | stop RANK | mismatch | hang N RANK\n");
  return 5;
}

}  // namespace

// After a failed collective the group's worker may still be inside the backend, so the process
// leaves with _Exit rather than running destructors under it.
[[noreturn]] void leave(const char* kind, const char* what, int code) {
  std::fprintf(stderr, "%s: %s\n", kind, what);
  std::fflush(stderr);
  std::_Exit(code);
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ds::TimeoutError& e) {
    leave("TimeoutError", e.what(), 4);
  } catch (const ds::ConfigError& e) {
    leave("ConfigError", e.what(), 5);
  } catch (const ds::Error& e) {
    leave("Error", e.what(), 3);
  }
}
