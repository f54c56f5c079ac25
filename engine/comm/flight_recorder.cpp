#include "engine/comm/flight_recorder.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
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
  std::uint64_t name[2] = {};  // pthread_getname_np's 16 bytes, as a slot keeps them
  bool known = false;
};
const ThreadTag& threadTag() {
  thread_local ThreadTag tag;
  if (!tag.known) {
    tag.id = static_cast<std::uint64_t>(::pthread_self());
    char text[16] = {};
    if (::pthread_getname_np(::pthread_self(), text, sizeof(text)) != 0) text[0] = '\0';
    std::memcpy(tag.name, text, sizeof(text));
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

}  // namespace

// One entry of the ring, written without a lock. record() writes the fields under the slot's
// sequence lock `version`: 2 * (id + 1) while the slot holds entry `id` and nobody writes it, that + 1
// while record() does, 0 before the first entry; it takes the slot with one compare-and-swap, and a
// dump keeps its copy of the fields only when the version was even and the same before and after.
// The op's start and end are words of their own (startMark, endMark), each one plain store: the time
// since the entry was created, stamped with the entry's lap of the ring (its id >> log2(slots)), so
// that a late start or end of an entry the ring has dropped is ignored, not taken for the new one's.
// The fields are relaxed atomics (plain moves on x86): a copy racing a write is no data race, only a
// copy to throw away.
struct alignas(64) FlightRecorder::Slot {
  std::atomic<std::uint64_t> version{0};
  std::atomic<std::int32_t> pgId{0};
  std::atomic<std::uint32_t> kind{0};  // OpType | DType << 8
  std::atomic<std::int32_t> peer{-1};
  std::atomic<std::uint64_t> inCount{0}, outCount{0};
  std::atomic<std::uint64_t> collectiveSeq{0}, p2pSeq{0}, opId{0};
  std::atomic<std::int64_t> created{0};                 // steady ns
  std::atomic<std::uint64_t> startMark{0}, endMark{0};  // 0: not (yet); see Mark
  std::atomic<std::int64_t> timeoutMs{0};
  std::atomic<std::uint64_t> threadId{0};
  std::atomic<std::uint64_t> threadName[2] = {};  // the thread's name, 16 bytes
};

// torch's ProcessGroupStatus of one group: -1 until the first. A group's ops are issued under its
// issue lock and start and complete one at a time (its worker, or the caller that claimed the group),
// so each value only grows through a load and a store: no read-modify-write on an op's path.
struct FlightRecorder::Progress {
  std::atomic<std::int64_t> lastEnqueued{-1}, lastStarted{-1}, lastCompleted{-1};
};

struct FlightRecorder::Group {
  FlightGroup info;
  bool alive = true;
};

namespace {

// A slot's fields, copied consistently (the dump's input).
struct SlotCopy {
  std::uint64_t id = 0;
  int pgId = 0;
  OpType type = OpType::kBarrier;
  DType dtype = DType::kF32;
  State state = State::kScheduled;
  bool retired = false;
  int peer = -1;
  std::uint64_t inCount = 0, outCount = 0;
  std::uint64_t collectiveSeq = 0, p2pSeq = 0, opId = 0;
  std::int64_t created = 0, startedAt = 0, completedAt = 0;
  std::int64_t timeoutMs = 0;
  std::uint64_t threadId = 0;
  char threadName[16] = {};
  bool isP2P() const { return type == OpType::kSend || type == OpType::kRecv; }
};

std::uint32_t packKind(OpType type, DType dtype) {
  return static_cast<std::uint32_t>(type) | static_cast<std::uint32_t>(dtype) << 8;
}
bool isP2PKind(std::uint32_t kind) {
  const auto t = static_cast<OpType>(kind & 0xff);
  return t == OpType::kSend || t == OpType::kRecv;
}

// A start or end mark: bits 63-52 the entry's lap (mod 4096), bit 51 set, bit 50 the op succeeded
// (end marks), bits 49-0 the ns from the entry's creation to the event (at most ~13 days).
namespace Mark {
constexpr std::uint64_t kSet = std::uint64_t{1} << 51;
constexpr std::uint64_t kOk = std::uint64_t{1} << 50;
constexpr std::uint64_t kTimeMask = kOk - 1;
inline std::uint64_t make(std::uint64_t lap, std::int64_t sinceCreated, bool ok) {
  const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(sinceCreated, 0));
  return (lap & 0xfff) << 52 | kSet | (ok ? kOk : 0) | std::min(ns, kTimeMask);
}
inline bool isOf(std::uint64_t mark, std::uint64_t lap) {
  return (mark & kSet) != 0 && mark >> 52 == (lap & 0xfff);
}
inline std::int64_t since(std::uint64_t mark) { return static_cast<std::int64_t>(mark & kTimeMask); }
}  // namespace Mark

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Raises `a` to `v` (see Progress: one writer at a time per group).
inline void raiseTo(std::atomic<std::int64_t>& a, std::int64_t v) {
  if (a.load(std::memory_order_relaxed) < v) a.store(v, std::memory_order_relaxed);
}

// Takes slot `s` for the new entry `id`. False when the slot holds a newer entry already: this writer
// was overtaken by a whole ring of others between taking its id and its slot, and its entry is one
// the ring has dropped.
bool claimNew(std::atomic<std::uint64_t>& version, std::uint64_t id) {
  const std::uint64_t mine = 2 * (id + 1);
  std::uint64_t v = version.load(std::memory_order_relaxed);
  for (;;) {
    if ((v & 1) != 0) {  // being written (the late end of the entry it holds, or another record)
      cpuRelax();
      v = version.load(std::memory_order_relaxed);
      continue;
    }
    if (v >= mine) return false;
    if (version.compare_exchange_weak(v, mine | 1, std::memory_order_acquire, std::memory_order_relaxed))
      break;
  }
  std::atomic_thread_fence(std::memory_order_release);  // the odd version before the fields
  return true;
}

}  // namespace

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
    : config_(std::move(config)),
      configError_(std::move(configError)),
      capacity_(config_.entries),
      // A power of two of slots, so that an entry's slot is its id masked, not divided (a division
      // costs ~10 ns an op here); dumps show the newest capacity_ entries all the same.
      slotMask_(capacity_ > 0 ? std::bit_ceil(capacity_) - 1 : 0),
      slotShift_(std::countr_one(slotMask_)),
      slots_(capacity_ > 0 ? std::make_unique<Slot[]>(slotMask_ + 1) : nullptr),
      progress_(capacity_ > 0 ? std::make_unique<Progress[]>(kMaxFlightRecorderGroups) : nullptr) {}

