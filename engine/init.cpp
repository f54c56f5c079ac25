#include "engine/init.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "engine/common/backends.h"
#include "engine/common/error.h"
#include "engine/common/log.h"
#include "engine/common/progress.h"
#include "engine/env/launchers.h"
#include "engine/env/mpi_discovery.h"
#include "engine/env/slurm.h"
#include "engine/host/net.h"
#include "engine/store/barrier.h"
#include "engine/store/file_store.h"
#include "engine/store/prefix_store.h"
#include "engine/store/tcp_store.h"

namespace ds {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::mutex gMutex;
std::shared_ptr<World> gWorld;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string chooseBackend(const InitOptions& o, const accel::Accelerator& a) {
  std::string backend = o.distBackend.empty() ? a.communicationBackendName() : o.distBackend;
  const auto& known = knownBackends();
  if (std::find(known.begin(), known.end(), backend) == known.end()) {
    throw ConfigError(fmt::format("dist_backend='{}' is not a known backend; valid names are: {}.", backend,
                                  fmt::join(known, ", ")));
  }
  const auto built = comm::availableBackends();
  if (std::find(built.begin(), built.end(), backend) == built.end()) {
    throw ConfigError(
        fmt::format("dist_backend='{}' was requested, but this dsperf was built without it. "
                    "Install its library and rebuild (scripts/setup.sh installs them), or choose "
                    "another backend (this build has: {}).{}",
                    backend, fmt::join(built, ", "),
                    backend == "mpi" ? " The relocatable bundle (scripts/bundle.sh) always leaves mpi out: Open "
                                       "MPI's plugins do not work when copied to another machine."
                                     : ""));
  }
  if (backend == "nccl" && a.name() != "cuda") {
    throw ConfigError(
        fmt::format("dist_backend='nccl' needs the cuda accelerator, but this rank runs on {}. "
                    "Use gloo or mpi on CPU, or fix the GPU visibility (see dsdiag).",
                    a.name()));
  }
  return backend;
}

// The ranks (at most `limit`) whose registration is missing. Throws Error when the store is gone.
std::vector<int> missingRanks(store::Store& s, int n, size_t limit) {
  std::vector<int> missing;
  for (int r = 0; r < n && missing.size() < limit; ++r) {
    if (!s.check({fmt::format("init/rank/{}", r)}, std::chrono::seconds(5))) missing.push_back(r);
  }
  return missing;
}

std::string rankList(const std::vector<int>& ranks, size_t limit) {
  return fmt::format("{}{}", fmt::join(ranks, ", "), ranks.size() >= limit ? " (first ones)" : "");
}

// The progress line of a rank still waiting at rendezvous. Rank 0 works out who is missing and
// leaves the list in the store; the others read it there rather than each asking for every rank.
void reportRendezvousProgress(store::Store& s, const env::WorldInfo& w, double elapsed, double left,
                              const std::string& hint) {
  constexpr size_t kListed = 32;
  const int n = w.worldSize.value;
  std::int64_t count = 0;
  std::string missing;
  try {
    count = s.add("init/", 0, std::chrono::seconds(5));
    if (w.rank.value == 0) {
      missing = rankList(missingRanks(s, n, kListed), kListed);
      s.set("init/missing", store::toBytes(missing), std::chrono::seconds(5));
    } else if (s.check({"init/missing"}, std::chrono::seconds(5))) {
      missing = store::toString(s.get("init/missing", std::chrono::seconds(5)));
    } else {
      missing = "not listed yet (rank 0 lists them)";
    }
  } catch (const Error& e) {
    missing = fmt::format("unknown (the store did not answer: {})", e.what());
  }
  log::warn(
      "rendezvous: still waiting after {:.0f} s at {}: {}/{} ranks joined; missing ranks: {}; {:.0f} s left "
      "before the timeout. A missing rank was not started, died before joining, or cannot reach the store{}.",
      elapsed, s.describe(), count, n, missing, left, hint.empty() ? "" : "; " + hint);
}

// Every rank registers itself, then counts in with add("init/", 1) as in c10d; the last to arrive
// releases the others. While it waits, each rank prints a progress line on ProgressSchedule's
// plan; on timeout the registrations tell which ranks never came. `hint` is added to those lines.
// `stopWaiting` (optional) is asked about once a second; a reason from it ends the wait early.
void joinRendezvous(store::Store& s, const env::WorldInfo& w, milliseconds timeout, const std::string& hint,
                    const std::function<std::string()>& stopWaiting) {
  const int n = w.worldSize.value;
  const int rank = w.rank.value;
  auto t0 = Clock::now();
  s.set(fmt::format("init/rank/{}", rank),
        store::toBytes(fmt::format("{}:{}:{}", net::hostName(), getpid(), n)));
  std::int64_t joined = s.add("init/", 1);
  if (joined == n) s.set("init/done", store::toBytes("1"));
  const auto deadline = t0 + timeout;
  ProgressSchedule progress(t0);
  // How many came and which did not, from the registrations (the store may be gone by now).
  auto whoCame = [&] {
    std::int64_t count = 0;
    std::vector<int> missing;
    try {
      count = s.add("init/", 0, std::chrono::seconds(5));
      missing = missingRanks(s, n, 64);
    } catch (const Error&) {
      // The store itself is gone; report what we know.
    }
    return fmt::format("{}/{} clients joined.{}", count, n,
                       missing.empty() ? "" : fmt::format(" Ranks that never joined: {}.", rankList(missing, 64)));
  };
  bool timedOut = false;
  for (;;) {
    auto sliceEnd = std::min(deadline, progress.next());
    if (stopWaiting) sliceEnd = std::min(sliceEnd, Clock::now() + std::chrono::seconds(1));
    auto slice = std::chrono::ceil<milliseconds>(sliceEnd - Clock::now());
    try {
      s.wait({"init/done"}, std::max(slice, milliseconds(1)));
      break;
    } catch (const TimeoutError&) {
      if ((timedOut = Clock::now() >= deadline)) break;
    }
    if (progress.due()) {
      progress.advance();
      reportRendezvousProgress(s, w, progress.elapsedSeconds(), std::chrono::duration<double>(deadline - Clock::now()).count(), hint);
    }
    if (!stopWaiting) continue;
    if (std::string why = stopWaiting(); !why.empty()) {
      throw TimeoutError(fmt::format("Rank {} stopped waiting for clients at {} after {:.1f} s: {}. {}", rank,
                                     s.describe(), secondsSince(t0), why, whoCame()));
    }
  }
  if (timedOut) {
    throw TimeoutError(
        fmt::format("Timed out after {:.0f} seconds waiting for clients. {} This is "
                    "rank {}, waiting at "
                    "{}. Check that WORLD_SIZE={} matches the number of processes started, and that the "
                    "missing ranks could "
                    "reach MASTER_ADDR:MASTER_PORT (run dsdiag on their nodes){}.",
                    secondsSince(t0), whoCame(), rank, s.describe(), n, hint.empty() ? "" : "; " + hint));
  }
  // A rank started with a different WORLD_SIZE would pair up wrongly; all registrations must agree.
  for (int r = 0; r < n; ++r) {
    std::string reg = store::toString(s.get(fmt::format("init/rank/{}", r), timeout));
    auto colon = reg.rfind(':');
    if (colon != std::string::npos && reg.substr(colon + 1) != std::to_string(n)) {
      throw ConfigError(
          fmt::format("rank {} ({}) was started with WORLD_SIZE={} but this rank {} has WORLD_SIZE={}. "
                      "Every process of a job must agree on WORLD_SIZE.",
                      r, reg.substr(0, colon), reg.substr(colon + 1), rank, n));
    }
  }
}

bool isLoopbackHost(const std::string& h) {
  return h.rfind("127.", 0) == 0;  // not "localhost": it may resolve to ::1 first
}

// `client` forces a plain client connection (the process group's second connection, for heartbeats).
std::shared_ptr<store::Store> makeStore(const InitMethod& m, const env::WorldInfo& w, milliseconds timeout,
                                        const env::EnvSource& env, bool client = false, bool loopbackOnly = false) {
  if (m.kind == InitMethod::Kind::kFile) return std::make_shared<store::FileStore>(m.path, timeout);
  store::TcpStoreOptions so;
  // A loopback MASTER_ADDR (dsrun --standalone) means every rank is on this host: nothing outside
  // it needs the store, so it listens on loopback only.
  if (loopbackOnly || isLoopbackHost(w.masterAddr.value)) so.serverHost = "127.0.0.1";
  so.port = w.masterPort.value;
  // Under an agent that already hosts the store (torchelastic's convention), rank 0 only connects,
  // and the keys live under the agent's per-attempt prefix, as a torch rank's would.
  const bool agent = agentHostsStore(env);  // for tcp:// too, as in torch's rendezvous handlers
  so.isServer = !client && w.rank.value == 0 && !agent;
  so.jobId = w.jobId.value;
  so.timeout = timeout;
  if (env::slurmPlace(env) != env::SlurmPlace::kNone) {
    so.portTakenAdvice = fmt::format(
        "under Slurm, export MASTER_PORT=<a free port> in the job script (every task must see the same value){}. "
        "Other tasks of this step wait for the store until their timeout: {}.",
        w.masterPort.source.rfind("default under Slurm", 0) == 0
            ? "; the default, 15000 + the last 4 digits of SLURM_JOB_ID, collides with a job whose id ends in the "
              "same digits, or with another step of this job running at the same time"
            : "",
        env::kSrunKillHint);
  }
  auto tcp = std::make_shared<store::TcpStore>(w.masterAddr.value, so);
  if (!agent) return tcp;
  return std::make_shared<store::PrefixStore>(agentStorePrefix(env), tcp);
}

// DeepSpeed's arguments and the init_method, as discovery takes them.
env::DiscoveryOptions discoveryOptions(const InitOptions& o, const InitMethod& method) {
  env::DiscoveryOptions d;
  d.rank = o.rank;
  d.worldSize = o.worldSize;
  d.distributedPort = o.distributedPort;
  d.autoMpiDiscovery = o.autoMpiDiscovery;
  if (method.kind == InitMethod::Kind::kTcp) {
    d.masterAddr = method.host;
    d.masterPort = method.port;
  }
  return d;
}

// Discovery as init_distributed does it, MPI resolution included; logs discovery's notes.
env::WorldInfo discover(const InitOptions& o, const InitMethod& method, const env::EnvSource& env, bool& usedMpi) {
  env::WorldInfo info = discoverWorldFor(o, env);
  for (const auto& note : info.notes) log::warn("{}", note);
  usedMpi = info.needsMpiMasterAddr || info.needsMpiLocalRanks;
  env::resolveThroughMpi(info);
  return info;
}

}  // namespace

