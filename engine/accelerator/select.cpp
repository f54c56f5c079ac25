#include <algorithm>

#include "engine/accelerator/accelerator.h"
#include "engine/common/error.h"
#include "engine/common/log.h"

namespace ds::accel {

const std::vector<std::string>& knownAccelerators() {
  static const std::vector<std::string> kNames{"cpu", "cuda"};
  return kNames;
}

Selection selectAccelerator(const env::EnvSource& env) {
  Selection s;
  std::string why;
  if (auto requested = env.get("DS_ACCELERATOR")) {
    s.overridden = true;
    const auto& known = knownAccelerators();
    if (std::find(known.begin(), known.end(), *requested) == known.end()) {
      throw ConfigError(
          fmt::format("DS_ACCELERATOR='{}' is not a known accelerator; valid names are: {}. Unset it "
                      "to detect the accelerator automatically.",
                      *requested, fmt::join(known, ", ")));
    }
    if (*requested == "cuda") {
      s.accelerator = tryMakeCudaAccelerator(why);
      if (!s.accelerator) {
        throw ConfigError(
            fmt::format("DS_ACCELERATOR=cuda, but cuda is not usable here: {}. Unset "
                        "DS_ACCELERATOR or set it to cpu to run on the CPU.",
                        why));
      }
    } else {
      s.accelerator = makeCpuAccelerator();
    }
    return s;
  }
  s.accelerator = tryMakeCudaAccelerator(why);
  if (!s.accelerator) {
    s.reason = why;
    s.accelerator = makeCpuAccelerator();
  }
  return s;
}

}  // namespace ds::accel
