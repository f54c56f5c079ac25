#include "diag/explain.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <memory>

#include "diag/check.h"
#include "engine/common/error.h"

namespace ds::diag {
namespace {

struct Pattern {
  std::shared_ptr<const RE2> re;
  Explanation ex;
};

const std::vector<Pattern>& patterns() {
  // RE2: matching time is linear in the text and its memory bounded, whatever is pasted (fuzzing
  // found std::regex's backtracking matcher overflowing the stack on one long line). Case-insensitive,
  // and `.` does not cross a newline, as the patterns were written for.
  auto P = [](const char* re, Explanation e) {
    RE2::Options o;
    o.set_case_sensitive(false);
    o.set_never_capture(true);
    o.set_log_errors(false);
    auto compiled = std::make_shared<const RE2>(re, o);
    DS_CHECK(compiled->ok(), "dsdiag explain pattern for '{}' does not compile: {}", e.key,
             compiled->error());
    return Pattern{std::move(compiled), std::move(e)};
  };
  static const std::vector<Pattern> all = {
      P(R"(errno:?\s*98|address already in use|failed to bind)",
        {"port_in_use",
         "The store's port (MASTER_PORT) is already taken on the master's node",
         {"A stale process of an earlier job still holds MASTER_PORT",
          "A second job on the same node uses the same MASTER_PORT (29500 is everyone's default)",
          "Two launchers on one node both started a store"},
         {"net.master_port_free"}}),
      P(R"(client socket has timed out|timed out.*trying to connect|connection refused|econnrefused|connect\(\) timed out)",
        {"master_unreachable",
         "Clients cannot connect to the store at MASTER_ADDR:MASTER_PORT",
         {"MASTER_ADDR is unreachable from this node, or points at the wrong NIC (docker/private address)",
          "MASTER_ADDR resolves to 127.0.x.x in a multi-node job",
          "Rank 0 has not started, crashed, or listens on another MASTER_PORT", "A firewall drops the port"},
         {"net.master_addr_resolves", "net.master_reachable", "net.interfaces", "world.rendezvous"}}),
      P(R"(waiting for clients|clients joined|ranks that never joined)",
        {"world_incomplete",
         "Rank 0 waited for clients that never came",
         {"WORLD_SIZE is larger than the number of processes started (nnodes x nproc-per-node)",
          "Some nodes never started, or started with another MASTER_ADDR/MASTER_PORT",
          "Some ranks crashed before reaching init_distributed"},
         {"env.world_size_product", "env.rank_range", "world.rendezvous", "net.master_reachable"}}),
      P(R"(duplicate gpu detected)",
        {"duplicate_gpu",
         "Two ranks use the same GPU",
         {"LOCAL_RANK is wrong or missing, so two ranks picked the same device",
          "CUDA_VISIBLE_DEVICES restricts every rank to the same GPU", "More ranks per node than GPUs"},
         {"world.gpu_unique", "gpu.local_rank_device", "gpu.visible_devices", "env.launcher_vars"}}),
      P(R"(invalid device ordinal)",
        {"invalid_device_ordinal",
         "A rank asked for a GPU index that does not exist",
         {"LOCAL_RANK >= the number of visible devices (more ranks per node than GPUs)",
          "CUDA_VISIBLE_DEVICES hides devices (or is malformed and truncated)"},
         {"gpu.local_rank_device", "gpu.visible_devices", "env.rank_range"}}),
      P(R"(unable to find address for)",
        {"gloo_ifname",
         "Gloo cannot find the interface named in GLOO_SOCKET_IFNAME",
         {"GLOO_SOCKET_IFNAME names an interface that does not exist or is down on this node",
          "GLOO_SOCKET_IFNAME uses NCCL syntax (^lo, =eth0), which Gloo does not accept"},
         {"net.gloo_socket_ifname", "net.interfaces"}}),
      P(R"(unhandled system error)",
        {"nccl_system_error",
         "NCCL hit a system call failure (shared memory, sockets, devices)",
         {"/dev/shm is too small (a container default of 64 MiB) for NCCL's shared-memory segments",
          "NCCL_SOCKET_IFNAME / NCCL_IB_HCA select no usable interface", "Low memlock or nofile ulimits"},
         {"system.shm_size", "net.nccl_socket_ifname", "net.nccl_ib_hca", "system.ulimits"}}),
      P(R"(watchdog caught collective operation timeout|collective operation timeout|workNCCL\(|failed to pass monitoredbarrier|ranks that never arrived)",
        {"collective_timeout",
         "A collective timed out (the watchdog fired)",
         {"A rank died or was stopped (OOM killer, a crash) and the others wait for it",
          "Ranks issued different collectives or in a different order (run with DS_DISTRIBUTED_DEBUG=DETAIL)",
          "A very slow or broken link between two nodes",
          "Debug-only NCCL settings (NCCL_P2P_DISABLE, NCCL_ALGO, ...) left in production",
          "To learn which rank stopped the others: run `dsdiag hang` on every rank's Flight Recorder dump "
          "(set TORCH_FR_DUMP_ON_TIMEOUT=1 and TORCH_NCCL_ASYNC_ERROR_HANDLING=3 in the job; docs/hangs.md)"},
         {"world.smoke_allreduce", "world.link_matrix", "nccl.debug_vars", "world.versions_equal"}}),
      P(R"(environment variable (rank|world_size|master_addr|master_port|local_rank) expected)",
        {"missing_launcher_vars",
         "The launcher's variables are missing",
         {"The script was started with python/./prog instead of dsrun, torchrun, mpirun or srun",
          "A job script exports only some of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT",
          "An MPI launcher was expected to fill them (auto MPI discovery) but is not the one that started "
          "the job"},
         {"env.launcher_vars", "env.world_info", "mpi.launcher"}}),
      P(R"(wait timeout after \d+ ?ms)", {"store_wait_timeout",
                                          "A store wait ran out: some rank never set the key",
                                          {"A rank is missing, slow to start or crashed",
                                           "Ranks disagree on the job (a stray process of another job)"},
                                          {"world.rendezvous", "world.gather", "net.master_reachable"}}),
      P(R"(no socket interface found|nccl_socket_ifname|bootstrap.*no.*interface)",
        {"nccl_ifname",
         "NCCL found no usable socket interface",
         {"NCCL_SOCKET_IFNAME names interfaces that are missing or down",
          "Its syntax is wrong (=^x instead of ^=x)"},
         {"net.nccl_socket_ifname", "net.interfaces"}}),
      P(R"(driver version is insufficient|cuda driver version is insufficient)",
        {"driver_too_old",
         "The NVIDIA driver is older than the CUDA runtime",
         {"The node's driver was not upgraded with the toolkit"},
         {"gpu.driver_version", "world.versions_equal"}}),
      P(R"(libcuda\.so[^ ]*: cannot open|no cuda-capable device|cuda_error_no_device|found no nvidia driver)",
        {"no_gpu",
         "CUDA finds no driver or device",
         {"No NVIDIA driver on this node (or the container lacks --gpus)",
          "CUDA_VISIBLE_DEVICES hides every device"},
         {"gpu.libcuda", "gpu.visible_devices", "gpu.devices"}}),
      P(R"(libnccl\.so[^ ]*: cannot open|nccl version mismatch|ncclInvalidUsage|ncclInternalError)",
        {"nccl_library",
         "NCCL is missing or not the one expected",
         {"libnccl is not installed or not on the loader path",
          "A different libnccl than the header version shadows it", "Nodes run different NCCL versions"},
         {"nccl.version", "world.versions_equal"}}),
      P(R"(unrecognized arguments?:.*--(master|nproc|nnodes|node)[-_]|--local[-_]rank)",
        {"launcher_flag_misplaced",
         "A launcher flag reached the script",
         {"The flag was written after the script name, so the launcher passed it to the script (e.g. "
          "--master_port)",
          "The launcher passes --local_rank and the script accepts only --local-rank (or the reverse)"},
         {"env.launcher_flags"}}),
  };
  return all;
}

}  // namespace

const std::vector<Explanation>& explanations() {
  static const std::vector<Explanation> all = [] {
    std::vector<Explanation> v;
    for (const auto& p : patterns()) v.push_back(p.ex);
    return v;
  }();
  return all;
}

std::vector<Explanation> explain(const std::string& text) {
  std::vector<Explanation> out;
  for (const auto& p : patterns()) {
    if (RE2::PartialMatch(text, *p.re)) out.push_back(p.ex);
  }
  return out;
}

std::string formatExplanations(const std::string& text, const std::vector<Explanation>& found) {
  if (found.empty()) {
    return "dsdiag explain: no known pattern matches this text.\n"
           "Run `dsdiag` (or `dsdiag --world` under your launcher) to check the node and the job; "
           "`dsdiag --list` shows every check.\n";
  }
  std::string out;
  for (const auto& e : found) {
    out += fmt::format("{} [{}]\n  Likely causes:\n", e.title, e.key);
    for (const auto& c : e.causes) out += "    - " + c + "\n";
    out += fmt::format(
        "  Confirm with: dsdiag --only {}{}\n\n", join(e.checks, ","),
        std::any_of(e.checks.begin(), e.checks.end(), [](const auto& c) { return c.rfind("world.", 0) == 0; })
            ? "  (world.* checks need --world under the job's launcher)"
            : "");
  }
  return out;
}

}  // namespace ds::diag
