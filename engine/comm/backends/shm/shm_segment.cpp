#include "engine/comm/backends/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <iterator>
#include <new>

#include "engine/common/error.h"
#include "engine/host/resources.h"

namespace ds::comm::shm {
namespace {

constexpr std::size_t kPage = 4096;

std::size_t roundUp(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

std::size_t ctlBytes(int nranks) {
  return roundUp(static_cast<std::size_t>(nranks) * sizeof(RankCtl), kPage);
}

double mib(std::size_t b) { return static_cast<double>(b) / (1 << 20); }

void copyField(char* dst, std::size_t cap, const std::string& s) {
  std::size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

std::string field(const char* src, std::size_t cap) { return std::string(src, strnlen(src, cap)); }

std::string clipped(const std::string& s, std::size_t cap) { return s.substr(0, cap - 1); }

std::uint64_t randomNonce() {
  std::uint64_t v = 0;
  if (::getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
    v = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (static_cast<std::uint64_t>(::getpid()) << 40);
  }
  return v;
}

std::string tooSmall(const SegmentSpec& spec, std::size_t need, std::size_t avail, std::size_t total) {
  return fmt::format(
      "the shm backend needs {:.1f} MiB in {} for group '{}' on host {} ({} local ranks x 2 slots x {:.1f} "
      "MiB "
      "+ header), but only {:.1f} MiB of {:.1f} MiB are free. Give {} more room (docker run --shm-size=..., "
      "or mount -o remount,size=... {}), remove stale files there, or lower DS_SHM_BUFFER_BYTES (now {} "
      "bytes per slot).",
      mib(need), spec.dir, spec.group, spec.host, spec.nranks, mib(spec.slotBytes), mib(avail), mib(total),
      spec.dir, spec.dir, spec.slotBytes);
}

}  // namespace

std::uint64_t pidNamespaceInode() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_ino);
}

std::size_t Segment::bytesFor(int nranks, std::size_t slotBytes) {
  return kPage + ctlBytes(nranks) + static_cast<std::size_t>(nranks) * 2 * roundUp(slotBytes, kPage);
}

Segment::Segment(std::string dir, std::string name, void* base, std::size_t bytes, bool linked)
    : dir_(std::move(dir)), name_(std::move(name)), base_(base), bytes_(bytes), linked_(linked) {
  header_ = static_cast<Header*>(base_);
  ctls_ = reinterpret_cast<RankCtl*>(static_cast<char*>(base_) + kPage);
  data_ = static_cast<char*>(base_) + kPage + ctlBytes(static_cast<int>(header_->nranks));
  slotBytes_ = header_->slotBytes;
}

Segment::~Segment() {
  if (linked_) unlink();
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

std::string Segment::path() const { return dir_ + "/" + name_; }

void Segment::unlink() {
  if (!linked_) return;
  linked_ = false;
  ::unlink(path().c_str());  // ENOENT: another rank got there first
}

void Segment::markAttached(int localIndex) {
  RankCtl& c = ctl(localIndex);
  c.pidNamespace = pidNamespaceInode();
  std::fill(std::begin(c.cpuMask), std::end(c.cpuMask), 0);
  for (int cpu : sys::affinityCpus()) {
    if (cpu < kMaskCpus) c.cpuMask[cpu / 64] |= std::uint64_t{1} << (cpu % 64);
  }
  c.cpu.store(::sched_getcpu(), std::memory_order_relaxed);
  c.pid.store(static_cast<std::int32_t>(::getpid()));  // publishes the fields above (seq_cst)
  linked_ = true;                                      // any rank may be the last one, and then unlinks
  if (header_->attached.fetch_add(1) + 1 == header_->nranks) unlink();
}

int cpusCovered(Segment& seg, int nranks) {
  std::uint64_t all[kMaskCpus / 64] = {};
  for (int r = 0; r < nranks; ++r) {
    const RankCtl& c = seg.ctl(r);
    bool known = false;
    for (std::size_t w = 0; w < std::size(all); ++w) {
      all[w] |= c.cpuMask[w];
      known = known || c.cpuMask[w] != 0;
    }
    if (!known) return 0;
  }
  int n = 0;
  for (std::uint64_t w : all) n += __builtin_popcountll(w);
  return n;
}

bool sharesCpus(Segment& seg, int nranks, int self) {
  const RankCtl& me = seg.ctl(self);
  for (int r = 0; r < nranks; ++r) {
    if (r == self) continue;
    const RankCtl& c = seg.ctl(r);
    bool known = false;
    for (std::size_t w = 0; w < std::size(c.cpuMask); ++w) {
      if ((me.cpuMask[w] & c.cpuMask[w]) != 0) return true;
      known = known || c.cpuMask[w] != 0;
    }
    if (!known) return true;
  }
  return false;
}

std::unique_ptr<Segment> Segment::create(const SegmentSpec& spec) {
  DS_CHECK(spec.nranks >= 1 && spec.nranks <= kMaxLocalRanks, "shm: {} local ranks", spec.nranks);
  removeStale(spec.dir);
  const std::size_t slot = roundUp(spec.slotBytes, kPage);
  const std::size_t bytes = bytesFor(spec.nranks, slot);
  struct statvfs vfs {};
  if (::statvfs(spec.dir.c_str(), &vfs) != 0) {
    int e = errno;
    throw IoError(
        fmt::format("the shm backend cannot use {} ({}): {}. Set DS_SHM_DIR to a tmpfs directory "
                    "every local rank can reach, or choose another backend.",
                    spec.dir, errnoText(e), e == ENOENT ? "it does not exist" : "statvfs failed"));
  }
  const std::size_t avail = static_cast<std::size_t>(vfs.f_bavail) * vfs.f_frsize;
  const std::size_t total = static_cast<std::size_t>(vfs.f_blocks) * vfs.f_frsize;
  if (avail < bytes) throw ConfigError(tooSmall(spec, bytes, avail, total));

  const std::uint64_t nonce = randomNonce();
  // The pid namespace is part of the name: a pid is only meaningful (to removeStale) within its own.
  const std::string name =
      fmt::format("{}{}-{}-{:016x}", kNamePrefix, pidNamespaceInode(), ::getpid(), nonce);
  const std::string path = spec.dir + "/" + name;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int e = errno;
    throw IoError(
        fmt::format("the shm backend could not create {} ({}). Check that {} is a writable tmpfs, "
                    "or set DS_SHM_DIR.",
                    path, errnoText(e), spec.dir));
  }
  // posix_fallocate, not ftruncate alone: on a full tmpfs ftruncate succeeds and the first touch of a
  // missing page kills the process with SIGBUS.
  int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    if (rc == ENOSPC) {
      if (::statvfs(spec.dir.c_str(), &vfs) == 0) {
        throw ConfigError(
            tooSmall(spec, bytes, static_cast<std::size_t>(vfs.f_bavail) * vfs.f_frsize, total));
      }
      throw ConfigError(tooSmall(spec, bytes, 0, total));
    }
    throw IoError(fmt::format("the shm backend could not allocate {:.1f} MiB for {} ({}).", mib(bytes), path,
                              errnoText(rc)));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    ::unlink(path.c_str());
    throw IoError(
        fmt::format("the shm backend could not map {} ({:.1f} MiB): {}.", path, mib(bytes), errnoText(e)));
  }
  auto* h = new (base) Header{};
  h->version = kVersion;
  h->nranks = static_cast<std::uint32_t>(spec.nranks);
  h->generation = spec.generation;
  h->nonce = nonce;
  h->slotBytes = slot;
  h->totalBytes = bytes;
  copyField(h->jobId, sizeof(h->jobId), spec.jobId);
  copyField(h->group, sizeof(h->group), spec.group);
  copyField(h->host, sizeof(h->host), spec.host);
  auto* ctls = reinterpret_cast<RankCtl*>(static_cast<char*>(base) + kPage);
  for (int r = 0; r < spec.nranks; ++r) new (&ctls[r]) RankCtl{};
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // The magic goes last: a rank that sees it sees a complete header.
  reinterpret_cast<std::atomic<std::uint64_t>*>(&h->magic)->store(kMagic);
  return std::unique_ptr<Segment>(new Segment(spec.dir, name, base, bytes, true));
}

