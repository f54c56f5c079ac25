#include <sys/sysinfo.h>
#include <unistd.h>

#include <fstream>

#include "engine/accelerator/accelerator.h"
#include "engine/common/backends.h"
#include "engine/common/error.h"

namespace ds::accel {
namespace {

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "cpu";
}

class CpuAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "cpu"; }
  std::string communicationBackendName() const override { return defaultBackendFor("cpu"); }
  int deviceCount() const override { return 1; }
  std::vector<DeviceInfo> devices() const override {
    struct sysinfo si {};
    std::uint64_t mem = sysinfo(&si) == 0 ? static_cast<std::uint64_t>(si.totalram) * si.mem_unit : 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return {DeviceInfo{0, fmt::format("{} ({} cores)", cpuModelName(), cores), mem, ""}};
  }
  // On cpu every local rank shares the one "device", so any index is accepted, as in DeepSpeed.
  void setDevice(int /*index*/) override {}
};

}  // namespace

std::unique_ptr<Accelerator> makeCpuAccelerator() { return std::make_unique<CpuAccelerator>(); }

}  // namespace ds::accel
