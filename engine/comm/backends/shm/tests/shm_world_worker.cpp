// One rank of the shm netns test: init_distributed on the shm backend (which forms the host hierarchy
// when the job spans hosts), then the shared correctness matrix (no alltoall: not across hosts) and a
// larger allreduce. Prints "shm-world ok rank R of N on HOST" and exits 0, or prints the failures and
// exits 1; errors exit 3 (backend), 4 (timeout), 5 (configuration).
#include <cstdio>
#include <string>
#include <vector>

#include "engine/comm/tests/matrix.h"
#include "engine/common/error.h"
#include "engine/host/net.h"
#include "engine/init.h"

namespace {

int run() {
  ds::InitOptions o;
  o.distBackend = "shm";
  o.verbose = false;
  o.timeout = std::chrono::seconds(60);
  auto world = ds::initDistributed(o);
  auto& pg = world->pg();
  ds::comm::testing::MatrixShape shape;
  shape.pointToPoint = false;
  shape.largeCount = 1 << 16;
  std::vector<ds::comm::testing::MatrixCase> cases;
  for (const auto& c : ds::comm::testing::matrixCases(pg.size(), shape)) {
    if (c.op != ds::comm::OpType::kAlltoall) cases.push_back(c);
  }
  auto failures = ds::comm::testing::runCases(pg, cases);
  // 8 MiB of ones: many chunks through the slots on each host, then gloo among the leaders.
  std::vector<float> big(2 << 20, 1.0f);
  pg.allreduce(ds::comm::Buffer{big.data(), big.size(), ds::comm::DType::kF32, {}})->wait();
  for (std::size_t i = 0; i < big.size(); ++i) {
    if (big[i] != static_cast<float>(pg.size())) {
      failures.push_back("8 MiB allreduce: element " + std::to_string(i) + " is " + std::to_string(big[i]));
      break;
    }
  }
  for (const auto& f : failures) std::fprintf(stderr, "FAIL %s\n", f.c_str());
  if (failures.empty()) {
    std::printf("shm-world ok rank %d of %d on %s (%zu cases)\n", pg.rank(), pg.size(),
                ds::net::hostName().c_str(), cases.size());
  }
  std::fflush(stdout);
  ds::destroyProcessGroup();
  return failures.empty() ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const ds::TimeoutError& e) {
    std::fprintf(stderr, "TimeoutError: %s\n", e.what());
    return 4;
  } catch (const ds::ConfigError& e) {
    std::fprintf(stderr, "ConfigError: %s\n", e.what());
    return 5;
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "Error: %s\n", e.what());
    return 3;
  }
}
