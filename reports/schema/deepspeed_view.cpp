#include "reports/schema/deepspeed_view.h"

#include "reports/json_io.h"

namespace ds::report {
namespace {

nlohmann::json optText(const env::DsVar& v) {
  return v.text ? nlohmann::json(*v.text) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json deepspeedViewJson(const env::DeepSpeedView& v,
                                 const std::vector<env::DsDifference>& differences) {
  nlohmann::json j{{"path", v.path},
                   {"why", v.why},
                   {"missing", v.missing},
                   {"rank", jsonOrNull(v.rankValue)},
                   {"world_size", jsonOrNull(v.worldSizeValue)},
                   {"local_rank", optText(v.localRank)},
                   {"master_addr", optText(v.masterAddr)},
                   {"master_port", jsonOrNull(v.masterPortValue)},
                   {"master_addr_from_mpi_rank0", v.masterAddrFromMpiRank0},
                   {"mpi4py_needed", v.mpi4pyNeeded},
                   {"mpi_world", v.mpiWorld},
                   {"nccl_socket_ifname", optText(v.ncclSocketIfname)},
                   {"sources",
                    {{"rank", v.rank.source},
                     {"world_size", v.worldSize.source},
                     {"local_rank", v.localRank.source},
                     {"master_addr", v.masterAddr.source},
                     {"master_port", v.masterPort.source}}},
                   {"accelerator", v.accelerator},
                   {"accelerator_method", v.acceleratorMethod},
                   {"backend", v.backend},
                   {"timeout_s", jsonOrNull(v.timeoutSeconds)},
                   {"warnings", v.warnings}};
  if (v.failure) {
    j["failure"] = {{"stage", v.failure->stage},
                    {"type", v.failure->type},
                    {"message", v.failure->message},
                    {"unless_installed", v.failure->unless}};
    for (const char* k : {"rank", "world_size", "master_port"}) j[k] = nullptr;
  } else {
    j["failure"] = nullptr;
  }
  nlohmann::json diffs = nlohmann::json::array();
  for (const auto& d : differences) {
    diffs.push_back(
        {{"field", d.field}, {"deepspeed", d.deepspeed}, {"dsperf", d.other}, {"sentence", d.sentence}});
  }
  j["differences"] = diffs;
  return j;
}

}  // namespace ds::report
