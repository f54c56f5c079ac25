// FlightRecorder: the last ops of every process group of this process, in a ring buffer, written in
// PyTorch's Flight Recorder format (version "2.10", pickle protocol 2 or JSON) so that `dsdiag hang`
// reads dsperf's dumps and torch's alike, and torch's own analyzer
// (python -m torch.distributed.flight_recorder.fr_trace) reads dsperf's.
//
// One recorder per process, as in torch: every group registers (pg_config: name, desc, ranks) and
// feeds it at issue (scheduled), start and completion of each op; an op that fails or times out is
// "retired" in the state it reached. Recording takes no lock: an op's entry costs one atomic increment
// (its id) and one compare-and-swap (its slot's sequence lock) at issue, and one plain store at its
// start and at its end; no allocation, no clock read, no string formatting (names are made when a dump
// is written). Measured in docs/performance.md ("Flight recorder overhead").
//
// Variables (read once, when the first process group is made; a bad value is a ConfigError then):
//   TORCH_FR_BUFFER_SIZE, else TORCH_NCCL_TRACE_BUFFER_SIZE   entries kept (default 2000; 0: off)
//   TORCH_FR_DUMP_ON_TIMEOUT, else TORCH_NCCL_DUMP_ON_TIMEOUT 1/0: dump when an op times out
//                                                             (default 1, as torch's ProcessGroupNCCL)
//   TORCH_FR_DUMP_TEMP_FILE, else TORCH_NCCL_DEBUG_INFO_TEMP_FILE
//                         the file prefix; the dump is <prefix><rank> (default, as torch:
//                         ${XDG_CACHE_HOME:-$HOME/.cache}/torch/comm_lib_trace_rank_); its folder is
//                         made when missing
//   DS_FR_DUMP_JSON       1: also write the JSON form, beside it as <prefix><rank>.json (default 0).
//                         Off by default because torch's analyzer opens every file in the folder
//                         whose name contains the prefix with pickle.load and reads the rest of the
//                         name as the rank: a "<prefix>3.json" beside "<prefix>3" stops it
//                         (ValueError on "3.json"). `dsdiag hang` reads either form.
//
// When a dump is written (atomically: a temp file, then rename):
//   - on a timeout: the group whose op timed out dumps at once (before its diagnosis), and sets the
//     store key kDumpSignalKey to its rank; every other live rank's heartbeat thread sees the key
//     within a beat, logs "Received a dump signal due to a collective timeout from rank N ..." (as
//     torch's) and dumps too. Each process answers the signal once.
//   - on a signal: SIGUSR2 (kDumpSignal), when nothing else of the process handles it. Open MPI's
//     mpirun forwards SIGUSR2 to its ranks, `scancel --signal=USR2` and `kill -USR2` reach them too;
//     neither MPI, NCCL nor torch uses it (SIGUSR1 is Slurm's and Lightning's pre-emption warning).
//     The handler only writes a byte to a pipe; a thread of the recorder writes the dump.
//   - on request: dumpFlightRecorder().
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/types.h"
#include "engine/comm/work.h"
#include "engine/env/env_source.h"
#include "engine/store/store.h"

namespace ds::comm {

inline constexpr std::size_t kDefaultFlightRecorderEntries = 2000;
// At most ~130 MB of entries (128 bytes each, in a power of two of slots).
inline constexpr long long kMaxFlightRecorderEntries = 1'000'000;
// Groups recorded per process (registration order); a later group is not recorded, with a warning.
inline constexpr std::size_t kMaxFlightRecorderGroups = 4096;
// The store key a rank that timed out sets (to its rank) so that the others dump too.
inline constexpr const char* kDumpSignalKey = "fr/exception_dump";
// The signal that makes a process dump.
inline constexpr int kDumpSignal = SIGUSR2;
// The format version written (torch's FlightRecorder.hpp version_val).
inline constexpr const char* kFlightRecorderVersion = "2.10";

struct FlightRecorderConfig {
  std::size_t entries = kDefaultFlightRecorderEntries;  // 0: off
  bool dumpOnTimeout = true;
  std::string dumpPrefix;  // the dump of rank r is <dumpPrefix><r>
  bool jsonFile = false;   // also <dumpPrefix><r>.json
};
// The variables above, strictly: a value out of range or not a number is a ConfigError naming the
// variable and the valid range.
FlightRecorderConfig flightRecorderConfigFromEnv(const env::EnvSource& env);

// A group as pg_config shows it.
struct FlightGroup {
  std::string name;            // the group's name, the same on every rank (the analyzer's key)
  std::string desc;            // "default_pg" for the world group, else "undefined" (as torch)
  std::string backend;         // "gloo", "nccl", "mpi", "shm": the profiling names' prefix
  int rank = 0;                // this process's rank in the group
  std::vector<int> ranks;      // the members' global ranks
  std::string commLibVersion;  // the backend library's version, or ""
};

// One op at issue.
struct FlightOp {
  OpType type = OpType::kBarrier;
  DType dtype = DType::kF32;
  std::size_t inCount = 0;   // elements of the input (0: none, as barrier)
  std::size_t outCount = 0;  // elements of the output
  std::uint64_t collectiveSeq = 0;
  std::uint64_t p2pSeq = 0;
  std::uint64_t opId = 0;
  int peer = -1;  // send/recv: the peer's rank in the group
  Duration timeout{0};
  bool started = false;  // runs on the caller's thread from now on
};

// One entry as a dump shows it (tests, and the dump writers).
struct FlightEntry {
  std::uint64_t recordId = 0;
  int pgId = 0;
  std::uint64_t collectiveSeq = 0, p2pSeq = 0, opId = 0;
  std::string profilingName;  // "gloo:all_reduce", "nccl:send 1->2"
  std::vector<std::vector<std::int64_t>> inputSizes, outputSizes;
  std::vector<std::string> inputDtypes, outputDtypes;  // torch's ScalarType names: "Float", ...
  std::int64_t timeCreatedNs = 0;
  std::optional<std::int64_t> timeStartedNs, timeCompletedNs;
  std::optional<double> durationMs;
  std::string state;  // "scheduled", "started", "completed"
  bool retired = false;
  std::int64_t timeoutMs = 0;
  bool isP2P = false;
  std::string threadId, threadName;
};

// Everything a dump shows, copied at one moment.
struct FlightSnapshot {
  std::string commLibVersion;
  std::vector<FlightGroup> groups;                  // by pg_id
  std::vector<std::array<std::int64_t, 3>> status;  // by pg_id: last enqueued, started, completed
  std::vector<FlightEntry> entries;                 // oldest first
};

class FlightRecorder {
 public:
  // The process's recorder, configured from the environment at first use. Never destroyed.
  static FlightRecorder& instance();
  explicit FlightRecorder(FlightRecorderConfig config, std::string configError = "");
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;
  ~FlightRecorder();

