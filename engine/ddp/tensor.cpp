#include "engine/ddp/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>

#include "engine/comm/half.h"
#include "engine/common/error.h"
#include "engine/ddp/ops.h"
#if DS_WITH_CUDA
#include "engine/ddp/cuda_ops.h"
#endif

namespace ds::ddp {

namespace {

void checkDType(DType t) {
  if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) {
    throw ConfigError(
        fmt::format("the DDP engine's tensors hold f32, f16 or bf16, not {}", comm::dtypeName(t)));
  }
}

void checkDevice(const Device& d) {
  if (d.type == DeviceType::kCuda && !DS_WITH_CUDA) {
    throw ConfigError(
        "a CUDA tensor was requested, but this dsperf was built without CUDA; rebuild with -DDS_WITH_CUDA=ON "
        "or "
        "run on cpu");
  }
}

}  // namespace

std::size_t numelOf(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw ConfigError(fmt::format("negative dimension in shape {}", Tensor::shapeString(shape)));
    n *= static_cast<std::size_t>(d);
  }
  return n;
}

Storage::Storage(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  checkDevice(device);
  if (device.type == DeviceType::kCuda) {
#if DS_WITH_CUDA
    data_ = cuda::alloc(bytes, device.index);
#endif
    return;
  }
  // 64-byte alignment suits BLAS and keeps views of f32 buckets aligned.
  std::size_t rounded = ((bytes + 63) / 64) * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (data_ == nullptr)
    throw IoError(fmt::format("out of host memory allocating {} bytes for a tensor", bytes));
  std::memset(data_, 0, rounded == 0 ? 64 : rounded);
}

Storage::~Storage() {
  if (device_.type == DeviceType::kCuda) {
#if DS_WITH_CUDA
    cuda::release(data_);
#endif
    return;
  }
  std::free(data_);
}

Tensor Tensor::zeros(std::vector<std::int64_t> shape, DType dtype, Device device) {
  checkDType(dtype);
  Tensor t;
  t.numel_ = numelOf(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(t.numel_ * comm::dtypeSize(dtype), device);
  return t;
}

Tensor Tensor::fromVector(std::vector<std::int64_t> shape, const std::vector<float>& values, Device device) {
  Tensor host = zeros(std::move(shape));
  if (values.size() != host.numel()) {
    throw ConfigError(fmt::format("fromVector: {} values for shape {}", values.size(), host.shapeString()));
  }
  std::memcpy(host.raw(), values.data(), values.size() * sizeof(float));
  return device.type == DeviceType::kCpu ? host : host.to(device);
}

void* Tensor::raw() const {
  DS_CHECK(storage_ != nullptr, "use of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * comm::dtypeSize(dtype_);
}

void Tensor::checkElementSize(std::size_t size) const {
  DS_CHECK(size == comm::dtypeSize(dtype_), "tensor of {} accessed with an element of {} bytes",
           comm::dtypeName(dtype_), size);
}

Tensor Tensor::view(std::size_t offset, std::size_t n, std::vector<std::int64_t> shape) const {
  DS_CHECK(defined(), "view of an undefined tensor");
  DS_CHECK(offset + n <= numel_, "view [{}, {}) outside a tensor of {} elements", offset, offset + n, numel_);
  DS_CHECK(numelOf(shape) == n, "view of {} elements with shape {}", n, shapeString(shape));
  Tensor t = *this;
  t.offset_ = offset_ + offset;
  t.numel_ = n;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::reshape(std::vector<std::int64_t> shape) const { return view(0, numel_, std::move(shape)); }

bool Tensor::sameMemory(const Tensor& other) const {
  return storage_ != nullptr && storage_ == other.storage_ && offset_ == other.offset_;
}

Tensor Tensor::clone() const { return to(device_); }

Tensor Tensor::to(Device device) const {
  Tensor out = zeros(shape_, dtype_, device);
  ops::copy(*this, out);
  return out;
}

Tensor Tensor::toDType(DType dtype) const {
  Tensor out = zeros(shape_, dtype, device_);
  ops::scaleCopy(*this, 1.0f, out);
  return out;
}

std::vector<float> Tensor::toVector() const {
  Tensor host = device_.type == DeviceType::kCpu ? *this : to(Device{});
  std::vector<float> out(numel_);
  if (dtype_ == DType::kF32) {
    std::memcpy(out.data(), host.raw(), bytes());
  } else {
    const auto* p = host.data<std::uint16_t>();
    for (std::size_t i = 0; i < numel_; ++i) {
      out[i] = dtype_ == DType::kF16 ? comm::f16ToFloat(p[i]) : comm::bf16ToFloat(p[i]);
    }
  }
  return out;
}

std::string Tensor::shapeString() const { return shapeString(shape_); }

std::string Tensor::shapeString(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace ds::ddp
