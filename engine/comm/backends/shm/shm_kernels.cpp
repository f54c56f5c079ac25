#include "engine/comm/backends/shm/shm_kernels.h"

#include <cpuid.h>
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "engine/common/error.h"

namespace ds::comm::shm {
namespace {

// F16C from CPUID leaf 1 directly: clang 14's __builtin_cpu_supports does not know "f16c".
bool cpuHasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}

bool cpuHas(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuHasF16c();
    case Isa::kAvx512:
      return cpuHas(Isa::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

detail::ReduceFn fnFor(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return &detail::reduceGeneric;
    case Isa::kAvx2:
      return &detail::reduceAvx2;
    case Isa::kAvx512:
      return &detail::reduceAvx512;
  }
  return &detail::reduceGeneric;
}

Isa chooseIsa() {
  const char* v = std::getenv("DS_SHM_KERNEL");
  if (v != nullptr && *v != '\0') {
    std::string s(v);
    for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
      if (s == isaName(isa)) {
        if (!cpuHas(isa)) {
          throw ConfigError(
              fmt::format("DS_SHM_KERNEL={} asks for kernels this CPU cannot run; unset it or "
                          "use one of: {}.",
                          s, [] {
                            std::string names;
                            for (Isa i : supportedIsas())
                              names += (names.empty() ? "" : ", ") + std::string(isaName(i));
                            return names;
                          }()));
        }
        return isa;
      }
    }
    throw ConfigError(
        fmt::format("DS_SHM_KERNEL='{}' is not valid; use generic, avx2 or avx512 (or unset it).", s));
  }
  return supportedIsas().back();
}

}  // namespace

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return "generic";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

std::vector<Isa> supportedIsas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (cpuHas(isa)) v.push_back(isa);
  }
  return v;
}

Isa activeIsa() {
  static const Isa isa = chooseIsa();
  return isa;
}

void reduceN(void* out, void* out2, const void* const* ins, int n, std::size_t count, DType t, ReduceOp op,
             int divisor) {
  static const detail::ReduceFn fn = fnFor(activeIsa());
  fn(out, out2, ins, n, count, t, op, divisor);
}

void reduceNWith(Isa isa, void* out, void* out2, const void* const* ins, int n, std::size_t count, DType t,
                 ReduceOp op, int divisor) {
  DS_CHECK(cpuHas(isa), "ISA {} is not supported by this CPU", isaName(isa));
  fnFor(isa)(out, out2, ins, n, count, t, op, divisor);
}

}  // namespace ds::comm::shm
