#include "engine/env/deepspeed_view.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <climits>

#include "engine/common/error.h"
#include "engine/env/launchers.h"
#include "engine/env/slurm.h"
#include "engine/host/net.h"

namespace ds::env {
namespace {

constexpr std::array<std::string_view, 10> kAccelerators{"cuda", "cpu", "xpu",  "npu",  "mps",
                                                         "hpu",  "mlu", "sdaa", "supa", "klxpu"};
constexpr std::array<const char*, 5> kFive{"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"};

// What get_accelerator() imports for each DS_ACCELERATOR name dsperf does not build, and the
// ValueError it raises at `import deepspeed` where that is missing.
struct AcceleratorNeed {
  std::string_view name;
  std::string_view module;
  std::string_view message;
};
constexpr std::array<AcceleratorNeed, 8> kNeeds{{
    {"xpu", "torch.xpu (PyTorch built with XPU support)",
     "XPU_Accelerator requires PyTorch with XPU support: XPU_Accelerator requires PyTorch with XPU support "
     "(torch.xpu)."},
    {"npu", "torch_npu", "NPU_Accelerator requires torch_npu, which is not installed on this system."},
    {"mps", "torch.mps", "MPS_Accelerator requires torch.mps, which is not installed on this system."},
    {"hpu", "habana_frameworks.torch.hpu",
     "HPU_Accelerator requires habana_frameworks.torch.hpu, which is not installed on this system."},
    {"mlu", "torch_mlu", "MLU_Accelerator requires torch_mlu, which is not installed on this system."},
    {"sdaa", "torch_sdaa", "SDAA_Accelerator requires torch_sdaa, which is not installed on this system."},
    {"supa", "torch_supa", "SUPA_Accelerator requires torch_supa, which is not installed on this system."},
    {"klxpu", "torch_xmlir",
     "KLXPU_Accelerator requires torch_xmlir, which is not installed on this system."},
}};

std::string invalidLiteral(std::string_view text) {
  return "invalid literal for int() with base 10: " + pythonRepr(text);
}

// mpi4py's COMM_WORLD as the MPI library reports it under the launcher whose variables are set.
struct MpiModel {
  std::optional<long long> rank, size, localRank;
  std::string label;
};

std::optional<long long> intOf(const EnvSource& env, const char* name) {
  if (name == nullptr) return std::nullopt;
  auto v = env.get(name);
  return v ? pythonInt(*v) : std::nullopt;
}

MpiModel mpiWorld(const EnvSource& env) {
  const SlurmPlace place = slurmPlace(env);
  for (const auto& l : mpiLaunchers()) {
    auto r = env.get(l.rank);
    if (!r) continue;
    // srun without a PMI plugin starts no MPI job: MPI_Init makes each task a singleton.
    if (l.id == Launcher::kSlurm) continue;
    if ((l.id == Launcher::kMpich || l.id == Launcher::kPmix) && place == SlurmPlace::kStep &&
        env.get("SLURM_PROCID") == r) {
      auto size = intOf(env, "SLURM_STEP_NUM_TASKS");
      return {pythonInt(*r), size ? size : intOf(env, "SLURM_NTASKS"), intOf(env, "SLURM_LOCALID"),
              launcherLabel(env, l)};
    }
    auto local = intOf(env, l.localRank);
    if (!local) local = intOf(env, l.localRankFallback);
    return {pythonInt(*r), intOf(env, l.size), local, launcherName(l.id)};
  }
  return {0, 1, 0, "a singleton (no MPI launcher's variables: mpi4py starts a one-process MPI world)"};
}

std::string shown(const DsVar& v) { return v.text ? *v.text : "<unset>"; }

}  // namespace

std::span<const std::string_view> deepspeedAcceleratorNames() { return kAccelerators; }

std::optional<std::string> deepspeedAcceleratorModule(std::string_view name) {
  for (const auto& need : kNeeds) {
    if (need.name == name) return std::string(need.module);
  }
  return std::nullopt;
}

std::string pythonRepr(std::string_view s) {
  bool single = s.find('\'') != std::string_view::npos;
  bool dbl = s.find('"') != std::string_view::npos;
  char q = single && !dbl ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

DeepSpeedView deepspeedView(const EnvSource& env, const DeepSpeedOptions& o) {
  DeepSpeedView v;
  auto fail = [&](std::string stage, std::string type, std::string message, std::string unless = "") {
    v.failure =
        DeepSpeedView::Failure{std::move(stage), std::move(type), std::move(message), std::move(unless)};
    return v;
  };

  // --- import deepspeed: constants.py reads DEEPSPEED_TIMEOUT, then get_accelerator() runs ---
  long long minutes = 10;
  if (auto t = env.get("DEEPSPEED_TIMEOUT")) {
    auto m = pythonInt(*t);
    if (!m) return fail("import", "ValueError", invalidLiteral(*t));
    minutes = *m;
    if (minutes <= 0) {
      v.warnings.push_back(fmt::format(
          "DEEPSPEED_TIMEOUT={} passes a {}-second timeout to torch: every rendezvous and collective times "
          "out at "
          "once. DeepSpeed accepts it without a word; set a positive number of minutes (the default is 10).",
          pythonRepr(*t), minutes * 60));
    }
  }
  v.timeoutSeconds =
      minutes > LLONG_MAX / 60 ? LLONG_MAX : (minutes < LLONG_MIN / 60 ? LLONG_MIN : minutes * 60);

  if (auto a = env.get("DS_ACCELERATOR")) {
    v.acceleratorMethod = "override";
    v.accelerator = *a;
    if (*a == "cuda") {
      v.backend = "nccl";
      if (!o.cudaUsable) {
        v.warnings.push_back(
            "DS_ACCELERATOR=cuda: DeepSpeed takes it without checking for a GPU, and no usable GPU is here, "
            "so the "
            "job fails later, at the first CUDA call or at NCCL's init. Unset DS_ACCELERATOR on CPU nodes "
            "(or set "
            "cpu).");
      }
    } else if (*a == "cpu") {
      v.backend = "gloo";
    } else {
      for (const auto& need : kNeeds) {
        if (*a == need.name)
          return fail("import", "ValueError", std::string(need.message), std::string(need.module));
      }
      v.accelerator.clear();
      std::vector<std::string> quoted;
      for (auto n : kAccelerators) quoted.push_back(fmt::format("'{}'", n));
      return fail("import", "ValueError",
                  fmt::format("DS_ACCELERATOR must be one of [{}]. Value \"{}\" is not supported",
                              fmt::join(quoted, ", "), *a));
    }
  } else {
    v.acceleratorMethod = "auto detect";
    v.accelerator = o.cudaUsable ? "cuda" : "cpu";
    v.backend = o.cudaUsable ? "nccl" : "gloo";
  }

  // --- init_distributed: init_deepspeed_backend reads int(RANK) and int(WORLD_SIZE) first ---
  for (const char* name : {"RANK", "WORLD_SIZE"}) {
    if (auto t = env.get(name); t && !pythonInt(*t))
      return fail("init_distributed", "ValueError", invalidLiteral(*t));
  }
  DsVar* vars[] = {&v.rank, &v.worldSize, &v.masterAddr, &v.masterPort, &v.localRank};
  for (size_t i = 0; i < kFive.size(); ++i) {
    *vars[i] = {env.get(kFive[i]), kFive[i]};
    if (!vars[i]->text) v.missing.emplace_back(kFive[i]);
  }
  if (auto n = env.get("NCCL_SOCKET_IFNAME")) v.ncclSocketIfname = {*n, "NCCL_SOCKET_IFNAME"};
  auto need = [&](const char* name) -> std::optional<std::string> { return env.get(name); };
  auto keyError = [&](const char* name) { return fail("init_distributed", "KeyError", pythonRepr(name)); };

  const std::string missingText =
      fmt::format("{} {} not set", fmt::join(v.missing, ", "), v.missing.size() == 1 ? "is" : "are");
  if (v.missing.empty()) {
    v.path = "env";
    v.why = "all five (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK) are set";
  } else if (!o.autoMpiDiscovery) {
    v.path = "env_no_discovery";
    v.why = missingText + " and auto_mpi_discovery is off";
  } else if (env.get("AZUREML_EXPERIMENT_ID") && !env.get("DLTS_JOB_ID")) {
    v.path = "azureml";
    v.why = missingText + " inside AzureML (AZUREML_EXPERIMENT_ID set, no DLTS_JOB_ID)";
    auto r = need("OMPI_COMM_WORLD_RANK");
    if (!r) return keyError("OMPI_COMM_WORLD_RANK");
    auto s = need("OMPI_COMM_WORLD_SIZE");
    if (!s) return keyError("OMPI_COMM_WORLD_SIZE");
    v.rank = {r, "OMPI_COMM_WORLD_RANK (AzureML)"};
    v.worldSize = {s, "OMPI_COMM_WORLD_SIZE (AzureML)"};
    auto ls = need("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!ls) return keyError("OMPI_COMM_WORLD_LOCAL_SIZE");
    auto lsv = pythonInt(*ls);
    if (!lsv) return fail("init_distributed", "ValueError", invalidLiteral(*ls));
    auto sv = pythonInt(*s);
    if (!sv) return fail("init_distributed", "ValueError", invalidLiteral(*s));
    if (*lsv != *sv) {
      auto m = need("AZ_BATCH_MASTER_NODE");
      if (!m) return keyError("AZ_BATCH_MASTER_NODE");
      v.masterAddr = {m->substr(0, m->find(':')),
                      "AZ_BATCH_MASTER_NODE (AzureML, several nodes: its host part)"};
      if (!v.masterPort.text)
        v.masterPort = {"6105", "AzureML's default on several nodes (MASTER_PORT unset)"};
    } else {
      auto m = need("AZ_BATCHAI_MPI_MASTER_NODE");
      if (!m) return keyError("AZ_BATCHAI_MPI_MASTER_NODE");
      v.masterAddr = {*m, "AZ_BATCHAI_MPI_MASTER_NODE (AzureML, one node)"};
      v.masterPort = {"54965", "AzureML on one node: always 54965"};
    }
    if (o.verbose && !env.get("NCCL_SOCKET_IFNAME")) return keyError("NCCL_SOCKET_IFNAME");
    v.ncclSocketIfname = {"^docker0,lo", "AzureML: DeepSpeed always sets it"};
    auto lr = need("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!lr) return keyError("OMPI_COMM_WORLD_LOCAL_RANK");
    v.localRank = {lr, "OMPI_COMM_WORLD_LOCAL_RANK (AzureML)"};
  } else if (env.get("SM_TRAINING_ENV")) {
    v.path = "sagemaker";
    v.why = missingText + " inside SageMaker (SM_TRAINING_ENV set)";
    const std::pair<DsVar*, const char*> from[] = {{&v.rank, "OMPI_COMM_WORLD_RANK"},
                                                   {&v.localRank, "OMPI_COMM_WORLD_LOCAL_RANK"},
                                                   {&v.worldSize, "OMPI_COMM_WORLD_SIZE"}};
    for (auto [var, name] : from) {
      auto t = need(name);
      if (!t) return keyError(name);
      *var = {t, fmt::format("{} (SageMaker)", name)};
    }
    if (o.verbose) {
      for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
        if (!env.get(name)) return keyError(name);
      }
    }
  } else {
    v.path = "mpi_discovery";
    v.why = missingText;
    v.mpi4pyNeeded = true;
    MpiModel m = mpiWorld(env);
    v.mpiWorld = m.label;
    auto text = [](const std::optional<long long>& x) {
      return x ? std::optional<std::string>(std::to_string(*x)) : std::nullopt;
    };
    v.rank = {text(m.rank), fmt::format("MPI discovery: mpi4py's rank ({})", m.label)};
    v.worldSize = {text(m.size), fmt::format("MPI discovery: mpi4py's size ({})", m.label)};
    v.localRank = {text(m.localRank), "MPI discovery: lower ranks with this host's processor name"};
    v.masterAddr = {std::nullopt, "MPI discovery: rank 0's first `hostname -I` address, broadcast"};
    v.masterAddrFromMpiRank0 = true;
    v.masterPort = {std::to_string(o.distributedPort), "MPI discovery: distributed_port"};
  }

  // --- after the patch: int(os.getenv('RANK', '0')), then torch's env:// handler ---
  if (v.rank.text && !pythonInt(*v.rank.text))
    return fail("init_distributed", "ValueError", invalidLiteral(*v.rank.text));
  const bool mpi = v.path == "mpi_discovery";
  auto envVar = [&](const DsVar& var, const char* name, bool numeric,
                    std::optional<long long>* out) -> std::optional<DeepSpeedView> {
    if (mpi && !var.text && name != std::string_view("MASTER_ADDR")) return std::nullopt;  // MPI answers
    if (mpi && name == std::string_view("MASTER_ADDR")) return std::nullopt;
    if (!var.text || var.text->empty()) {
      return fail(
          "init_distributed", "ValueError",
          fmt::format("Error initializing torch.distributed using env:// rendezvous: environment variable {} "
                      "expected, but not set",
                      name));
    }
    if (numeric) {
      auto x = pythonInt(*var.text);
      if (!x) return fail("init_distributed", "ValueError", invalidLiteral(*var.text));
      *out = *x;
    }
    return std::nullopt;
  };
  if (auto f = envVar(v.rank, "RANK", true, &v.rankValue)) return *f;
  if (auto f = envVar(v.worldSize, "WORLD_SIZE", true, &v.worldSizeValue)) return *f;
  if (auto f = envVar(v.masterAddr, "MASTER_ADDR", false, nullptr)) return *f;
  if (auto f = envVar(v.masterPort, "MASTER_PORT", true, &v.masterPortValue)) return *f;

  if (v.rankValue && v.worldSizeValue && (*v.rankValue < 0 || *v.rankValue >= *v.worldSizeValue)) {
    v.warnings.push_back(
        fmt::format("DeepSpeed hands RANK={} (from {}) with WORLD_SIZE={} to torch, which does not check it: "
                    "rendezvous waits "
                    "for a rank that cannot exist until the timeout. Ranks run from 0 to WORLD_SIZE-1.",
                    *v.rankValue, v.rank.source, *v.worldSizeValue));
  }
  if (v.masterPortValue && (*v.masterPortValue < 1 || *v.masterPortValue > 65535)) {
    v.warnings.push_back(
        fmt::format("DeepSpeed hands MASTER_PORT={} to torch, which is not a TCP port: the store cannot "
                    "listen or connect. "
                    "Use 1 to 65535.",
                    *v.masterPortValue));
  }
  return v;
}

std::vector<DsDifference> deepspeedDifferences(const DeepSpeedView& v, const WorldInfo* w,
                                               const std::string& dsperfError, const EnvSource& env) {
  std::vector<DsDifference> out;
  if (v.failure) {
    std::string what = fmt::format("{}: {}", v.failure->type, v.failure->message);
    std::string cond =
        v.failure->unless.empty() ? "" : fmt::format(" (unless {} is installed)", v.failure->unless);
    out.push_back({"outcome", what, w ? "runs" : dsperfError,
                   fmt::format("DeepSpeed fails at {}{} with {}{}.",
                               v.failure->stage == "import" ? "`import deepspeed`" : "init_distributed()",
                               cond, what, w ? ", while dsperf's rules start the job" : "")});
    return out;
  }
  if (v.mpi4pyNeeded) {
    out.push_back(
        {"mpi4py", "imported", "not needed",
         fmt::format("DeepSpeed runs MPI discovery here ({}), which imports mpi4py: without it, "
                     "init_distributed fails with ModuleNotFoundError. Export all five of RANK, WORLD_SIZE, "
                     "MASTER_ADDR, MASTER_PORT and LOCAL_RANK to skip it.",
                     v.why)});
  }
  if (!w) {
    out.push_back(
        {"outcome", "runs", dsperfError,
         fmt::format("DeepSpeed starts here (path {}), while dsperf's rules stop: {}", v.path, dsperfError)});
    return out;
  }
  auto because = [&] {
    if (v.path == "mpi_discovery") {
      return fmt::format("because {} (DeepSpeed then runs MPI discovery and overwrites all five)", v.why);
    }
    if (v.path == "azureml" || v.path == "sagemaker") {
      return fmt::format("because {} (DeepSpeed then takes them from {}'s variables)", v.why,
                         v.path == "azureml" ? "AzureML" : "SageMaker");
    }
    return std::string("because that is what torch's env:// reads");
  };
  auto compare = [&](const char* field, const DsVar& ds, std::string mine, const std::string& mineSource) {
    std::string theirs = ds.text ? *ds.text : "";
    if (ds.text && *ds.text == mine) return;
    if (!ds.text && std::string_view(field) == "MASTER_ADDR" && v.masterAddrFromMpiRank0) {
      theirs = "<rank 0's first `hostname -I` address>";
      if (w->needsMpiMasterAddr) return;  // both ask MPI for rank 0's address
      if (v.worldSizeValue == 1 || (v.rank.text && v.rank.text == std::optional<std::string>("0"))) {
        theirs = net::firstHostAddress();
        if (theirs == mine) return;
      }
    } else if (!ds.text) {
      if (w->needsMpiLocalRanks) return;
      theirs = "<counted by MPI>";
    }
    auto orig = env.get(field);
    std::string sentence =
        orig && *orig != theirs
            ? fmt::format("DeepSpeed will replace {}={} with {}, {}; dsperf uses {} (from {}).", field, *orig,
                          theirs, because(), mine, mineSource)
            : fmt::format("DeepSpeed uses {}={} (from {}); dsperf uses {} (from {}).", field, theirs,
                          ds.source, mine, mineSource);
    out.push_back({field, theirs, mine, sentence});
  };
  compare("RANK", v.rank, std::to_string(w->rank.value), w->rank.source);
  compare("WORLD_SIZE", v.worldSize, std::to_string(w->worldSize.value), w->worldSize.source);
  if (v.localRank.text || v.path == "mpi_discovery") {
    compare("LOCAL_RANK", v.localRank, std::to_string(w->localRank.value), w->localRank.source);
  }
  compare("MASTER_ADDR", v.masterAddr,
          w->needsMpiMasterAddr ? "<rank 0's address, via MPI>" : w->masterAddr.value, w->masterAddr.source);
  compare("MASTER_PORT", v.masterPort, std::to_string(w->masterPort.value), w->masterPort.source);
  if (v.ncclSocketIfname.text && env.get("NCCL_SOCKET_IFNAME") != v.ncclSocketIfname.text) {
    out.push_back(
        {"NCCL_SOCKET_IFNAME", *v.ncclSocketIfname.text, shown({env.get("NCCL_SOCKET_IFNAME"), ""}),
         fmt::format("DeepSpeed sets NCCL_SOCKET_IFNAME={} ({}), replacing {}.", *v.ncclSocketIfname.text,
                     v.ncclSocketIfname.source, shown({env.get("NCCL_SOCKET_IFNAME"), ""}))});
  }
  return out;
}

WorldInfo worldFromDeepSpeed(const DeepSpeedView& v, const EnvSource& env) {
  if (v.failure) {
    std::string cond =
        v.failure->unless.empty()
            ? ""
            : fmt::format(" where {} is not installed; dsperf does not support that accelerator",
                          v.failure->unless);
    throw ConfigError(
        fmt::format("with --discovery deepspeed, dsperf follows deepspeed.init_distributed(), which fails "
                    "here at {}{}: {}: {}. "
                    "Fix the variable it names (dsdiag --only env.deepspeed shows every difference), or use "
                    "--discovery dsperf.",
                    v.failure->stage == "import" ? "`import deepspeed`" : "init_distributed()", cond,
                    v.failure->type, v.failure->message));
  }
  WorldInfo w;
  const LauncherDetection detected = detectLaunchers(env, v.path == "mpi_discovery");
  w.launcher = detected.launcher ? detected.launcher->id : Launcher::kEnv;
  auto needInt = [&](const std::optional<long long>& x, const DsVar& var, const char* name) -> int {
    if (!x) {
      throw ConfigError(
          fmt::format("with --discovery deepspeed, {} comes from MPI ({}), which dsperf cannot ask without "
                      "starting MPI for it. "
                      "Export {} (and the rest of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK), "
                      "or use --discovery "
                      "dsperf.",
                      name, var.source, name));
    }
    if (*x < INT_MIN || *x > INT_MAX) throw ConfigError(fmt::format("{}={} is out of range.", name, *x));
    return static_cast<int>(*x);
  };
  w.rank = {needInt(v.rankValue, v.rank, "RANK"), v.rank.source};
  w.worldSize = {needInt(v.worldSizeValue, v.worldSize, "WORLD_SIZE"), v.worldSize.source};
  if (v.rankValue && *v.rankValue < 0) {
    throw ConfigError(
        fmt::format("RANK={} (from {}) is negative: DeepSpeed passes it to torch, and no rank can "
                    "have it. Ranks run from 0 to WORLD_SIZE-1.",
                    *v.rankValue, v.rank.source));
  }
  if (v.localRank.text) {
    auto lr = pythonInt(*v.localRank.text);
    if (!lr || *lr < 0 || *lr > INT_MAX) {
      throw ConfigError(
          fmt::format("LOCAL_RANK={} (from {}) is not a local rank: DeepSpeed picks the device with "
                      "int(LOCAL_RANK), which fails.",
                      pythonRepr(*v.localRank.text), v.localRank.source));
    }
    w.localRank = {static_cast<int>(*lr), v.localRank.source};
  } else if (v.path == "mpi_discovery" && w.worldSize.value > 1) {
    w.needsMpiLocalRanks = true;
    w.localRank = {0, "pending: lower ranks on this host, counted through MPI"};
  } else {
    w.localRank = {0, "default: LOCAL_RANK unset (DeepSpeed reads it only to pick the device, as 0)"};
  }
  if (auto ls = env.get("LOCAL_WORLD_SIZE") ? env.get("LOCAL_WORLD_SIZE") : env.get("LOCAL_SIZE");
      ls && pythonInt(*ls) && *pythonInt(*ls) >= 1 && *pythonInt(*ls) <= w.worldSize.value) {
    w.localWorldSize = {static_cast<int>(*pythonInt(*ls)),
                        env.get("LOCAL_WORLD_SIZE") ? "LOCAL_WORLD_SIZE" : "LOCAL_SIZE"};
  } else if (detected.launcher && detected.launcher->localSize && intOf(env, detected.launcher->localSize)) {
    w.localWorldSize = {static_cast<int>(*intOf(env, detected.launcher->localSize)),
                        detected.launcher->localSize};
  } else {
    w.localWorldSize = {w.worldSize.value, "default: WORLD_SIZE (no local size given; assumes one node)"};
  }
  if (w.localWorldSize.value <= w.localRank.value) {
    w.localWorldSize = {w.localRank.value + 1, "default: LOCAL_RANK + 1 (no larger local size given)"};
  }
  if (w.worldSize.value % w.localWorldSize.value == 0) {
    w.nodeRank = {w.rank.value / w.localWorldSize.value, "derived: RANK / LOCAL_WORLD_SIZE"};
  } else {
    w.nodeRank = {0, "default (one node)"};
  }
  if (v.masterAddrFromMpiRank0) {
    if (w.worldSize.value == 1) {
      w.masterAddr = {net::firstHostAddress(),
                      "MPI discovery: this lone process's first address (`hostname -I`)"};
    } else {
      w.needsMpiMasterAddr = true;
      w.masterAddr = {"", "pending: rank 0's first address, to be broadcast through MPI"};
    }
  } else {
    w.masterAddr = {*v.masterAddr.text, v.masterAddr.source};
  }
  if (*v.masterPortValue < 1 || *v.masterPortValue > 65535) {
    throw ConfigError(
        fmt::format("MASTER_PORT={} (from {}) is not a TCP port: DeepSpeed passes it to torch, whose "
                    "store cannot use it. Use 1 to 65535.",
                    *v.masterPortValue, v.masterPort.source));
  }
  w.masterPort = {static_cast<int>(*v.masterPortValue), v.masterPort.source};
  w.jobId = discoverJobId(env);
  validateWorld(w);
  return w;
}

}  // namespace ds::env
