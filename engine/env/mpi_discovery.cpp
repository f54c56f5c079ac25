#include "engine/env/mpi_discovery.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/host/net.h"

#if DS_WITH_MPI
#include <mpi.h>

#include "engine/env/mpi_runtime.h"
#endif

namespace ds::env {

#if DS_WITH_MPI
namespace {
constexpr int kNameLen = 256;

std::vector<std::string> allgatherStrings(const std::string& mine) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> send(kNameLen, '\0');
  std::memcpy(send.data(), mine.data(), std::min<size_t>(mine.size(), kNameLen - 1));
  std::vector<char> recv(static_cast<size_t>(kNameLen) * size);
  MPI_Allgather(send.data(), kNameLen, MPI_CHAR, recv.data(), kNameLen, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int i = 0; i < size; ++i) out.emplace_back(recv.data() + static_cast<size_t>(i) * kNameLen);
  return out;
}
}  // namespace

void resolveThroughMpi(WorldInfo& w) {
  if (!w.needsMpiMasterAddr && !w.needsMpiLocalRanks) return;
  mpi::ensureInitialized();
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != w.rank.value || size != w.worldSize.value) {
    throw ConfigError(fmt::format(
        "MPI says this process is rank {} of {}, but discovery found RANK={} (from {}) and WORLD_SIZE={} "
        "(from "
        "{}). The MPI library does not match the launcher that started this job; start it with the mpirun "
        "of the MPI this build uses, or set RANK, WORLD_SIZE and MASTER_ADDR yourself.",
        rank, size, w.rank.value, w.rank.source, w.worldSize.value, w.worldSize.source));
  }
  auto hosts = allgatherStrings(net::hostName());
  if (w.needsMpiLocalRanks) {
    int localRank = 0;
    int localSize = 0;
    std::vector<std::string> order;
    for (int i = 0; i < size; ++i) {
      if (hosts[i] == hosts[rank]) {
        ++localSize;
        if (i < rank) ++localRank;
      }
      if (std::find(order.begin(), order.end(), hosts[i]) == order.end()) order.push_back(hosts[i]);
    }
    w.localRank = {localRank, "MPI: lower ranks on this host"};
    w.localWorldSize = {localSize, "MPI: ranks on this host"};
    auto node = std::find(order.begin(), order.end(), hosts[rank]) - order.begin();
    w.nodeRank = {static_cast<int>(node), "MPI: hosts in rank order"};
    w.needsMpiLocalRanks = false;
  }
  if (w.needsMpiMasterAddr) {
    std::vector<char> addr(kNameLen, '\0');
    if (rank == 0) {
      std::string mine = net::firstHostAddress();
      std::memcpy(addr.data(), mine.data(), std::min<size_t>(mine.size(), kNameLen - 1));
    }
    MPI_Bcast(addr.data(), kNameLen, MPI_CHAR, 0, MPI_COMM_WORLD);
    w.masterAddr = {std::string(addr.data()), fmt::format("MPI: rank 0's address (host {})", hosts[0])};
    w.needsMpiMasterAddr = false;
  }
  validateWorld(w);
}
#else
void resolveThroughMpi(WorldInfo& w) {
  if (w.needsMpiMasterAddr) {
    throw ConfigError(fmt::format(
        "MASTER_ADDR is not set, and this dsperf was built without MPI, so rank 0's address cannot be agreed "
        "through the {} launcher. Export MASTER_ADDR=<rank 0's host> (and MASTER_PORT) in the job script, or "
        "rebuild with -DDS_WITH_MPI=ON.",
        launcherName(w.launcher)));
  }
  if (w.needsMpiLocalRanks) {
    log::warn(
        "the {} launcher gave no local rank and this build has no MPI to work it out; assuming {} and {}. "
        "Export LOCAL_RANK and LOCAL_WORLD_SIZE if that is wrong.",
        launcherName(w.launcher), w.localRank.source, w.localWorldSize.source);
    w.needsMpiLocalRanks = false;
  }
}
#endif

}  // namespace ds::env