StoreOnly connectStore(const InitOptions& o, bool loopbackOnly) {
  env::ProcessEnv env;
  InitMethod method = parseInitMethod(o.initMethod);
  bool usedMpi = false;
  StoreOnly out;
  out.info = discover(o, method, env, usedMpi);
  out.timeout = o.timeout.value_or(defaultTimeout(env));
  if (out.timeout.count() <= 0) {
    throw ConfigError(fmt::format("timeout={} ms is not valid; it must be positive.", out.timeout.count()));
  }
  out.store = makeStore(method, out.info, out.timeout, env, false, loopbackOnly);
  // The clients connect to the server rank 0 hosts now; they never host one themselves.
  out.client = [method, info = out.info, timeout = out.timeout] {
    env::ProcessEnv e;
    return makeStore(method, info, timeout, e, true);
  };
  return out;
}

env::WorldInfo discoverWorldFor(const InitOptions& o, const env::EnvSource& env) {
  const InitMethod method = parseInitMethod(o.initMethod);
  if (discoveryFor(o, env) == Discovery::kDsperf) return env::discoverWorld(discoveryOptions(o, method), env);
  env::WorldInfo w = env::worldFromDeepSpeed(deepspeedViewFor(o, env), env);
  if (o.rank >= 0) w.rank = {o.rank, "argument rank"};
  if (o.worldSize >= 1) w.worldSize = {o.worldSize, "argument world_size"};
  if (method.kind == InitMethod::Kind::kTcp) {
    w.masterAddr = {method.host, "argument init_method"};
    w.masterPort = {method.port, "argument init_method"};
    w.needsMpiMasterAddr = false;
  }
  env::validateWorld(w);
  return w;
}

