#include "engine/comm/types.h"

#include <fmt/format.h>

#include "engine/common/error.h"

namespace ds::comm {

std::string deviceName(const Device& d) {
  return d.type == DeviceType::kCpu ? std::string("cpu") : fmt::format("cuda:{}", d.index);
}

}  // namespace ds::comm