  bool enabled() const { return capacity_ > 0; }
  const FlightRecorderConfig& config() const { return config_; }
  // Throws the configuration's ConfigError, if any (process groups call it when made).
  void checkConfig() const;

  // Registers a group; returns its pg_id (registration order), or -1 when the recorder is off (or
  // kMaxFlightRecorderGroups are registered already). The
  // first group registered names the process's rank (ranks[rank]) for the dump file. The
  // process's recorder (instance()) installs the signal handler with its first group.
  int registerGroup(const FlightGroup& group);
  // The group is gone: its entries and pg_status stay in the dumps; it no longer watches the store.
  void unregisterGroup(int pgId);

  // --- per op (any thread, lock-free); `at`: when it happened, as the caller read it (the recorder
  // reads no clock per op). A group's ops must start and complete one at a time (a process group's do):
  // its pg_status values are raised without a read-modify-write. ---
  // Returns the handle of the new entry (empty when off or pgId < 0). pg_status follows the handles,
  // not the ring: an op whose entry was overwritten still raises its group's last started/completed.
  FlightHandle record(int pgId, const FlightOp& op, Work::Clock::time_point at = Work::Clock::now());
  void started(const FlightHandle& handle, Work::Clock::time_point at = Work::Clock::now());
  // ok: completed; otherwise retired in the state it reached (an error or a timeout ended it).
  void finished(const FlightHandle& handle, bool ok, Work::Clock::time_point at = Work::Clock::now());

  // --- dumps ---
  FlightSnapshot snapshot();
  std::vector<FlightEntry> entries();
  std::string dumpPickle();
  std::string dumpJson();
  // Writes the dump file(s) atomically; returns the pickle's path, and its bytes in `pickle` when
  // given. Throws IoError.
  std::string writeDump(std::string* pickle = nullptr);
  // The dump file of this process: <prefix><rank>.
  std::string dumpPath();

  // A group's op timed out (called once per group, before its diagnosis): dump now and signal the
  // other ranks through `store`. Bounded (2 s on the store); never throws.
  void onTimeout(int pgId, store::Store& store);
  // On a group's heartbeat thread after each beat: the first live group polls the dump signal
  // and dumps once when it is set. Bounded; never throws.
  void pollDumpSignal(int pgId, store::Store& store);

 private:
  struct Slot;      // one entry, behind its own sequence lock (flight_recorder.cpp)
  struct Progress;  // a group's pg_status, atomics
  struct Group;     // a group's pg_config, and whether it lives
  // What started() and finished() need of an entry, read under its slot's sequence lock.
  struct EntryKey {
    int pgId = 0;
    bool p2p = false;
    std::int64_t collectiveSeq = 0;
    std::int64_t created = 0;
  };
  // False when the ring has dropped entry `handle - 1`.
  bool readEntry(std::uint64_t handle, EntryKey& key) const;
  void installSignalHandlerLocked();
  std::string dumpNoThrow(const std::string& why);
  static void signalThread(FlightRecorder* self, int fd);

  const FlightRecorderConfig config_;
  const std::string configError_;
  const std::size_t capacity_;
  const std::size_t slotMask_;                  // slots - 1 (a power of two, >= capacity_)
  const int slotShift_;                         // log2(slots): an entry's lap is its id >> slotShift_
  const std::unique_ptr<Slot[]> slots_;         // lock-free
  std::atomic<std::uint64_t> nextId_{0};        // the next entry's record_id
  const std::unique_ptr<Progress[]> progress_;  // by pg_id, kMaxFlightRecorderGroups; lock-free
  std::mutex mu_;                               // registration and the dump signal's state
  std::vector<Group> groups_;                   // by pg_id; guarded by mu_
  int rank_ = -1;                               // guarded by mu_
  std::string commLibVersion_;                  // guarded by mu_
  bool signalHandled_ = false;                  // a dump signal (the store's) was answered; guarded by mu_
  int watcher_ = -1;                // the group that polls the store's dump signal; guarded by mu_
  bool handlerInstalled_ = false;   // guarded by mu_
  bool tooManyGroupsSaid_ = false;  // guarded by mu_
  bool processWide_ = false;        // instance(): the one that installs the signal handler
  std::mutex dumpMu_;               // one dump at a time
};

// The process-wide recorder's dump, also written to its file (<prefix><rank>, and .json when
// DS_FR_DUMP_JSON=1). Returns the pickle bytes (as torch's _dump_fr_trace()).
std::string dumpFlightRecorder();
// The same dump in JSON (as torch's _dump_fr_trace_json()); writes nothing.
std::string dumpFlightRecorderJson();

}  // namespace ds::comm