Discovery discoveryFor(const InitOptions& o, const env::EnvSource& env) {
  if (o.discovery) return *o.discovery;
  if (auto v = env.get("DS_DISCOVERY")) return parseDiscovery(*v, "DS_DISCOVERY");
  return Discovery::kDsperf;
}

env::DeepSpeedView deepspeedViewFor(const InitOptions& o, const env::EnvSource& env) {
  env::DeepSpeedOptions d;
  d.autoMpiDiscovery = o.autoMpiDiscovery;
  d.distributedPort = o.distributedPort;
  d.verbose = o.verbose;
  std::string why;
  d.cudaUsable = accel::tryMakeCudaAccelerator(why) != nullptr;
  return env::deepspeedView(env, d);
}

bool agentHostsStore(const env::EnvSource& env) {
  auto v = env.get("TORCHELASTIC_USE_AGENT_STORE");
  return v && *v == "True";
}

std::string agentStorePrefix(const env::EnvSource& env) {
  if (!agentHostsStore(env)) return {};
  auto attempt = env.get("TORCHELASTIC_RESTART_COUNT");
  return "/worker/attempt_" + (attempt && !attempt->empty() ? *attempt : std::string("0"));
}

const std::vector<std::string>& knownBackends() {
  static const std::vector<std::string> kNames = backendNames();
  return kNames;
}

