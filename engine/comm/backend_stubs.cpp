// TEMPORARY while the backends are being written in parallel: weak fallbacks so that binaries link
// before every backend's source exists. A real backend's strong definition, found first in
// libdsengine, wins. Removed once all backends have landed.
#include <fmt/format.h>

#include "engine/comm/process_group.h"
#include "engine/common/error.h"

namespace ds::comm {
#define DS_STUB(fn, name)                                                                         \
  __attribute__((weak)) std::unique_ptr<ProcessGroup> fn(const ProcessGroupOptions&) {            \
    throw ConfigError(fmt::format("the {} backend is not implemented in this build yet.", name)); \
  }
DS_STUB(makeGlooProcessGroup, "gloo")
DS_STUB(makeMpiProcessGroup, "mpi")
DS_STUB(makeNcclProcessGroup, "nccl")
}  // namespace ds::comm
