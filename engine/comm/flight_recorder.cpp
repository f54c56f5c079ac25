#include "engine/comm/flight_recorder.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/common/error.h"
#include "engine/common/log.h"

namespace ds::comm {

// ---------------------------------------------------------------------------------------------------
// Configuration.

namespace {

// The first of `names` that is set and not empty: its name and value.
std::optional<std::pair<std::string, std::string>> firstSet(const env::EnvSource& env,
                                                            std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto v = env.get(n);
    if (v && !v->empty()) return std::make_pair(std::string(n), *v);
  }
  return std::nullopt;
}

bool parseSwitch(const std::string& name, const std::string& value, const char* what) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  throw ConfigError(fmt::format("{}='{}' is not valid; use 1 ({}) or 0.", name, value, what));
}

}  // namespace

FlightRecorderConfig flightRecorderConfigFromEnv(const env::EnvSource& env) {
  FlightRecorderConfig c;
  if (auto v = firstSet(env, {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"})) {
    c.entries = static_cast<std::size_t>(
        env::parseIntVar(v->first, v->second, 0, kMaxFlightRecorderEntries,
                         fmt::format("0 (the flight recorder off) to {} entries kept per process",
                                     kMaxFlightRecorderEntries)));
  }
  if (auto v = firstSet(env, {"TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_NCCL_DUMP_ON_TIMEOUT"})) {
    c.dumpOnTimeout = parseSwitch(v->first, v->second, "dump the flight recorder when an op times out");
  }
  if (auto v = firstSet(env, {"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"})) {
    c.dumpPrefix = v->second;
  } else {
    // torch's DebugInfoWriter::getWriter: $XDG_CACHE_HOME, else $HOME/.cache (HOME: /tmp if unset).
    std::string root;
    if (auto x = env.get("XDG_CACHE_HOME"); x && !x->empty()) {
      root = *x;
    } else {
      auto home = env.get("HOME");
      root = (home && !home->empty() ? *home : std::string("/tmp")) + "/.cache";
    }
    c.dumpPrefix = root + "/torch/comm_lib_trace_rank_";
  }
  if (auto v = firstSet(env, {"DS_FR_DUMP_JSON"})) {
    c.jsonFile = parseSwitch(v->first, v->second, "also write the dump as JSON, <prefix><rank>.json");
  }
  return c;
}

// ---------------------------------------------------------------------------------------------------
// Entries.

namespace {

enum class State : std::uint8_t { kScheduled, kStarted, kCompleted };

// Entries keep the steady clock the process group reads anyway (Work::Clock, no clock read of the
// recorder's own per op: one costs ~29 ns here, a tenth of an 8-byte shm allreduce); a dump turns
// them into wall-clock ns since the epoch (torch's c10::getTime()) with the offset of that moment.
std::int64_t steadyNs(Work::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
std::int64_t wallMinusSteadyNs() {
  const auto wall = std::chrono::system_clock::now();
  const auto steady = Work::Clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(wall.time_since_epoch()).count() -
         steadyNs(steady);
}

// The calling thread, as torch names it: std::thread::id as text, and the thread's name. Read once.
struct ThreadTag {
  std::uint64_t id = 0;
  char name[16] = {};
  bool known = false;
};
const ThreadTag& threadTag() {
  thread_local ThreadTag tag;
  if (!tag.known) {
    tag.id = static_cast<std::uint64_t>(::pthread_self());
    if (::pthread_getname_np(::pthread_self(), tag.name, sizeof(tag.name)) != 0) tag.name[0] = '\0';
    tag.known = true;
  }
  return tag;
}

// torch's c10::toString(ScalarType).
const char* torchDtype(DType t) {
  switch (t) {
    case DType::kF32:
      return "Float";
    case DType::kF64:
      return "Double";
    case DType::kF16:
      return "Half";
    case DType::kBF16:
      return "BFloat16";
    case DType::kI32:
      return "Int";
    case DType::kI64:
      return "Long";
    case DType::kU8:
      return "Byte";
    case DType::kI8:
      return "Char";
  }
  return "Undefined";
}

// The op part of torch's profiling names (ProcessGroupNCCL / ProcessGroupGloo), which its analyzer
// matches against its COLLECTIVES and P2P sets.
const char* torchOpName(OpType t) {
  switch (t) {
    case OpType::kAllreduce:
      return "all_reduce";
    case OpType::kBroadcast:
      return "broadcast";
    case OpType::kReduce:
      return "reduce";
    case OpType::kAllgather:
      return "all_gather";
    case OpType::kReduceScatter:
      return "reduce_scatter";
    case OpType::kAlltoall:
      return "all_to_all";
    case OpType::kBarrier:
      return "barrier";
    case OpType::kSend:
      return "send";
    case OpType::kRecv:
      return "recv";
  }
  return "unknown";
}

}  // namespace

struct FlightRecorder::Slot {
  std::uint64_t id = 0;
  int pgId = 0;
  OpType type = OpType::kBarrier;
  DType dtype = DType::kF32;
  State state = State::kScheduled;
  bool retired = false;
  int peer = -1;
  std::uint64_t inCount = 0, outCount = 0;
  std::uint64_t collectiveSeq = 0, p2pSeq = 0, opId = 0;
  std::int64_t created = 0, startedAt = 0, completedAt = 0;  // steady ns (steadyNs); 0: not (yet)
  std::int64_t timeoutMs = 0;
  std::uint64_t threadId = 0;
  char threadName[16] = {};
  bool isP2P() const { return type == OpType::kSend || type == OpType::kRecv; }
};

struct FlightRecorder::Group {
  FlightGroup info;
  bool alive = true;
  // torch's ProcessGroupStatus: -1 until the first.
  std::int64_t lastEnqueued = -1, lastStarted = -1, lastCompleted = -1;
};

namespace {
int gSignalPipe = -1;  // the write end, for the signal handler

extern "C" void onDumpSignal(int) {
  const int saved = errno;
  if (gSignalPipe >= 0) {
    const char byte = 1;
    [[maybe_unused]] auto n = ::write(gSignalPipe, &byte, 1);
  }
  errno = saved;
}
}  // namespace

FlightRecorder& FlightRecorder::instance() {
  // Leaked on purpose, as torch's: ops and the signal thread may use it until the process ends.
  static FlightRecorder* recorder = [] {
    FlightRecorder* r = nullptr;
    try {
      r = new FlightRecorder(flightRecorderConfigFromEnv(env::ProcessEnv()));
    } catch (const ConfigError& e) {
      FlightRecorderConfig off;
      off.entries = 0;
      r = new FlightRecorder(off, e.what());
    }
    r->processWide_ = true;  // only this one answers SIGUSR2
    return r;
  }();
  return *recorder;
}

FlightRecorder::FlightRecorder(FlightRecorderConfig config, std::string configError)
    : config_(std::move(config)), configError_(std::move(configError)), capacity_(config_.entries) {}

FlightRecorder::~FlightRecorder() = default;

void FlightRecorder::checkConfig() const {
  if (!configError_.empty()) throw ConfigError(configError_);
}

int FlightRecorder::registerGroup(const FlightGroup& group) {
  checkConfig();
  if (!enabled()) return -1;
  std::lock_guard<std::mutex> lock(mu_);
  groups_.push_back(Group{group});
  if (rank_ < 0) {
    rank_ = group.rank >= 0 && static_cast<std::size_t>(group.rank) < group.ranks.size()
                ? group.ranks[static_cast<std::size_t>(group.rank)]
                : group.rank;
  }
  if (commLibVersion_.empty()) commLibVersion_ = group.commLibVersion;
  if (processWide_ && !handlerInstalled_) installSignalHandlerLocked();
  return static_cast<int>(groups_.size()) - 1;
}

void FlightRecorder::unregisterGroup(int pgId) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pgId < 0 || static_cast<std::size_t>(pgId) >= groups_.size()) return;
  groups_[static_cast<std::size_t>(pgId)].alive = false;
  if (watcher_ == pgId) watcher_ = -1;
}

std::uint64_t FlightRecorder::record(int pgId, const FlightOp& op, Work::Clock::time_point at) {
  if (pgId < 0 || capacity_ == 0) return 0;
  const ThreadTag& thread = threadTag();
  const std::int64_t now = steadyNs(at);
  std::lock_guard<std::mutex> lock(mu_);
  const std::uint64_t id = nextId_++;
  if (slots_.size() < capacity_) slots_.emplace_back();
  Slot& s = slots_[id % capacity_];
  s.id = id;
  s.pgId = pgId;
  s.type = op.type;
  s.dtype = op.dtype;
  s.state = op.started ? State::kStarted : State::kScheduled;
  s.retired = false;
  s.peer = op.peer;
  s.inCount = op.inCount;
  s.outCount = op.outCount;
  s.collectiveSeq = op.collectiveSeq;
  s.p2pSeq = op.p2pSeq;
  s.opId = op.opId;
  s.created = now;
  s.startedAt = op.started ? now : 0;
  s.completedAt = 0;
  s.timeoutMs = op.timeout.count();
  s.threadId = thread.id;
  std::memcpy(s.threadName, thread.name, sizeof(s.threadName));
  if (!s.isP2P()) {
    Group& g = groups_[static_cast<std::size_t>(pgId)];
    g.lastEnqueued = static_cast<std::int64_t>(op.collectiveSeq);
    if (op.started) g.lastStarted = g.lastEnqueued;
  }
  return id + 1;
}

void FlightRecorder::started(std::uint64_t handle, Work::Clock::time_point at) {
  if (handle == 0) return;
  const std::int64_t now = steadyNs(at);
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[(handle - 1) % capacity_];
  if (s.id != handle - 1 || s.state != State::kScheduled) return;  // overwritten, or started already
  s.state = State::kStarted;
  s.startedAt = now;
  if (!s.isP2P())
    groups_[static_cast<std::size_t>(s.pgId)].lastStarted = static_cast<std::int64_t>(s.collectiveSeq);
}

void FlightRecorder::finished(std::uint64_t handle, bool ok, Work::Clock::time_point at) {
  if (handle == 0) return;
  const std::int64_t now = steadyNs(at);
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[(handle - 1) % capacity_];
  if (s.id != handle - 1 || s.retired) return;
  s.retired = true;
  if (!ok) return;  // retired in the state it reached, as torch's timed-out entries
  if (s.startedAt == 0) s.startedAt = now;
  s.completedAt = now;
  s.state = State::kCompleted;
  if (!s.isP2P()) {
    Group& g = groups_[static_cast<std::size_t>(s.pgId)];
    const auto seq = static_cast<std::int64_t>(s.collectiveSeq);
    g.lastStarted = std::max(g.lastStarted, seq);
    g.lastCompleted = std::max(g.lastCompleted, seq);
  }
}

// ---------------------------------------------------------------------------------------------------
// Dumps.

namespace {

// Text as valid UTF-8 (pickle's BINUNICODE and JSON need it): a byte that starts no valid sequence
// becomes '?'.
std::string utf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size();) {
    const auto c = static_cast<unsigned char>(in[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= in.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(in[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(in.substr(i, n));
      i += n;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

// pickle protocol 2, data opcodes only (what Python's pickle.load and a reader that builds nothing
// but data both accept): PROTO, EMPTY_DICT/MARK/SETITEMS, EMPTY_LIST/MARK/APPENDS, MARK/TUPLE,
// BINUNICODE, BININT, LONG1, BINFLOAT, NONE, NEWTRUE/NEWFALSE, STOP. No memo: nothing repeats.
class Pickler {
 public:
  Pickler() { out_ += "\x80\x02"; }
  std::string finish() {
    out_ += '.';
    return std::move(out_);
  }
  void dict() { out_ += "}("; }  // then key, value, ... end()
  void endDict() { out_ += 'u'; }
  void list() { out_ += "]("; }  // then items ... endList()
  void endList() { out_ += 'e'; }
  void tuple() { out_ += '('; }  // then items ... endTuple()
  void endTuple() { out_ += 't'; }
  void none() { out_ += 'N'; }
  void boolean(bool b) { out_ += b ? '\x88' : '\x89'; }
  void str(std::string_view s) {
    const std::string u = utf8(s);
    out_ += 'X';
    le(static_cast<std::uint64_t>(u.size()), 4);
    out_ += u;
  }
  void integer(std::int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      le(static_cast<std::uint64_t>(static_cast<std::int32_t>(v)), 4);
      return;
    }
    // LONG1: little-endian two's complement, as few bytes as keep the sign.
    unsigned char b[8];
    auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(u >> (8 * i));
    int n = 8;
    while (n > 1 && ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
      --n;
    out_ += '\x8a';
    out_ += static_cast<char>(n);
    out_.append(reinterpret_cast<const char*>(b), static_cast<std::size_t>(n));
  }
  void real(double d) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof(bits));
    out_ += 'G';
    for (int i = 7; i >= 0; --i) out_ += static_cast<char>(bits >> (8 * i));  // big-endian
  }
  void key(std::string_view k) { str(k); }

 private:
  void le(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>(v >> (8 * i));
  }
  std::string out_;
};

// torch's ranks_str: "[0, 1, 2]".
std::string ranksText(const std::vector<int>& ranks) {
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

void pickleSizes(Pickler& p, const std::vector<std::vector<std::int64_t>>& sizes) {
  p.list();
  for (const auto& dims : sizes) {
    p.list();
    for (auto d : dims) p.integer(d);
    p.endList();
  }
  p.endList();
}

void pickleStrings(Pickler& p, const std::vector<std::string>& v) {
  p.list();
  for (const auto& s : v) p.str(s);
  p.endList();
}

// The pg_config of torch: by group name (a later group of the same name wins).
std::map<std::string, const FlightGroup*> configByName(const FlightSnapshot& snap) {
  std::map<std::string, const FlightGroup*> out;
  for (const auto& g : snap.groups) out[g.name] = &g;
  return out;
}

// The same keys, order and types as torch's FlightRecorder::dump_dict (with stack traces: frames
// present, empty).
std::string toPickle(const FlightSnapshot& snap) {
  Pickler p;
  p.dict();
  p.key("version");
  p.str(kFlightRecorderVersion);
  p.key("pg_config");
  p.dict();
  for (const auto& [name, g] : configByName(snap)) {
    p.key(name);
    p.dict();
    p.key("name");
    p.str(g->name);
    p.key("desc");
    p.str(g->desc);
    p.key("ranks");
    p.str(ranksText(g->ranks));
    p.endDict();
  }
  p.endDict();
  p.key("comm_lib_version");
  p.str(snap.commLibVersion);
  p.key("pg_status");
  p.dict();
  for (std::size_t i = 0; i < snap.status.size(); ++i) {
    p.key(std::to_string(i));
    p.dict();
    p.key("last_enqueued_collective");
    p.integer(snap.status[i][0]);
    p.key("last_started_collective");
    p.integer(snap.status[i][1]);
    p.key("last_completed_collective");
    p.integer(snap.status[i][2]);
    p.endDict();
  }
  p.endDict();
  p.key("entries");
  p.list();
  for (const auto& e : snap.entries) {
    const FlightGroup& g = snap.groups[static_cast<std::size_t>(e.pgId)];
    p.dict();
    p.key("frames");
    p.list();
    p.endList();
    p.key("record_id");
    p.integer(static_cast<std::int64_t>(e.recordId));
    p.key("pg_id");
    p.integer(e.pgId);
    p.key("process_group");
    p.tuple();
    p.str(g.name);
    p.str(g.desc);
    p.endTuple();
    p.key("thread_name");
    p.str(e.threadName);
    p.key("thread_id");
    p.str(e.threadId);
    p.key("collective_seq_id");
    p.integer(static_cast<std::int64_t>(e.collectiveSeq));
    p.key("p2p_seq_id");
    p.integer(static_cast<std::int64_t>(e.p2pSeq));
    p.key("op_id");
    p.integer(static_cast<std::int64_t>(e.opId));
    p.key("profiling_name");
    p.str(e.profilingName);
    p.key("time_created_ns");
    p.integer(e.timeCreatedNs);
    if (e.durationMs) {
      p.key("duration_ms");
      p.real(*e.durationMs);
    }
    p.key("input_sizes");
    pickleSizes(p, e.inputSizes);
    p.key("input_dtypes");
    pickleStrings(p, e.inputDtypes);
    p.key("output_sizes");
    pickleSizes(p, e.outputSizes);
    p.key("output_dtypes");
    pickleStrings(p, e.outputDtypes);
    p.key("state");
    p.str(e.state);
    p.key("time_discovered_started_ns");
    if (e.timeStartedNs) {
      p.integer(*e.timeStartedNs);
    } else {
      p.none();
    }
    p.key("time_discovered_completed_ns");
    if (e.timeCompletedNs) {
      p.integer(*e.timeCompletedNs);
    } else {
      p.none();
    }
    p.key("retired");
    p.boolean(e.retired);
    p.key("timeout_ms");
    p.integer(e.timeoutMs);
    p.key("is_p2p");
    p.boolean(e.isP2P);
    p.endDict();
  }
  p.endList();
  p.endDict();
  return p.finish();
}

// torch's FlightRecorder::dump_json: pg_status values as text, missing times as 0, no frames, and
// no "entries" when there are none.
std::string toJson(const FlightSnapshot& snap) {
  using Json = nlohmann::json;
  Json out;
  out["version"] = kFlightRecorderVersion;
  out["comm_lib_version"] = snap.commLibVersion;
  Json config = Json::object();
  for (const auto& [name, g] : configByName(snap)) {
    config[name] = {{"name", g->name}, {"desc", g->desc}, {"ranks", ranksText(g->ranks)}};
  }
  out["pg_config"] = config;
  Json status = Json::object();
  for (std::size_t i = 0; i < snap.status.size(); ++i) {
    status[std::to_string(i)] = {{"last_enqueued_collective", std::to_string(snap.status[i][0])},
                                 {"last_started_collective", std::to_string(snap.status[i][1])},
                                 {"last_completed_collective", std::to_string(snap.status[i][2])}};
  }
  out["pg_status"] = status;
  if (!snap.entries.empty()) {
    Json entries = Json::array();
    for (const auto& e : snap.entries) {
      const FlightGroup& g = snap.groups[static_cast<std::size_t>(e.pgId)];
      Json j;
      j["record_id"] = e.recordId;
      j["pg_id"] = e.pgId;
      j["process_group"] = Json::array({g.name, g.desc});
      j["thread_name"] = e.threadName;
      j["thread_id"] = e.threadId;
      j["collective_seq_id"] = e.collectiveSeq;
      j["p2p_seq_id"] = e.p2pSeq;
      j["op_id"] = e.opId;
      j["profiling_name"] = e.profilingName;
      j["time_created_ns"] = e.timeCreatedNs;
      if (e.durationMs) j["duration_ms"] = *e.durationMs;
      j["input_sizes"] = e.inputSizes;
      j["input_dtypes"] = e.inputDtypes;
      j["output_sizes"] = e.outputSizes;
      j["output_dtypes"] = e.outputDtypes;
      j["state"] = e.state;
      j["time_discovered_started_ns"] = e.timeStartedNs.value_or(0);
      j["time_discovered_completed_ns"] = e.timeCompletedNs.value_or(0);
      j["retired"] = e.retired;
      j["timeout_ms"] = e.timeoutMs;
      j["is_p2p"] = e.isP2P;
      entries.push_back(std::move(j));
    }
    out["entries"] = std::move(entries);
  }
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Writes `bytes` to `path` through a temp file beside it and a rename, so that a reader never sees
// half a dump. Makes the folder. Throws IoError.
void writeAtomically(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw IoError(fmt::format("cannot write the flight recorder dump {}: {}{}", tmp, std::strerror(errno),
                                ec ? fmt::format(" (making its folder failed: {})", ec.message()) : ""));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw IoError(fmt::format("cannot rename the flight recorder dump to {}: {}", path, std::strerror(err)));
  }
}

}  // namespace

namespace {

// The entries of `slots` (oldest first) as a dump shows them.
template <class SlotT, class GroupT>
std::vector<FlightEntry> toEntries(const std::vector<SlotT>& slots, const std::vector<GroupT>& groups) {
  const std::int64_t toWall = wallMinusSteadyNs();
  std::vector<FlightEntry> out;
  out.reserve(slots.size());
  for (const auto& s : slots) {
    const FlightGroup& g = groups[static_cast<std::size_t>(s.pgId)].info;
    FlightEntry e;
    e.recordId = s.id;
    e.pgId = s.pgId;
    e.collectiveSeq = s.collectiveSeq;
    e.p2pSeq = s.p2pSeq;
    e.opId = s.opId;
    if (s.type == OpType::kSend) {
      e.profilingName = fmt::format("{}:send {}->{}", g.backend, g.rank, s.peer);
    } else if (s.type == OpType::kRecv) {
      e.profilingName = fmt::format("{}:recv {}<-{}", g.backend, g.rank, s.peer);
    } else {
      e.profilingName = fmt::format("{}:{}", g.backend, torchOpName(s.type));
    }
    if (s.type != OpType::kBarrier) {
      e.inputSizes = {{static_cast<std::int64_t>(s.inCount)}};
      e.outputSizes = {{static_cast<std::int64_t>(s.outCount)}};
      e.inputDtypes = {torchDtype(s.dtype)};
      e.outputDtypes = {torchDtype(s.dtype)};
    }
    e.timeCreatedNs = s.created + toWall;
    if (s.startedAt != 0) e.timeStartedNs = s.startedAt + toWall;
    if (s.completedAt != 0) {
      e.timeCompletedNs = s.completedAt + toWall;
      e.durationMs = static_cast<double>(s.completedAt - s.startedAt) / 1e6;
    }
    e.state = s.state == State::kCompleted ? "completed"
              : s.state == State::kStarted ? "started"
                                           : "scheduled";
    e.retired = s.retired;
    e.timeoutMs = s.timeoutMs;
    e.isP2P = s.isP2P();
    e.threadId = std::to_string(s.threadId);
    e.threadName = s.threadName;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

FlightSnapshot FlightRecorder::snapshot() {
  std::vector<Slot> slots;
  std::vector<Group> groups;
  FlightSnapshot snap;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots.reserve(slots_.size());
    const std::size_t start = slots_.size() < capacity_ || capacity_ == 0 ? 0 : nextId_ % capacity_;
    for (std::size_t i = 0; i < slots_.size(); ++i) slots.push_back(slots_[(start + i) % slots_.size()]);
    groups = groups_;
    snap.commLibVersion = commLibVersion_;
  }
  for (const auto& g : groups) {
    snap.groups.push_back(g.info);
    snap.status.push_back({g.lastEnqueued, g.lastStarted, g.lastCompleted});
  }
  snap.entries = toEntries(slots, groups);
  return snap;
}

std::vector<FlightEntry> FlightRecorder::entries() { return snapshot().entries; }

std::string FlightRecorder::dumpPickle() { return toPickle(snapshot()); }

std::string FlightRecorder::dumpJson() { return toJson(snapshot()); }

std::string FlightRecorder::dumpPath() {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.dumpPrefix + std::to_string(rank_ < 0 ? 0 : rank_);
}

std::string FlightRecorder::writeDump(std::string* pickle) {
  std::lock_guard<std::mutex> one(dumpMu_);
  const std::string path = dumpPath();
  std::string bytes = dumpPickle();
  writeAtomically(path, bytes);
  if (config_.jsonFile) writeAtomically(path + ".json", dumpJson());
  if (pickle != nullptr) *pickle = std::move(bytes);
  return path;
}

std::string FlightRecorder::dumpNoThrow(const std::string& why) {
  try {
    std::string path = writeDump();
    log::warn("flight recorder: wrote {} ({}).", path, why);
    return path;
  } catch (const std::exception& e) {
    log::warn("flight recorder: {} ({}). Set TORCH_FR_DUMP_TEMP_FILE to a writable prefix.", e.what(), why);
    return "";
  }
}

void FlightRecorder::onTimeout(int pgId, store::Store& store) {
  if (!enabled() || !config_.dumpOnTimeout || pgId < 0) return;
  int rank = 0;
  std::string group;
  {
    std::lock_guard<std::mutex> lock(mu_);
    signalHandled_ = true;  // this process dumps now; another rank's signal adds nothing
    rank = rank_;
    group = groups_[static_cast<std::size_t>(pgId)].info.name;
  }
  try {
    // The first rank to time out names itself; later ones leave its rank in place.
    store.compareSet(kDumpSignalKey, {}, store::toBytes(std::to_string(rank)), Duration(2000));
  } catch (const std::exception& e) {
    log::debug("flight recorder: could not signal the other ranks to dump: {}", e.what());
  }
  dumpNoThrow(
      fmt::format("an op of group '{}' failed or timed out on this rank; the other ranks dump too", group));
}

void FlightRecorder::pollDumpSignal(int pgId, store::Store& store) {
  if (!enabled() || !config_.dumpOnTimeout || pgId < 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (signalHandled_) return;
    if (watcher_ < 0) watcher_ = pgId;
    if (watcher_ != pgId) return;
  }
  std::string from;
  try {
    if (!store.check({kDumpSignalKey}, Duration(2000))) return;
    from = store::toString(store.get(kDumpSignalKey, Duration(2000)));
  } catch (const std::exception& e) {
    // As torch's monitor: the store is most likely gone with rank 0; stop looking.
    std::lock_guard<std::mutex> lock(mu_);
    signalHandled_ = true;
    log::debug("flight recorder: stopped watching for a dump signal, the store failed: {}", e.what());
    return;
  }
  std::string backend;
  std::int64_t enqueued = -1, completed = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (signalHandled_) return;
    signalHandled_ = true;
    const Group& g = groups_[static_cast<std::size_t>(pgId)];
    backend = g.info.backend;
    enqueued = g.lastEnqueued;
    completed = g.lastCompleted;
  }
  log::error(
      "flight recorder: Received a dump signal due to a collective timeout from rank {} and we will try our "
      "best to dump the debug info. Last enqueued {} work: {}, last completed {} work: {}.",
      from, backend, enqueued, backend, completed);
  dumpNoThrow(fmt::format("dump signal from rank {}", from));
}

void FlightRecorder::installSignalHandlerLocked() {
  handlerInstalled_ = true;
  struct sigaction current {};
  if (::sigaction(kDumpSignal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
      (current.sa_flags & SA_SIGINFO) != 0) {
    log::debug("flight recorder: SIGUSR2 has a handler already; dumps on that signal are off");
    return;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  gSignalPipe = fds[1];
  std::thread(&FlightRecorder::signalThread, this, fds[0]).detach();
  struct sigaction sa {};
  sa.sa_handler = onDumpSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(kDumpSignal, &sa, nullptr);
}

void FlightRecorder::signalThread(FlightRecorder* self, int fd) {
  ::pthread_setname_np(::pthread_self(), "ds-fr-dump");
  char buf[64];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    self->dumpNoThrow("SIGUSR2");
  }
}

std::string dumpFlightRecorder() {
  auto& fr = FlightRecorder::instance();
  fr.checkConfig();
  std::string bytes;
  fr.writeDump(&bytes);
  return bytes;
}

std::string dumpFlightRecorderJson() {
  auto& fr = FlightRecorder::instance();
  fr.checkConfig();
  return fr.dumpJson();
}

namespace detail {
void flightStarted(std::uint64_t handle, Work::Clock::time_point at) {
  FlightRecorder::instance().started(handle, at);
}
void flightFinished(std::uint64_t handle, bool ok, Work::Clock::time_point at) {
  FlightRecorder::instance().finished(handle, ok, at);
}
}  // namespace detail

}  // namespace ds::comm