InitPlan planInit(const InitOptions& o) {
  env::ProcessEnv env;
  InitPlan plan;
  plan.discovery = discoveryFor(o, env);
  plan.info = discoverWorldFor(o, env);
  accel::Selection accel = accel::selectAccelerator(env);
  plan.accelerator = accel.accelerator->name();
  plan.acceleratorOverridden = accel.overridden;
  plan.acceleratorReason = accel.reason;
  plan.backend = chooseBackend(o, *accel.accelerator);
  plan.timeout = o.timeout.value_or(defaultTimeout(env));
  plan.initMethod = o.initMethod.empty() ? "env://" : o.initMethod;
  return plan;
}

InitMethod parseInitMethod(const std::string& text) {
  InitMethod m;
  auto bad = [&](std::string_view why) {
    return ConfigError(
        fmt::format("init_method='{}' is not valid: {}. Use env:// (the default), "
                    "tcp://HOST:PORT or file:///ABSOLUTE/PATH.",
                    text, why));
  };
  if (text.empty() || text == "env://") return m;
  if (text.rfind("tcp://", 0) == 0) {
    std::string rest = text.substr(6);
    std::string portText;
    if (!rest.empty() && rest.front() == '[') {
      auto close = rest.find(']');
      if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
        throw bad("an IPv6 address needs the form [ADDR]:PORT");
      }
      m.host = rest.substr(1, close - 1);
      portText = rest.substr(close + 2);
    } else {
      auto colon = rest.rfind(':');
      if (colon == std::string::npos) throw bad("the port is missing");
      m.host = rest.substr(0, colon);
      portText = rest.substr(colon + 1);
    }
    if (m.host.empty()) throw bad("the host is empty");
    m.kind = InitMethod::Kind::kTcp;
    try {
      m.port = static_cast<int>(env::parseIntVar("the init_method port", portText, 1, 65535, "1 to 65535"));
    } catch (const ConfigError& e) {
      throw bad(e.what());
    }
    return m;
  }
  if (text.rfind("file://", 0) == 0) {
    m.kind = InitMethod::Kind::kFile;
    m.path = text.substr(7);
    if (m.path.empty() || m.path.front() != '/') throw bad("the file path must be absolute (file:///path)");
    return m;
  }
  throw bad("unknown scheme");
}

