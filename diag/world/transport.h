// Which backend dsdiag's own process group (the smoke allreduce and the clock exchange of world
// mode) runs on: the job's own where every rank can run it, so that world.smoke_allreduce proves the
// transport the job will use; gloo otherwise, with the reason in the finding. Pure functions, unit-
// tested; world_mode.cpp gathers what they read.
#pragma once

#include <string>
#include <vector>

#include "diag/world/cross_checks.h"

namespace ds::diag {

struct Transport {
  std::string backend;
  std::string why;  // why it is not the job's backend; empty when it is
};

// One rank's answer. `available`: the backends this dsdiag can make (comm::availableBackends());
// `gpuProblem`: for a job on nccl, why this rank cannot drive its GPU ("" when it can).
Transport localTransport(const std::string& job, const std::vector<std::string>& available,
                         const std::string& gpuProblem);

// Rank 0's decision from every rank's answer (RankReport::transport, transportWhy): the job's
// backend when every rank chose it and, for nccl, no two ranks share a GPU (NCCL refuses them,
// world.gpu_unique); otherwise the fallback, with the first rank's reason.
Transport agreedTransport(const std::string& job, const std::vector<std::string>& available,
                          const std::vector<RankReport>& reports);

}  // namespace ds::diag
