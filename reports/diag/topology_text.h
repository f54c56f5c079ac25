// gpu.topology's matrix in the text report, laid out as `nvidia-smi topo -m` lays it out: a header of
// GPU# and NIC# columns, one row per device with its path to each, the GPUs' CPU and NUMA affinity,
// a legend line and the NICs' names.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ds::report {

// The lines from the finding's data ({"devices": [...], "matrix": [[...]], "gpus": [{cpu_affinity,
// numa_node}], "nics": [{name}]}); empty when the data lacks a well-formed matrix (an older report, a
// SKIP). Text from the data is printed as is, cut to 24 characters per cell.
std::vector<std::string> formatTopologyMatrix(const nlohmann::json& data);

}  // namespace ds::report
