// Tensor: a minimal contiguous tensor for the DDP engine. f32 for maths, f16/bf16 for storage
// (compressed gradients); host memory, or CUDA device memory when built with CUDA.
//
// A Tensor is a shape plus a view (offset, numel) into a shared Storage, so a gradient can be a view
// into a bucket's flat buffer (gradient_as_bucket_view). Copies of a Tensor share the storage, like
// torch.Tensor; clone() makes a deep copy. Not thread-safe beyond what the memory itself allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/types.h"

namespace ds::ddp {

using comm::Device;
using comm::DeviceType;
using comm::DType;

// Owns one allocation (malloc on the host, cudaMalloc on a GPU). Zero-filled on creation.
class Storage {
 public:
  Storage(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;
  // A new zero-filled tensor. Throws ConfigError for an unsupported dtype (only f32, f16, bf16) or a
  // CUDA device in a build without CUDA.
  static Tensor zeros(std::vector<std::int64_t> shape, DType dtype = DType::kF32, Device device = {});
  // A host f32 tensor holding `values` (numel must match the shape).
  static Tensor fromVector(std::vector<std::int64_t> shape, const std::vector<float>& values,
                           Device device = {});

  bool defined() const { return storage_ != nullptr; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  std::size_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  bool isCuda() const { return device_.type == DeviceType::kCuda; }
  std::size_t bytes() const { return numel_ * comm::dtypeSize(dtype_); }
  void* raw() const;
  // Typed pointer; DS_CHECKs that T matches the dtype's size (float for f32, uint16_t for f16/bf16).
  template <typename T>
  T* data() const {
    checkElementSize(sizeof(T));
    return static_cast<T*>(raw());
  }
  comm::Buffer buffer() const { return comm::Buffer{raw(), numel_, dtype_, device_}; }

  // A view of `n` elements starting at element `offset`, reshaped to `shape` (numel must be n).
  Tensor view(std::size_t offset, std::size_t n, std::vector<std::int64_t> shape) const;
  // Same storage, new shape with the same numel.
  Tensor reshape(std::vector<std::int64_t> shape) const;
  // True when both views share one allocation and start at the same element.
  bool sameMemory(const Tensor& other) const;
  // A deep copy, optionally on another device.
  Tensor clone() const;
  Tensor to(Device device) const;
  // A copy converted to `dtype` (rounding to nearest even for f16/bf16).
  Tensor toDType(DType dtype) const;
  // The values as host floats (converted from f16/bf16, copied from the GPU).
  std::vector<float> toVector() const;

  // "[64, 32]"
  std::string shapeString() const;
  static std::string shapeString(const std::vector<std::int64_t>& shape);

 private:
  void checkElementSize(std::size_t size) const;

  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;  // elements
  std::size_t numel_ = 0;
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::kF32;
  Device device_{};
};

std::size_t numelOf(const std::vector<std::int64_t>& shape);

}  // namespace ds::ddp
