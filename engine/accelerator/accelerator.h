// The accelerator a rank computes on (DeepSpeed's get_accelerator()). It names the default
// communication backend and describes its devices for reports and dsdiag.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/env/env_source.h"

namespace ds::accel {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::uint64_t totalMemoryBytes = 0;
  std::string busId;  // PCI bus id where known ("0000:3b:00.0"), else empty
};

class Accelerator {
 public:
  virtual ~Accelerator() = default;
  // "cpu" or "cuda": the names DS_ACCELERATOR accepts.
  virtual std::string name() const = 0;
  // The backend init_distributed picks when dist_backend is not given: "gloo" on cpu, "nccl" on cuda.
  virtual std::string communicationBackendName() const = 0;
  virtual int deviceCount() const = 0;
  virtual std::vector<DeviceInfo> devices() const = 0;
  // Makes `index` the current device of the calling thread (no-op on cpu). Throws ConfigError when
  // the index does not exist ("invalid device ordinal", REFERENCE.md §7.5).
  virtual void setDevice(int index) = 0;
};

// How the accelerator was chosen, for the "Setting accelerator to X (override|auto detect)" line.
struct Selection {
  std::unique_ptr<Accelerator> accelerator;
  bool overridden = false;  // true when DS_ACCELERATOR chose it
  std::string reason;       // why cuda was not chosen on auto detect, empty otherwise
};

// The accelerator names DS_ACCELERATOR accepts, in the order they are listed in errors.
const std::vector<std::string>& knownAccelerators();

// DS_ACCELERATOR overrides (unknown names: ConfigError listing the valid ones; cuda where none is
// usable: ConfigError saying why). Otherwise probes cuda, falling back to cpu with a warning.
Selection selectAccelerator(const env::EnvSource& env);

std::unique_ptr<Accelerator> makeCpuAccelerator();
// Probes CUDA: returns nullptr and fills `why` when no usable device (or no CUDA in this build).
std::unique_ptr<Accelerator> tryMakeCudaAccelerator(std::string& why);

}  // namespace ds::accel
