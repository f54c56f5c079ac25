#include "engine/ddp/comm_hook.h"

#include <fmt/format.h>

#include "engine/common/error.h"
#include "engine/ddp/ops.h"

namespace ds::ddp {

std::shared_ptr<comm::Work> AllreduceHook::launch(comm::ProcessGroup& pg, GradBucket& bucket) {
  return pg.allreduce(bucket.buffer.buffer(), comm::ReduceOp::kSum);
}

CompressHook::CompressHook(DType wire) : wire_(wire) {
  DS_CHECK(wire == DType::kF16 || wire == DType::kBF16, "compress hook needs f16 or bf16");
}

std::string CompressHook::name() const { return wire_ == DType::kF16 ? "fp16_compress" : "bf16_compress"; }

std::shared_ptr<comm::Work> CompressHook::launch(comm::ProcessGroup& pg, GradBucket& bucket) {
  Tensor& staging = staging_[bucket.index];
  if (!staging.defined() || staging.numel() != bucket.buffer.numel() ||
      !(staging.device() == bucket.buffer.device())) {
    staging =
        Tensor::zeros({static_cast<std::int64_t>(bucket.buffer.numel())}, wire_, bucket.buffer.device());
  }
  ops::scaleCopy(bucket.buffer, 1.0f, staging);
  if (!pg.ordersAfterDeviceWork()) ops::synchronize(staging.device());
  return pg.allreduce(staging.buffer(), comm::ReduceOp::kSum);
}

void CompressHook::finish(GradBucket& bucket) {
  auto it = staging_.find(bucket.index);
  DS_CHECK(it != staging_.end(), "finish() of bucket {} that was never launched", bucket.index);
  ops::scaleCopy(it->second, 1.0f, bucket.buffer);
}

std::shared_ptr<CommHook> makeCommHook(const std::string& name) {
  if (name == "allreduce" || name.empty()) return std::make_shared<AllreduceHook>();
  if (name == "fp16" || name == "fp16_compress") return std::make_shared<CompressHook>(DType::kF16);
  if (name == "bf16" || name == "bf16_compress") return std::make_shared<CompressHook>(DType::kBF16);
  throw ConfigError(fmt::format("unknown DDP comm hook '{}'; expected allreduce, fp16 or bf16", name));
}

}  // namespace ds::ddp
