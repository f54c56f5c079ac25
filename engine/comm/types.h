// Devices and type-erased buffers of the communication layer. Buffers are `void*` + count + dtype +
// device (Gloo's style), not a template per type. Element types and reduce ops are vocabulary that
// reports/ shares: engine/common/dtype.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/common/dtype.h"

namespace ds::comm {

using ds::DType;
using ds::dtypeName;
using ds::dtypeSize;
using ds::isFloating;
using ds::kAllDTypes;
using ds::kAllReduceOps;
using ds::parseDType;
using ds::parseReduceOp;
using ds::ReduceOp;
using ds::reduceOpName;

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
