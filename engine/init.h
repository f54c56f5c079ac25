// init_distributed: DeepSpeed's deepspeed.comm.init_distributed in C++ (REFERENCE.md §1).
//
// It discovers who this process is (engine/env), picks the accelerator (engine/accelerator), joins
// the rendezvous store (engine/store) and returns the World every tool runs on. The process group
// on the chosen backend is added to World by the comm module.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/accelerator/accelerator.h"
#include "engine/comm/process_group.h"
#include "engine/env/deepspeed_view.h"
#include "engine/env/env_source.h"
#include "engine/env/init_plan.h"
#include "engine/env/world_info.h"
#include "engine/store/store.h"

namespace ds {

struct StoreOnly;

struct InitOptions {
  // nccl, gloo, mpi or shm; empty means the accelerator's own (nccl on cuda, gloo on cpu).
  std::string distBackend;
  bool autoMpiDiscovery = true;
  int distributedPort = 29500;
  // Rank 0 logs what it discovered and chose.
  bool verbose = true;
  // Empty: DEEPSPEED_TIMEOUT minutes, or 10 minutes.
  std::optional<std::chrono::milliseconds> timeout;
  // env:// (the default when empty), tcp://host:port or file:///path.
  std::string initMethod;
  // Empty: true unless already initialised. false with nothing initialised is a ConfigError.
  std::optional<bool> distInitRequired;
  // Explicit rank and world size; -1 means "from the launcher".
  int rank = -1;
  int worldSize = -1;
  // A store this process already joined with connectStore() (fleet mode): initDistributed then
  // uses it and its discovery instead of connecting again. Not owned; must outlive the call.
  const StoreOnly* joined = nullptr;
  // Empty: DS_DISCOVERY (dsperf or deepspeed), else dsperf.
  std::optional<Discovery> discovery;
  // Asked once a second while the rendezvous waits for ranks: a non-empty reason (dsdiag's fleet:
  // "the heartbeats name rank 22 frozen") ends the wait at once with a TimeoutError that quotes it
  // and lists the ranks that never joined, instead of waiting out the whole timeout.
  std::function<std::string()> stopWaiting;
};

// The job's store without the rendezvous and without a process group: what dsdiag's fleet mode
// needs, since it must not depend on every rank arriving, nor on any backend's full-mesh connect.
// Discovery (and MPI resolution) as initDistributed's; rank 0 hosts the server as there.
struct StoreOnly {
  env::WorldInfo info;
  std::shared_ptr<store::Store> store;
  std::chrono::milliseconds timeout{0};
  // Opens another client connection to the same store (a heartbeat thread's own connection).
  std::function<std::shared_ptr<store::Store>()> client;
};
// Throws as initDistributed does for bad configuration (ConfigError) or an unreachable store
// (IoError, TimeoutError). `loopbackOnly` makes rank 0's server listen on 127.0.0.1 only (every rank
// on one host: dsrun --standalone).
StoreOnly connectStore(const InitOptions& options = {}, bool loopbackOnly = false);

// torchrun's convention (torch.distributed.rendezvous): with TORCHELASTIC_USE_AGENT_STORE=True the
// elastic agent hosts a c10d TCPStore at MASTER_ADDR:MASTER_PORT and every rank, rank 0 included,
// is only its client, under the key prefix "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>".
// Exactly "True" counts, as in torch.
bool agentHostsStore(const env::EnvSource& env);
// The agent store's key prefix for this restart attempt (empty when the agent hosts no store).
std::string agentStorePrefix(const env::EnvSource& env);

class World {
 public:
  World(env::WorldInfo info, accel::Selection accel, std::string backend, std::string initMethod,
        std::chrono::milliseconds timeout, std::shared_ptr<store::Store> store);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  const env::WorldInfo& info() const { return info_; }
  int rank() const { return info_.rank.value; }
  int worldSize() const { return info_.worldSize.value; }
  int localRank() const { return info_.localRank.value; }
  accel::Accelerator& accelerator() { return *accel_.accelerator; }
  const accel::Selection& acceleratorSelection() const { return accel_; }
  const std::string& backend() const { return backend_; }
  const std::string& initMethod() const { return initMethod_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The job's rendezvous store, shared by every rank. Keys under "init/" and "ds/" are taken.
  store::Store& store() { return *store_; }
  std::shared_ptr<store::Store> sharedStore() { return store_; }
  // The default process group on the chosen backend.
  comm::ProcessGroup& pg() { return *pg_; }
  void setProcessGroup(std::unique_ptr<comm::ProcessGroup> pg) { pg_ = std::move(pg); }

  // A store barrier across all ranks. Blocks up to the world's timeout; a TimeoutError names how many
  // ranks arrived. Every rank must call barriers in the same order.
  void barrier();

  // Waits (at most `bound`) for every rank to reach shutdown, so that rank 0, which hosts the store
  // server, does not take it away while others still use it. Called by destroyProcessGroup().
  void shutdown(std::chrono::milliseconds bound = std::chrono::seconds(30));

 private:
  env::WorldInfo info_;
  accel::Selection accel_;
  std::string backend_;
  std::string initMethod_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<store::Store> store_;
  // Declared after the store: destroyed first, since it uses the store.
  std::unique_ptr<comm::ProcessGroup> pg_;
  int barrierCount_ = 0;
  bool shutDown_ = false;
};

// Creates the World, or returns the existing one ("already initialized", as DeepSpeed). Collective:
// every rank of the job calls it. Throws ConfigError for bad configuration, TimeoutError when ranks
// do not all join within the timeout (naming the missing ranks), IoError when the store is
// unreachable.
std::shared_ptr<World> initDistributed(const InitOptions& options = {});
bool isInitialized();
// The current World; throws ConfigError when none.
std::shared_ptr<World> currentWorld();
// Shuts the World down and forgets it; a later initDistributed creates a new one.
void destroyProcessGroup();

// What initDistributed would conclude from this process's environment and these options, without
// contacting anything: no store, no MPI_Init, no process group (`dsbench world --dry-run`). Throws
// the ConfigErrors initDistributed would throw for the same configuration.
InitPlan planInit(const InitOptions& options = {});

// The discovery rules these options select (the option, else DS_DISCOVERY, else dsperf's).
Discovery discoveryFor(const InitOptions& options, const env::EnvSource& env);
// discoverWorld under the rules the options select; explicit arguments (rank, world_size, a tcp://
// init_method) win under both, as torch's init_process_group takes them over the environment.
// init_distributed, planInit and dsdiag all call it. Throws ConfigError as discoverWorld does.
env::WorldInfo discoverWorldFor(const InitOptions& options, const env::EnvSource& env);
// DeepSpeed's view of this environment with these options (dsbench world --dry-run, dsdiag).
env::DeepSpeedView deepspeedViewFor(const InitOptions& options, const env::EnvSource& env);

// Parsed init_method.
struct InitMethod {
  enum class Kind { kEnv, kTcp, kFile } kind = Kind::kEnv;
  std::string host;
  int port = 0;
  std::string path;
};
// Throws ConfigError naming the text and the accepted forms.
InitMethod parseInitMethod(const std::string& text);

// DEEPSPEED_TIMEOUT minutes, read with Python's int() as DeepSpeed does ("1_0" and " 10 " are 10),
// or 10 minutes. Throws ConfigError where int() fails, and for 0 or less, which DeepSpeed passes on
// to torch as a timeout that expires at once.
std::chrono::milliseconds defaultTimeout(const env::EnvSource& env);

// The backends dist_backend accepts.
const std::vector<std::string>& knownBackends();

}  // namespace ds