std::unique_ptr<Segment> Segment::attach(const SegmentSpec& spec, const std::string& name,
                                         std::uint64_t nonce) {
  const std::string path = spec.dir + "/" + name;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int e = errno;
    throw IoError(fmt::format(
        "the shm backend could not open {} ({}), the segment the host's first rank created for group '{}' on "
        "host {}. Every rank of a host must see the same {} (same machine, same container or --ipc=host).",
        path, errnoText(e), spec.group, spec.host, spec.dir));
  }
  struct stat st {};
  ::fstat(fd, &st);
  const std::size_t bytes = bytesFor(spec.nranks, roundUp(spec.slotBytes, kPage));
  if (static_cast<std::size_t>(st.st_size) != bytes) {
    ::close(fd);
    throw ProtocolError(fmt::format(
        "the shm segment {} has {} bytes, but group '{}' with {} local ranks and {}-byte slots needs {}: it "
        "belongs to another run or the ranks disagree on DS_SHM_BUFFER_BYTES. Give every rank the same "
        "DS_SHM_BUFFER_BYTES.",
        path, st.st_size, spec.group, spec.nranks, spec.slotBytes, bytes));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    throw IoError(fmt::format("the shm backend could not map {}: {}.", path, errnoText(e)));
  }
  auto* h = static_cast<Header*>(base);
  std::string why;
  if (reinterpret_cast<std::atomic<std::uint64_t>*>(&h->magic)->load() != kMagic) {
    why = "it has no dsperf shm header";
  } else if (h->version != kVersion) {
    why = fmt::format("its layout version is {}, this build speaks {}", h->version, kVersion);
  } else if (field(h->jobId, sizeof(h->jobId)) != clipped(spec.jobId, sizeof(h->jobId))) {
    why = fmt::format("it belongs to job '{}', not '{}'", field(h->jobId, sizeof(h->jobId)), spec.jobId);
  } else if (field(h->group, sizeof(h->group)) != clipped(spec.group, sizeof(h->group))) {
    why = fmt::format("it belongs to group '{}', not '{}'", field(h->group, sizeof(h->group)), spec.group);
  } else if (h->generation != spec.generation) {
    why = fmt::format("it is generation {} of the group, this rank joins generation {}", h->generation,
                      spec.generation);
  } else if (h->nonce != nonce) {
    why = "its nonce differs from the one the leader published (a stale segment of a crashed run)";
  } else if (h->nranks != static_cast<std::uint32_t>(spec.nranks) ||
             h->slotBytes != roundUp(spec.slotBytes, kPage)) {
    why = fmt::format("it was made for {} ranks x {} bytes, not {} x {}", h->nranks, h->slotBytes,
                      spec.nranks, spec.slotBytes);
  }
  if (!why.empty()) {
    ::munmap(base, bytes);
    throw ProtocolError(
        fmt::format("refusing the shm segment {}: {}. Nothing was written to it; this is a "
                    "leftover of another run or a misconfigured job.",
                    path, why));
  }
  return std::unique_ptr<Segment>(new Segment(spec.dir, name, base, bytes, false));
}

int Segment::removeStale(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  const std::string prefix = fmt::format("{}{}-", kNamePrefix, pidNamespaceInode());
  while (dirent* ent = ::readdir(d)) {
    // Only names from our own pid namespace: another namespace's pids mean nothing here.
    if (std::strncmp(ent->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(ent->d_name + prefix.size(), &end, 10);
    if (end == ent->d_name + prefix.size() || *end != '-' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      if (::unlinkat(::dirfd(d), ent->d_name, 0) == 0) ++removed;
    }
  }
  ::closedir(d);
  return removed;
}

void waitFutex(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::chrono::nanoseconds timeout) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void wakeFutex(std::atomic<std::uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace ds::comm::shm
