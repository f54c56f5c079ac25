// DDP communication hooks (torch.distributed.algorithms.ddp_comm_hooks): how a full bucket is
// reduced across ranks. The reducer has already divided every gradient by the world size while
// copying it into the bucket, so a hook only sums.
//
// launch() runs on the training thread inside backward and must not block on the network: it issues
// an asynchronous collective and returns its Work. finish() runs after that Work completed and leaves
// the reduced values in the bucket's buffer.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "engine/comm/process_group.h"
#include "engine/ddp/tensor.h"

namespace ds::ddp {

struct GradBucket {
  std::size_t index = 0;  // position in launch order
  Tensor buffer;          // flat gradients of this bucket, already divided by the world size
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual std::string name() const = 0;
  virtual std::shared_ptr<comm::Work> launch(comm::ProcessGroup& pg, GradBucket& bucket) = 0;
  virtual void finish(GradBucket& bucket) {}
};

// allreduce_hook: sum the bucket as it is.
class AllreduceHook : public CommHook {
 public:
  std::string name() const override { return "allreduce"; }
  std::shared_ptr<comm::Work> launch(comm::ProcessGroup& pg, GradBucket& bucket) override;
};

// fp16_compress_hook / bf16_compress_hook: cast the bucket to a 16-bit float, sum that (half the
// bytes on the wire), and cast the result back. Keeps one staging tensor per bucket.
class CompressHook : public CommHook {
 public:
  explicit CompressHook(DType wire);
  std::string name() const override;
  std::shared_ptr<comm::Work> launch(comm::ProcessGroup& pg, GradBucket& bucket) override;
  void finish(GradBucket& bucket) override;

 private:
  DType wire_;
  std::map<std::size_t, Tensor> staging_;
};

// "allreduce", "fp16" (or "fp16_compress") and "bf16" (or "bf16_compress"). Throws ConfigError
// listing them for anything else.
std::shared_ptr<CommHook> makeCommHook(const std::string& name);

}  // namespace ds::ddp
