// The communication backends by name, and each accelerator's own: the vocabulary the engine's
// factory, init_distributed, the tools' --backend flags and dsdiag share.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds {

// nccl, gloo, mpi, shm: every backend dsperf knows (whether or not this build has its library).
inline constexpr const char* kBackendNames[] = {"nccl", "gloo", "mpi", "shm"};

std::vector<std::string> backendNames();
bool isBackendName(std::string_view name);
// "nccl, gloo, mpi and shm" (with `last` = "or": "nccl, gloo, mpi or shm"), for sentences.
std::string backendNamesText(const char* last = "and");

// The accelerator's own backend, as DeepSpeed's accelerators answer communication_backend_name():
// nccl on cuda, gloo on cpu (and on anything else).
const char* defaultBackendFor(std::string_view accelerator);

}  // namespace ds
