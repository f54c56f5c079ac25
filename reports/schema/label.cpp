#include "reports/schema/label.h"

#include <fmt/format.h>

#include "engine/common/error.h"

namespace ds::report {

std::string checkLabel(const std::string& label, const std::string& flag) {
  const std::string rule = fmt::format(
      "A label names the cluster or system (e.g. dgx-a100-pod2): 1 to {} printable ASCII characters "
      "(letters, digits, punctuation, inner spaces).",
      kMaxLabelLength);
  if (label.empty()) throw ConfigError(fmt::format("{} is empty. {}", flag, rule));
  if (label.size() > kMaxLabelLength) {
    throw ConfigError(
        fmt::format("{} '{}...' is {} characters long. {}", flag, label.substr(0, 24), label.size(), rule));
  }
  for (std::size_t i = 0; i < label.size(); ++i) {
    auto c = static_cast<unsigned char>(label[i]);
    if (c < 0x20 || c > 0x7e) {
      throw ConfigError(
          fmt::format("{} has a control or non-ASCII character (byte 0x{:02x}) at position {}. {}", flag, c,
                      i + 1, rule));
    }
  }
  if (label.front() == ' ' || label.back() == ' ') {
    throw ConfigError(fmt::format("{} '{}' starts or ends with a space. {}", flag, label, rule));
  }
  return label;
}

}  // namespace ds::report
