#include <algorithm>

#include "engine/accelerator/accelerator.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/env/deepspeed_view.h"

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
      auto ds = env::deepspeedAcceleratorNames();
      if (std::find(ds.begin(), ds.end(), *requested) != ds.end()) {
        throw ConfigError(
            fmt::format("DS_ACCELERATOR={}: {} is a DeepSpeed accelerator that dsperf does not support; "
                        "dsperf runs on {}. Unset DS_ACCELERATOR or set it to one of those.",
                        *requested, *requested, fmt::join(known, " and ")));
      }
      throw ConfigError(fmt::format(
          "DS_ACCELERATOR='{}' is not an accelerator DeepSpeed knows ({}): `import deepspeed` fails on it "
          "with ValueError, and dsperf runs on {}. Unset it to detect the accelerator automatically.",
          *requested, fmt::join(ds, ", "), fmt::join(known, " and ")));
    }
    if (*requested == "cuda") {
      s.accelerator = tryMakeCudaAccelerator(why);
      if (!s.accelerator) {
        throw ConfigError(fmt::format(
            "DS_ACCELERATOR=cuda, but cuda is not usable here: {}. DeepSpeed takes it without checking "
            "and fails later, at the first CUDA call; dsperf stops now. Unset DS_ACCELERATOR or set it "
            "to cpu to run on the CPU.",
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
