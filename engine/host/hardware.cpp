#include "engine/host/hardware.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace ds::hw {

void to_json(nlohmann::json& j, const NicInfo& v) {
  j = {{"name", v.name}, {"kind", v.kind}, {"model", v.model}, {"gbps", v.gbps}, {"up", v.up}};
}
void from_json(const nlohmann::json& j, NicInfo& v) {
  v.name = j.at("name").get<std::string>();
  v.kind = j.value("kind", std::string{});
  v.model = j.value("model", std::string{});
  v.gbps = j.value("gbps", 0.0);
  v.up = j.value("up", true);
}
void to_json(nlohmann::json& j, const PcieLinkInfo& v) {
  j = {{"device", v.device},
       {"address", v.address},
       {"gen", v.gen},
       {"width", v.width},
       {"gbytes_per_s", v.gBps}};
}
void from_json(const nlohmann::json& j, PcieLinkInfo& v) {
  v.device = j.at("device").get<std::string>();
  v.address = j.value("address", std::string{});
  v.gen = j.value("gen", 0);
  v.width = j.value("width", 0);
  v.gBps = j.value("gbytes_per_s", 0.0);
}
void to_json(nlohmann::json& j, const NvlinkInfo& v) {
  j = {{"links", v.links}, {"gbytes_per_s_per_link", v.gBpsPerLink}};
}
void from_json(const nlohmann::json& j, NvlinkInfo& v) {
  v.links = j.value("links", 0);
  v.gBpsPerLink = j.value("gbytes_per_s_per_link", 0.0);
}
void to_json(nlohmann::json& j, const HostHardware& v) {
  j = {{"host", v.host},        {"cpu_model", v.cpuModel},
       {"gpu_name", v.gpuName}, {"gpus", v.gpus},
       {"nics", v.nics},        {"pcie", v.pcie},
       {"nvlink", v.nvlink},    {"mem_bw_gbytes_per_s", v.memBwGBps}};
}
void from_json(const nlohmann::json& j, HostHardware& v) {
  v.host = j.at("host").get<std::string>();
  v.cpuModel = j.value("cpu_model", std::string{});
  v.gpuName = j.value("gpu_name", std::string{});
  v.gpus = j.value("gpus", 0);
  v.nics = j.value("nics", std::vector<NicInfo>{});
  v.pcie = j.value("pcie", std::vector<PcieLinkInfo>{});
  v.nvlink = j.value("nvlink", NvlinkInfo{});
  v.memBwGBps = j.value("mem_bw_gbytes_per_s", 0.0);
}

std::string skuKey(const HostHardware& h) {
  std::vector<std::string> parts;
  if (!h.cpuModel.empty()) parts.push_back("cpu=" + h.cpuModel);
  if (h.gpus > 0)
    parts.push_back(fmt::format("gpu={}x{}", h.gpus, h.gpuName.empty() ? "unknown" : h.gpuName));
  // NICs grouped by kind and rate, fastest first: "nic=8x400G infiniband+1x100G ethernet".
  std::map<std::pair<double, std::string>, int, std::greater<>> groups;
  for (const auto& n : h.nics)
    if (n.up) ++groups[{n.gbps, n.kind.empty() ? "nic" : n.kind}];
  if (!groups.empty()) {
    std::string nic = "nic=";
    bool first = true;
    for (const auto& [key, count] : groups) {
      nic += fmt::format("{}{}x{}G {}", first ? "" : "+", count, key.first, key.second);
      first = false;
    }
    parts.push_back(nic);
  }
  if (parts.empty()) return "unknown";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ";") + p;
  return out;
}

}  // namespace ds::hw
