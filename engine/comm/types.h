// Element types, reduce ops and type-erased buffers of the communication layer. Buffers are
// `void*` + count + dtype + device (Gloo's style), not a template per type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::comm {

enum class DType : std::uint8_t { kF32, kF64, kF16, kBF16, kI32, kI64, kU8, kI8 };
inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                       DType::kI32, DType::kI64, DType::kU8,  DType::kI8};

enum class ReduceOp : std::uint8_t { kSum, kProd, kMin, kMax, kAvg };
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                             ReduceOp::kAvg};

std::size_t dtypeSize(DType t);
bool isFloating(DType t);
// "f32", "bf16", ... (the names flags and JSON use).
const char* dtypeName(DType t);
// Accepts our names and nccl-tests' (float, double, half, bfloat16, int32, int64, uint8, int8).
// Throws ConfigError listing the valid names.
DType parseDType(std::string_view name);

// "sum", "prod", "min", "max", "avg".
const char* reduceOpName(ReduceOp op);
ReduceOp parseReduceOp(std::string_view name);

enum class DeviceType : std::uint8_t { kCpu, kCuda };
struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};
std::string deviceName(const Device& d);

struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;  // elements
  DType dtype = DType::kF32;
  Device device{};

  std::size_t bytes() const { return count * dtypeSize(dtype); }
  // The sub-buffer of `n` elements starting at element `offset`.
  Buffer slice(std::size_t offset, std::size_t n) const {
    return Buffer{static_cast<char*>(data) + offset * dtypeSize(dtype), n, dtype, device};
  }
};

}  // namespace ds::comm