milliseconds defaultTimeout(const env::EnvSource& env) {
  if (auto v = env.get("DEEPSPEED_TIMEOUT")) {
    auto minutes = env::pythonInt(*v);
    if (!minutes) {
      throw ConfigError(
          fmt::format("DEEPSPEED_TIMEOUT='{}' is not a whole number of minutes: `import deepspeed` fails "
                      "on it too (Python's int() raises ValueError). Set it to minutes, e.g. 30.",
                      *v));
    }
    if (*minutes <= 0) {
      throw ConfigError(fmt::format(
          "DEEPSPEED_TIMEOUT={} gives a timeout of {} s: DeepSpeed passes it on to torch, where every "
          "rendezvous and "
          "collective then times out at once. Set a positive number of minutes (the default is 10).",
          *v, *minutes * 60));
    }
    if (*minutes > 7 * 24 * 60) {
      throw ConfigError(
          fmt::format("DEEPSPEED_TIMEOUT={} minutes is more than a week; a hung job would hold its "
                      "nodes that long. Use at most 10080.",
                      *v));
    }
    return std::chrono::minutes(*minutes);
  }
  return std::chrono::minutes(10);
}

World::World(env::WorldInfo info, accel::Selection accel, std::string backend, std::string initMethod,
             milliseconds timeout, std::shared_ptr<store::Store> store)
    : info_(std::move(info)),
      accel_(std::move(accel)),
      backend_(std::move(backend)),
      initMethod_(std::move(initMethod)),
      timeout_(timeout),
      store_(std::move(store)) {}

World::~World() = default;

void World::barrier() {
  store::storeBarrier(*store_, fmt::format("ds/barrier/{}", barrierCount_++), rank(), worldSize(), timeout_);
}

void World::shutdown(milliseconds bound) {
  if (shutDown_) return;
  shutDown_ = true;
  pg_.reset();  // stops its threads and heartbeats while the store is still there
  try {
    if (store_->add("ds/exit", 1, bound) == worldSize())
      store_->set("ds/exit/done", store::toBytes("1"), bound);
    // Rank 0 hosts the server: give the others a bounded chance to finish their last calls.
    if (rank() == 0) store_->wait({"ds/exit/done"}, bound);
  } catch (const TimeoutError&) {
    log::warn(
        "shutting down the store before every rank finished (waited {} ms); ranks still running may report "
        "a lost connection to the store.",
        bound.count());
  } catch (const Error& e) {
    log::warn("shutdown of the world did not complete cleanly: {}", e.what());
  }
}

