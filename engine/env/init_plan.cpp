#include "engine/env/init_plan.h"

#include <fmt/format.h>

#include "engine/common/error.h"

namespace ds {

Discovery parseDiscovery(std::string_view text, std::string_view from) {
  if (text == "dsperf") return Discovery::kDsperf;
  if (text == "deepspeed") return Discovery::kDeepSpeed;
  throw ConfigError(
      fmt::format("{}='{}' is not a discovery rule set; use dsperf (field by field, checked against "
                  "the launcher) or deepspeed (exactly what deepspeed.init_distributed() does).",
                  from, text));
}

const char* discoveryName(Discovery d) { return d == Discovery::kDeepSpeed ? "deepspeed" : "dsperf"; }

}  // namespace ds
