#include "reports/diag/topology_text.h"

#include <fmt/format.h>

#include <algorithm>

namespace ds::report {
namespace {

std::string cell(const nlohmann::json& j) {
  std::string s = j.is_string()           ? j.get<std::string>()
                  : j.is_number_integer() ? std::to_string(j.get<long long>())
                                          : "";
  return s.substr(0, 24);
}

}  // namespace

std::vector<std::string> formatTopologyMatrix(const nlohmann::json& data) {
  if (!data.is_object()) return {};
  const auto devices = data.value("devices", nlohmann::json::array());
  const auto matrix = data.value("matrix", nlohmann::json::array());
  if (!devices.is_array() || !matrix.is_array() || devices.empty() || matrix.size() != devices.size())
    return {};
  for (const auto& row : matrix)
    if (!row.is_array() || row.size() != devices.size()) return {};
  const auto gpus = data.value("gpus", nlohmann::json::array());
  const auto nics = data.value("nics", nlohmann::json::array());
  std::size_t width = 6;
  for (const auto& d : devices) width = std::max(width, cell(d).size() + 2);
  for (const auto& row : matrix)
    for (const auto& c : row) width = std::max(width, cell(c).size() + 2);
  std::vector<std::string> out;
  std::string head(width, ' ');
  for (const auto& d : devices) head += fmt::format("{:<{}}", cell(d), width);
  out.push_back(head + fmt::format("{:<16}{}", "CPU Affinity", "NUMA Affinity"));
  for (std::size_t i = 0; i < matrix.size(); ++i) {
    std::string line = fmt::format("{:<{}}", cell(devices[i]), width);
    for (const auto& c : matrix[i]) line += fmt::format("{:<{}}", cell(c), width);
    if (gpus.is_array() && i < gpus.size() && gpus[i].is_object()) {
      std::string cpus = cell(gpus[i].value("cpu_affinity", nlohmann::json("")));
      const auto numa = gpus[i].value("numa_node", nlohmann::json(-1));
      line += fmt::format("{:<16}{}", cpus.empty() ? "N/A" : cpus,
                          numa.is_number_integer() && numa.get<long long>() >= 0 ? cell(numa) : "N/A");
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out.push_back(line);
  }
  out.push_back(
      "Legend: X = self, SYS = across NUMA nodes (the SMP interconnect between sockets), NODE = across PCIe "
      "host "
      "bridges within one NUMA node, PHB = through a PCIe host bridge (the CPU), PXB = several PCIe bridges "
      "without "
      "a host bridge, PIX = at most one PCIe bridge, NV# = # bonded NVLinks, ? = unknown");
  if (nics.is_array() && !nics.empty()) {
    std::string legend = "NIC Legend:";
    for (std::size_t k = 0; k < nics.size(); ++k) {
      if (!nics[k].is_object()) continue;
      legend +=
          fmt::format("{} NIC{}: {}", k == 0 ? "" : ",", k, cell(nics[k].value("name", nlohmann::json(""))));
    }
    out.push_back(legend);
  }
  return out;
}

}  // namespace ds::report