std::shared_ptr<World> initDistributed(const InitOptions& o) {
  std::lock_guard<std::mutex> lock(gMutex);
  bool required = o.distInitRequired.value_or(gWorld == nullptr);
  if (gWorld) {
    if (gWorld->rank() == 0 && o.verbose) log::info("Distributed backend already initialized");
    return gWorld;
  }
  if (!required) {
    throw ConfigError(
        "init_distributed was called with dist_init_required=false, but the distributed backend is "
        "not initialized. Leave dist_init_required unset (or true) so that init_distributed "
        "creates it.");
  }
  env::ProcessEnv env;
  InitMethod method = parseInitMethod(o.initMethod);
  bool usedMpi = false;
  env::WorldInfo info = o.joined ? o.joined->info : discover(o, method, env, usedMpi);
  const bool talk = o.verbose && info.rank.value == 0;
  log::setRank(info.rank.value);
  if (talk && usedMpi) {
    log::info(
        "Discovered MPI settings of world_rank={}, local_rank={}, world_size={}, master_addr={}, "
        "master_port={}",
        info.rank.value, info.localRank.value, info.worldSize.value, info.masterAddr.value,
        info.masterPort.value);
  }

  accel::Selection accel = accel::selectAccelerator(env);
  if (talk) {
    log::info("Setting accelerator to {} ({})", accel.accelerator->name(),
              accel.overridden ? "override" : "auto detect");
    if (!accel.overridden && accel.accelerator->name() == "cpu") {
      log::warn(
          "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it: {}",
          accel.reason);
    }
  }
  if (accel.accelerator->name() != "cpu") accel.accelerator->setDevice(info.localRank.value);
  std::string backend = chooseBackend(o, *accel.accelerator);
  milliseconds timeout = o.timeout.value_or(defaultTimeout(env));
  if (timeout.count() <= 0) {
    throw ConfigError(fmt::format("timeout={} ms is not valid; it must be positive.", timeout.count()));
  }
  if (talk) {
    log::info("Initializing dsperf backend {} (init_method {}, world_size {}, timeout {} s)", backend,
              o.initMethod.empty() ? "env://" : o.initMethod, info.worldSize.value, timeout.count() / 1000);
    for (const auto& line : info.describe()) log::info("  {}", line);
  }

  auto t0 = Clock::now();
  auto store = o.joined ? o.joined->store : makeStore(method, info, timeout, env);
  joinRendezvous(*store, info, timeout,
                 env::slurmPlace(env) == env::SlurmPlace::kStep ? std::string(env::kSrunKillHint) : "",
                 o.stopWaiting);
  if (talk) {
    log::info("Rendezvous complete: {} rank(s) joined at {} in {:.3f} s", info.worldSize.value,
              store->describe(), secondsSince(t0));
  }
  auto world = std::make_shared<World>(std::move(info), std::move(accel), backend,
                                       o.initMethod.empty() ? "env://" : o.initMethod, timeout, store);
  comm::ProcessGroupOptions pgo;
  pgo.rank = world->rank();
  pgo.size = world->worldSize();
  pgo.store = store;
  pgo.heartbeatStore = world->worldSize() <= 1 ? nullptr
                       : o.joined                ? o.joined->client()
                                                 : makeStore(method, world->info(), timeout, env, true);
  pgo.timeout = timeout;
  // Device buffers only for a backend that reads them (nccl; mpi when CUDA-aware): gloo, shm and a
  // plain MPI move host memory, and work on a GPU node without DS_ACCELERATOR=cpu.
  pgo.device = comm::groupDevice(backend, world->accelerator().name(), world->localRank());
  pgo.world = &world->info();
  auto debug = env.get("DS_DISTRIBUTED_DEBUG");
  pgo.detailDebug = comm::detailDebugFromEnv(debug ? debug->c_str() : nullptr);
  auto t1 = Clock::now();
  world->setProcessGroup(comm::createProcessGroup(backend, pgo));
  if (talk) log::info("Process group on backend {} is up in {:.3f} s", backend, secondsSince(t1));
  gWorld = world;
  return gWorld;
}

bool isInitialized() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gWorld != nullptr;
}

std::shared_ptr<World> currentWorld() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gWorld) {
    throw ConfigError("no distributed world is initialized; call init_distributed first.");
  }
  return gWorld;
}

void destroyProcessGroup() {
  std::shared_ptr<World> w;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    w = std::move(gWorld);
  }
  if (w) w->shutdown();
}

}  // namespace ds
