#include "engine/ddp/tests/scenario.h"

#include <cmath>

#include "engine/common/error.h"

namespace ds::ddp::testing {

namespace {

TrainConfig base(const std::string& optimizer) {
  TrainConfig c;
  c.model = parseModelSpec("mlp:32x3,in=16,out=8");
  c.samples = 256;
  c.steps = kSteps;
  c.optimizer.kind = optimizer;
  c.optimizer.lr = optimizer == "sgd" ? 0.05f : 0.005f;
  c.ddp.bucketCapMb = 0.002;  // ~2 KiB: the 7.5 KB of gradients fill several buckets
  c.ddp.firstBucketBytes = 1024;
  return c;
}

}  // namespace

TrainConfig ddpConfig(const std::string& optimizer, int worldSize, int accumulation) {
  TrainConfig c = base(optimizer);
  if (kGlobalBatch % (worldSize * accumulation) != 0) throw ConfigError("global batch not divisible");
  c.batch = kGlobalBatch / worldSize / accumulation;
  c.accumulation = accumulation;
  c.seedStridePerRank = 1000;
  c.checkReplicas = true;
  return c;
}

TrainConfig referenceConfig(const std::string& optimizer) {
  TrainConfig c = base(optimizer);
  c.batch = kGlobalBatch;
  return c;
}

Diff compareParams(const std::vector<float>& a, const std::vector<float>& b) {
  Diff d;
  d.sizeA = a.size();
  d.sizeB = b.size();
  if (a.size() != b.size()) {
    d.maxAbs = INFINITY;
    return d;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    double e = std::abs(static_cast<double>(a[i]) - b[i]);
    if (!(e <= d.maxAbs)) {
      d.maxAbs = e;
      d.index = i;
    }
  }
  return d;
}

}  // namespace ds::ddp::testing
