// A rank for the process-group fault tests, started once per rank with env:// variables:
//   ds_comm_fault_worker MODE [ARG]
//   loop BYTES        allreduce BYTES of f32, forever (until killed or an error); prints "ready" after
//                     the first one
//   stop R            rank R stops itself with SIGSTOP before an allreduce; the others run it
//   mismatch          rank 1 issues a broadcast where the others issue an allreduce (run with
//                     DS_DISTRIBUTED_DEBUG=DETAIL)
// FAULT_BACKEND picks the backend (default: the accelerator's, gloo on cpu).
// Exit codes as dsbench's: 4 timeout, 3 backend error, 5 configuration error.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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
  std::fprintf(stderr, "usage: ds_comm_fault_worker loop BYTES | stop RANK | mismatch\n");
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
