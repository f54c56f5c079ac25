// The shared-memory segment of one shm process group on one host, and the waits on it.
//
// Layout: a header page (magic, version, job id, group, host, generation, nonce, sizes, attach count),
// one 128-byte control block per rank (its step counter, which is also its futex word, a sleeper
// count and its pid), then per rank two data slots of slotBytes (parity 0 and 1).
//
// Lifecycle: the host's leader creates the file under DS_SHM_DIR (default /dev/shm) with O_EXCL and a
// name no other run can produce (creator pid + random nonce), allocates it with posix_fallocate (so a
// full tmpfs is an error here, not a SIGBUS later) and publishes the name through the store. Every
// rank attaches, checks the header against what the store told it (job id, group, generation,
// nonce, size) and counts itself in; the last one to attach unlinks the name, so from then on a crash
// of any rank leaves nothing behind. Names left by a leader that crashed between creation and the
// last attach are removed by the next create() on the host (their creator pid is gone).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ds::comm::shm {

inline constexpr std::uint64_t kMagic = 0x3130304d48535344ull;  // "DSSHM001" little-endian
inline constexpr std::uint32_t kVersion = 2;
inline constexpr int kMaxLocalRanks = 512;
inline constexpr const char* kNamePrefix = "dsshm-";
inline constexpr int kMaskCpus = 512;  // CPUs a rank's published affinity mask can name

struct alignas(128) RankCtl {
  std::atomic<std::uint32_t> step;      // the rank's progress; waiters futex-wait on it
  std::atomic<std::uint32_t> sleepers;  // waiters blocked (or about to block) on `step`
  std::atomic<std::int32_t> pid;        // 0 until the rank attached
  std::atomic<std::uint32_t> failed;    // set by a rank that gave up (error), so peers stop waiting
  // The CPU the rank's op last ran on (sched_getcpu at each post and wait; -1: unknown), so that a
  // waiter yields its CPU only when a peer it waits for may be queued behind it there.
  std::atomic<std::int32_t> cpu;
  std::uint64_t pidNamespace;  // inode of the rank's pid namespace: pids compare only within one
  // The CPUs the rank may run on (its affinity mask, CPUs 0-511; all zero: unknown), so that every
  // rank can tell whether the host's ranks have a core each (then waiting spins) or share some.
  std::uint64_t cpuMask[kMaskCpus / 64];
};
static_assert(sizeof(RankCtl) == 128);

struct Header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t nranks;
  std::uint64_t generation;
  std::uint64_t nonce;
  std::uint64_t slotBytes;
  std::uint64_t totalBytes;
  char jobId[64];
  char group[96];
  char host[64];
  std::atomic<std::uint32_t> attached;
};

// What every rank of a host agrees on before the segment exists.
struct SegmentSpec {
  std::string dir = "/dev/shm";
  std::string jobId;
  std::string group;
  std::string host;
  std::uint64_t generation = 0;
  int nranks = 1;
  std::size_t slotBytes = 0;
};

class Segment {
 public:
  // Creates a new segment. Throws ConfigError when `dir` has too little free space (the message says
  // how much is needed and how to get it), IoError for other failures.
  static std::unique_ptr<Segment> create(const SegmentSpec& spec);
  // Opens the segment `name` created by create() on another rank and checks its header. Throws
  // ProtocolError when the segment belongs to another job, group, generation or layout, IoError when
  // it cannot be opened.
  static std::unique_ptr<Segment> attach(const SegmentSpec& spec, const std::string& name,
                                         std::uint64_t nonce);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  static std::size_t bytesFor(int nranks, std::size_t slotBytes);
  // Removes dsshm-<pidns>-<pid>-* files in dir, made in this pid namespace, whose creator pid no longer
  // exists. Returns how many.
  static int removeStale(const std::string& dir);

  const std::string& name() const { return name_; }
  std::string path() const;
  std::uint64_t nonce() const { return header_->nonce; }
  Header& header() { return *header_; }
  RankCtl& ctl(int r) { return ctls_[r]; }
  char* slot(int r, int parity) { return data_ + (static_cast<std::size_t>(r) * 2 + parity) * slotBytes_; }
  std::size_t slotBytes() const { return slotBytes_; }

  // Records this rank's pid and CPU mask and counts it in; the last of nranks to do so unlinks the
  // name.
  void markAttached(int localIndex);
  bool allAttached() const { return header_->attached.load() >= header_->nranks; }
  // Removes the name (idempotent; a no-op once unlinked).
  void unlink();

 private:
  Segment(std::string dir, std::string name, void* base, std::size_t bytes, bool linked);
  std::string dir_;
  std::string name_;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool linked_ = false;
  Header* header_ = nullptr;
  RankCtl* ctls_ = nullptr;
  char* data_ = nullptr;
  std::size_t slotBytes_ = 0;
};

// The pid-namespace inode of this process (0 when unknown).
std::uint64_t pidNamespaceInode();
// How many distinct CPUs the attached ranks' masks cover together (0 when a rank's mask is unknown):
// fewer than nranks means some ranks share a core.
int cpusCovered(Segment& seg, int nranks);
// Whether local rank `self` may run on a CPU some other attached rank may run on too (true when a
// mask is unknown).
bool sharesCpus(Segment& seg, int nranks, int self);

// futex on a 32-bit word of shared memory (not FUTEX_PRIVATE: the word is shared between processes).
// waitFutex returns when *word != expected, after a wake, or after `timeout`.
void waitFutex(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::chrono::nanoseconds timeout);
void wakeFutex(std::atomic<std::uint32_t>* word);

}  // namespace ds::comm::shm
