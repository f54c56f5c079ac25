// Where a process group's buffers live: host memory for the cpu backends, device memory (CUDA) for
// nccl. dsbench's harness and dsdiag's smoke allreduce fill and check data on the host and copy it
// when the buffers are on a device.
#pragma once

#include <cstddef>
#include <memory>

#include "engine/comm/types.h"

namespace ds::comm {

class Memory {
 public:
  virtual ~Memory() = default;
  virtual Device device() const = 0;
  // True when pointers from alloc() are host memory the caller may read and write directly.
  virtual bool isHost() const = 0;
  // Throws BackendError (CUDA) or std::bad_alloc.
  virtual void* alloc(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // Synchronous copies (a device's default stream is synchronised before returning).
  virtual void toDevice(void* dst, const void* hostSrc, std::size_t bytes) = 0;
  virtual void toHost(void* hostDst, const void* src, std::size_t bytes) = 0;
  virtual void zero(void* p, std::size_t bytes) = 0;
};

// Host memory for cpu devices; CUDA memory for cuda:<i> (ConfigError when built without CUDA).
std::unique_ptr<Memory> makeMemory(const Device& device);

// An allocation that frees itself.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Memory& mem, std::size_t bytes)
      : mem_(&mem), bytes_(bytes), p_(bytes ? mem.alloc(bytes) : nullptr) {}
  ~DeviceBuffer() {
    if (p_) mem_->release(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : mem_(o.mem_), bytes_(o.bytes_), p_(o.p_) { o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(mem_, o.mem_);
    std::swap(bytes_, o.bytes_);
    std::swap(p_, o.p_);
    return *this;
  }
  // Gives up the allocation without freeing it: for memory an abandoned op may still write to.
  void leak() { p_ = nullptr; }
  void* data() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  Memory* mem_ = nullptr;
  std::size_t bytes_ = 0;
  void* p_ = nullptr;
};

}  // namespace ds::comm