FlightRecorder::~FlightRecorder() = default;

void FlightRecorder::checkConfig() const {
  if (!configError_.empty()) throw ConfigError(configError_);
}

int FlightRecorder::registerGroup(const FlightGroup& group) {
  checkConfig();
  if (!enabled()) return -1;
  std::lock_guard<std::mutex> lock(mu_);
  if (groups_.size() >= kMaxFlightRecorderGroups) {
    if (!tooManyGroupsSaid_) {
      log::warn(
          "flight recorder: group '{}' and later ones are not recorded: a process records at most {} groups.",
          group.name, kMaxFlightRecorderGroups);
      tooManyGroupsSaid_ = true;
    }
    return -1;
  }
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

FlightHandle FlightRecorder::record(int pgId, const FlightOp& op, Work::Clock::time_point at) {
  if (pgId < 0 || capacity_ == 0) return {};
  FlightHandle h;
  h.pgId = pgId;
  h.collectiveSeq = static_cast<std::int64_t>(op.collectiveSeq);
  h.p2p = op.type == OpType::kSend || op.type == OpType::kRecv;
  const ThreadTag& thread = threadTag();
  const std::int64_t now = steadyNs(at);
  const std::uint64_t id = nextId_.fetch_add(1, std::memory_order_relaxed);
  if (op.type != OpType::kSend && op.type != OpType::kRecv) {
    Progress& g = progress_[static_cast<std::size_t>(pgId)];
    g.lastEnqueued.store(static_cast<std::int64_t>(op.collectiveSeq), std::memory_order_relaxed);
    if (op.started) raiseTo(g.lastStarted, static_cast<std::int64_t>(op.collectiveSeq));
  }
  Slot& s = slots_[id & slotMask_];
  if (!claimNew(s.version, id)) return h;  // no entry, but its group's progress still counts
  constexpr auto r = std::memory_order_relaxed;
  s.pgId.store(pgId, r);
  s.kind.store(packKind(op.type, op.dtype), r);
  s.peer.store(op.peer, r);
  s.inCount.store(op.inCount, r);
  s.outCount.store(op.outCount, r);
  s.collectiveSeq.store(op.collectiveSeq, r);
  s.p2pSeq.store(op.p2pSeq, r);
  s.opId.store(op.opId, r);
  s.created.store(now, r);
  s.startMark.store(op.started ? Mark::make(id >> slotShift_, 0, false) : 0, r);
  s.endMark.store(0, r);
  s.timeoutMs.store(op.timeout.count(), r);
  s.threadId.store(thread.id, r);
  s.threadName[0].store(thread.name[0], r);
  s.threadName[1].store(thread.name[1], r);
  s.version.store(2 * (id + 1), std::memory_order_release);
  h.id = id + 1;
  return h;
}

bool FlightRecorder::readEntry(std::uint64_t handle, EntryKey& key) const {
  const Slot& s = slots_[(handle - 1) & slotMask_];
  const std::uint64_t v = s.version.load(std::memory_order_acquire);
  if (v != 2 * handle) return false;  // the ring has dropped it (or it is being overwritten)
  key.pgId = s.pgId.load(std::memory_order_relaxed);
  key.p2p = isP2PKind(s.kind.load(std::memory_order_relaxed));
  key.collectiveSeq = static_cast<std::int64_t>(s.collectiveSeq.load(std::memory_order_relaxed));
  key.created = s.created.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return s.version.load(std::memory_order_relaxed) == v;
}

void FlightRecorder::started(const FlightHandle& h, Work::Clock::time_point at) {
  if (!h) return;
  if (!h.p2p) raiseTo(progress_[static_cast<std::size_t>(h.pgId)].lastStarted, h.collectiveSeq);
  EntryKey e;
  if (h.id == 0 || !readEntry(h.id, e)) return;  // its entry has left the ring
  Slot& s = slots_[(h.id - 1) & slotMask_];
  const std::uint64_t lap = (h.id - 1) >> slotShift_;
  // Once, and never after its end (a worker that starts an op its timeout already ended).
  if (Mark::isOf(s.startMark.load(std::memory_order_relaxed), lap) ||
      Mark::isOf(s.endMark.load(std::memory_order_relaxed), lap))
    return;
  s.startMark.store(Mark::make(lap, steadyNs(at) - e.created, false), std::memory_order_release);
}

void FlightRecorder::finished(const FlightHandle& h, bool ok, Work::Clock::time_point at) {
  if (!h) return;
  if (ok && !h.p2p) {
    Progress& g = progress_[static_cast<std::size_t>(h.pgId)];
    raiseTo(g.lastStarted, h.collectiveSeq);
    raiseTo(g.lastCompleted, h.collectiveSeq);
  }
  EntryKey e;
  if (h.id == 0 || !readEntry(h.id, e)) return;  // its entry has left the ring
  Slot& s = slots_[(h.id - 1) & slotMask_];
  const std::uint64_t lap = (h.id - 1) >> slotShift_;
  if (Mark::isOf(s.endMark.load(std::memory_order_relaxed), lap)) return;  // once
  // Not ok: retired in the state it reached, as torch's timed-out entries.
  s.endMark.store(Mark::make(lap, steadyNs(at) - e.created, ok), std::memory_order_release);
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
  // An integer, or None where it is unknown (torch writes None for a time not yet discovered).
  void integerOrNone(const std::optional<std::int64_t>& v) {
    if (v) {
      integer(*v);
    } else {
      none();
    }
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
    p.integerOrNone(e.timeStartedNs);
    p.key("time_discovered_completed_ns");
    p.integerOrNone(e.timeCompletedNs);
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
  FlightSnapshot snap;
  std::vector<Group> groups;
  {
    std::lock_guard<std::mutex> lock(mu_);
    groups = groups_;
    snap.commLibVersion = commLibVersion_;
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const Progress& p = progress_[i];
    snap.groups.push_back(groups[i].info);
    snap.status.push_back({p.lastEnqueued.load(std::memory_order_relaxed),
                           p.lastStarted.load(std::memory_order_relaxed),
                           p.lastCompleted.load(std::memory_order_relaxed)});
  }
  // Each slot copied under its sequence lock; a slot a writer holds throughout (a thread stopped or
  // descheduled mid-write) is left out after ~10 ms rather than waited for. The newest capacity_
  // entries are kept (there are more slots: a power of two).
  const std::uint64_t next = capacity_ > 0 ? nextId_.load(std::memory_order_acquire) : 0;
  const std::uint64_t oldest = next > capacity_ ? next - capacity_ : 0;
  std::vector<SlotCopy> slots;
  slots.reserve(capacity_);
  constexpr auto r = std::memory_order_relaxed;
  for (std::size_t i = 0; i < (capacity_ > 0 ? slotMask_ + 1 : 0); ++i) {
    const Slot& s = slots_[i];
    SlotCopy c;
    bool ok = false;
    for (int tries = 0; tries < 10000 && !ok; ++tries) {
      const std::uint64_t v = s.version.load(std::memory_order_acquire);
      if (v == 0) break;
      if ((v & 1) != 0) {
        if (tries % 64 == 63) std::this_thread::sleep_for(std::chrono::microseconds(50));
        cpuRelax();
        continue;
      }
      c.id = v / 2 - 1;
      c.pgId = s.pgId.load(r);
      const std::uint32_t kind = s.kind.load(r);
      c.type = static_cast<OpType>(kind & 0xff);
      c.dtype = static_cast<DType>((kind >> 8) & 0xff);
      c.peer = s.peer.load(r);
      c.inCount = s.inCount.load(r);
      c.outCount = s.outCount.load(r);
      c.collectiveSeq = s.collectiveSeq.load(r);
      c.p2pSeq = s.p2pSeq.load(r);
      c.opId = s.opId.load(r);
      c.created = s.created.load(r);
      const std::uint64_t lap = c.id >> slotShift_;
      const std::uint64_t start = s.startMark.load(r), end = s.endMark.load(r);
      c.state = State::kScheduled;
      c.startedAt = c.completedAt = 0;
      c.retired = false;
      if (Mark::isOf(start, lap)) {
        c.state = State::kStarted;
        c.startedAt = c.created + Mark::since(start);
      }
      if (Mark::isOf(end, lap)) {
        c.retired = true;
        if ((end & Mark::kOk) != 0) {
          c.state = State::kCompleted;
          c.completedAt = c.created + Mark::since(end);
          if (c.startedAt == 0) c.startedAt = c.completedAt;
        }
      }
      c.timeoutMs = s.timeoutMs.load(r);
      c.threadId = s.threadId.load(r);
      const std::uint64_t name[2] = {s.threadName[0].load(r), s.threadName[1].load(r)};
      std::memcpy(c.threadName, name, sizeof(c.threadName));
      c.threadName[sizeof(c.threadName) - 1] = '\0';
      std::atomic_thread_fence(std::memory_order_acquire);
      ok = s.version.load(r) == v;
    }
    if (ok && c.id >= oldest && c.pgId >= 0 && static_cast<std::size_t>(c.pgId) < groups.size())
      slots.push_back(c);
  }
  std::sort(slots.begin(), slots.end(), [](const SlotCopy& a, const SlotCopy& b) { return a.id < b.id; });
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
    backend = groups_[static_cast<std::size_t>(pgId)].info.backend;
  }
  enqueued = progress_[static_cast<std::size_t>(pgId)].lastEnqueued.load(std::memory_order_relaxed);
  completed = progress_[static_cast<std::size_t>(pgId)].lastCompleted.load(std::memory_order_relaxed);
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
void flightStarted(const FlightHandle& handle, Work::Clock::time_point at) {
  FlightRecorder::instance().started(handle, at);
}
void flightFinished(const FlightHandle& handle, bool ok, Work::Clock::time_point at) {
  FlightRecorder::instance().finished(handle, ok, at);
}
}  // namespace detail

}  // namespace ds::comm
