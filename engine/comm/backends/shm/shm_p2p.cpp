#include "engine/comm/backends/shm/shm_p2p.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "engine/comm/backends/shm/shm_segment.h"
#include "engine/common/error.h"

namespace ds::comm::shm {

struct P2pRing::Shared {
  alignas(64) std::atomic<std::uint64_t> head;  // bytes the sender wrote since the start
  std::atomic<std::uint32_t> written;           // bumped after head moved: the receiver waits on it
  alignas(64) std::atomic<std::uint64_t> tail;  // bytes the receiver consumed since the start
  std::atomic<std::uint32_t> consumed;          // bumped after tail moved: the sender waits on it
  alignas(64) std::atomic<std::uint32_t> attached;  // sides that mapped the file
};

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kHeaderBytes = 4096;
static_assert(sizeof(P2pRing::Shared) <= kHeaderBytes);
// The longest single futex wait: abort(), the peer's death and the deadline are looked at between.
constexpr auto kSlice = std::chrono::milliseconds(100);
// How long a receive looks for its message on the caller's thread before a completion thread waits.
constexpr auto kBriefWait = std::chrono::microseconds(50);

struct MsgHeader {
  std::uint64_t bytes;
  std::int32_t tag;
  std::uint32_t seq;  // the pair's message number (mod 2^32): the receiver checks that none is missing
};
static_assert(sizeof(MsgHeader) == 16);

std::size_t padded(std::size_t n) { return (n + 15) & ~std::size_t{15}; }

void copyIn(char* ring, std::size_t cap, std::uint64_t pos, const char* src, std::size_t n) {
  const std::size_t at = static_cast<std::size_t>(pos % cap);
  const std::size_t first = std::min(n, cap - at);
  std::memcpy(ring + at, src, first);
  if (first < n) std::memcpy(ring, src + first, n - first);
}

void copyOut(char* dst, const char* ring, std::size_t cap, std::uint64_t pos, std::size_t n) {
  const std::size_t at = static_cast<std::size_t>(pos % cap);
  const std::size_t first = std::min(n, cap - at);
  std::memcpy(dst, ring + at, first);
  if (first < n) std::memcpy(dst + first, ring, n - first);
}

void bump(std::atomic<std::uint32_t>& word) {
  word.fetch_add(1, std::memory_order_release);
  wakeFutex(&word);
}

// Sleeps on `word` (last seen as `seen`) for at most a slice; throws when the op was aborted, the peer
// died or `deadline` passed. `waitingFor`: "to receive what rank 3 sent" and the like.
void waitWord(std::atomic<std::uint32_t>& word, std::uint32_t seen, Clock::time_point deadline,
              const std::atomic<bool>& aborted, const P2pPeer& peer, const std::string& waitingFor) {
  if (aborted.load()) throw BackendError("aborted");
  if (peer.gone && peer.gone()) {
    throw BackendError(fmt::format("rank {} on host {} exited while rank {} waited for it {}: it crashed or "
                                   "was killed; see its log",
                                   peer.peer, peer.host, peer.self, waitingFor));
  }
  const auto now = Clock::now();
  if (now >= deadline) {
    throw TimeoutError(fmt::format("rank {} waited for rank {} {} until the op's timeout", peer.self, peer.peer,
                                   waitingFor));
  }
  waitFutex(&word, seen, std::min<Clock::duration>(kSlice, deadline - now));
}

}  // namespace

std::string p2pFileName(std::uint64_t dstPidNamespace, std::int32_t dstPid, std::uint64_t nonce, int srcLocal,
                        int dstLocal) {
  // dsshm-<pidns>-<pid>-...: removeStale's pattern, so a crashed receiver's pairs are removed too.
  return fmt::format("{}{}-{}-p2p-{:016x}-{}-{}", kNamePrefix, dstPidNamespace, dstPid, nonce, srcLocal,
                     dstLocal);
}

P2pRing::P2pRing(const std::string& dir, const std::string& name, std::size_t ringBytes, bool receiving)
    : path_(dir + "/" + name), receiving_(receiving), bytes_(kHeaderBytes + ringBytes), cap_(ringBytes) {
  DS_CHECK(ringBytes > 0 && ringBytes % 16 == 0, "shm p2p ring of {} bytes", ringBytes);
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int e = errno;
    throw IoError(fmt::format("the shm backend could not open {} for send/recv ({}). Check that {} is a "
                              "writable tmpfs, or set DS_SHM_DIR.",
                              path_, errnoText(e), dir));
  }
  // Both sides allocate the same size; the second finds it done. Not ftruncate alone: on a full tmpfs
  // the first touch of a missing page would be a SIGBUS.
  int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
  if (rc != 0) {
    ::close(fd);
    ::unlink(path_.c_str());
    if (rc == ENOSPC) {
      throw ConfigError(fmt::format("{} is full: the shm backend needs {:.1f} MiB there for send/recv between "
                                    "two ranks. Free space in it (or enlarge it), or set DS_SHM_DIR.",
                                    dir, static_cast<double>(bytes_) / (1 << 20)));
    }
    throw IoError(fmt::format("the shm backend could not allocate {} ({}).", path_, errnoText(rc)));
  }
  base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw IoError(fmt::format("the shm backend could not map {}: {}.", path_, errnoText(e)));
  }
  // A fresh file reads as zeros: every counter starts at 0.
  shared_ = static_cast<Shared*>(base_);
  ring_ = static_cast<char*>(base_) + kHeaderBytes;
  if (shared_->attached.fetch_add(1) + 1 >= 2) ::unlink(path_.c_str());  // both sides have it now
}

P2pRing::~P2pRing() {
  // A receiver whose sender never attached: nobody else would remove the name. (A sender leaves it:
  // its receiver may attach later and read what it sent.)
  if (receiving_ && shared_ != nullptr && shared_->attached.load() < 2) ::unlink(path_.c_str());
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

// --- sending ---------------------------------------------------------------------------------------

class P2pSender::Posted final : public ProcessGroup::PostedP2p {
 public:
  Posted(P2pSender& s, std::uint64_t ticket, const void* data, std::size_t bytes, int tag)
      : s_(s), ticket_(ticket), data_(static_cast<const char*>(data)), bytes_(bytes), tag_(tag) {}

  bool completeBriefly() override {
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      if (s_.serving_ != ticket_) return false;
    }
    if (!write(false, Clock::time_point::max())) return false;
    finish();
    return true;
  }

  void complete(Clock::time_point deadline) override {
    {
      std::unique_lock<std::mutex> lock(s_.mu_);
      while (s_.serving_ != ticket_) {
        if (aborted_.load()) throw BackendError("aborted");
        const auto now = Clock::now();
        if (now >= deadline) {
          throw TimeoutError(fmt::format("rank {}'s earlier sends to rank {} did not leave within the op's "
                                         "timeout (rank {} did not receive them)",
                                         s_.peer_.self, s_.peer_.peer, s_.peer_.peer));
        }
        s_.cv_.wait_until(lock, std::min<Clock::time_point>(deadline, now + kSlice));
      }
    }
    write(true, deadline);
    finish();
  }

  void abort() override {
    aborted_.store(true);
    wakeFutex(&s_.ring_->shared().consumed);
    std::lock_guard<std::mutex> lock(s_.mu_);
    s_.cv_.notify_all();
  }

 private:
  // Writes what fits of the message; false when it is not all in and may not wait (mayBlock false).
  bool write(bool mayBlock, Clock::time_point deadline) {
    P2pRing& ring = *s_.ring_;
    P2pRing::Shared& sh = ring.shared();
    const std::size_t cap = ring.capacity();
    const std::size_t total = sizeof(MsgHeader) + padded(bytes_);
    while (done_ < total) {
      const std::uint32_t seen = sh.consumed.load(std::memory_order_acquire);
      const std::uint64_t head = sh.head.load(std::memory_order_relaxed);  // this side alone moves it
      std::size_t room = cap - static_cast<std::size_t>(head - sh.tail.load(std::memory_order_acquire));
      if (room == 0) {
        if (!mayBlock) return false;
        waitWord(sh.consumed, seen, deadline, aborted_, s_.peer_,
                 fmt::format("to receive what it sent (the ring of {} bytes is full)", cap));
        continue;
      }
      // Every position and amount is a multiple of 16, so a header never wraps.
      std::uint64_t pos = head;
      while (room > 0 && done_ < total) {
        if (done_ == 0) {
          const MsgHeader h{bytes_, tag_, static_cast<std::uint32_t>(ticket_)};
          copyIn(ring.ring(), cap, pos, reinterpret_cast<const char*>(&h), sizeof h);
          pos += sizeof h;
          room -= sizeof h;
          done_ = sizeof h;
          continue;
        }
        const std::size_t n = std::min(room, total - done_);
        const std::size_t off = done_ - sizeof(MsgHeader);
        if (off < bytes_) copyIn(ring.ring(), cap, pos, data_ + off, std::min(n, bytes_ - off));
        pos += n;
        room -= n;
        done_ += n;
      }
      sh.head.store(pos, std::memory_order_release);
      bump(sh.written);
    }
    return true;
  }

  void finish() {
    std::lock_guard<std::mutex> lock(s_.mu_);
    ++s_.serving_;
    s_.cv_.notify_all();
  }

  P2pSender& s_;
  const std::uint64_t ticket_;
  const char* data_;
  const std::size_t bytes_;
  const int tag_;
  std::size_t done_ = 0;  // bytes of header and padded payload in the ring
  std::atomic<bool> aborted_{false};
};

std::unique_ptr<ProcessGroup::PostedP2p> P2pSender::post(const void* data, std::size_t bytes, int tag) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_unique<Posted>(*this, posted_++, data, bytes, tag);
}

// --- receiving -------------------------------------------------------------------------------------

class P2pReceiver::Posted final : public ProcessGroup::PostedP2p {
 public:
  Posted(P2pReceiver& r, std::uint64_t ticket, void* data, std::size_t bytes, int tag)
      : r_(r), ticket_(ticket), data_(static_cast<char*>(data)), bytes_(bytes), tag_(tag) {}

  bool completeBriefly() override {
    std::unique_lock<std::mutex> lock(r_.mu_);
    if (!r_.broken_.empty()) throw BackendError(r_.broken_);
    if (r_.turns_[tag_].served != ticket_) return false;
    if (takeAside()) return true;
    if (r_.reading_) return false;
    // Only a message that is whole in the ring, and this receive's. A peer that sends at about the
    // same time (a pipeline's neighbour) is given kBriefWait, yielding the CPU at every look: a
    // handoff to a completion thread and back costs two wake-ups, hundreds of us on a VM.
    P2pRing& ring = *r_.ring_;
    P2pRing::Shared& sh = ring.shared();
    const std::uint64_t tail = sh.tail.load(std::memory_order_relaxed);
    const auto until = Clock::now() + kBriefWait;
    MsgHeader h{};
    while (true) {
      const std::uint64_t avail = sh.head.load(std::memory_order_acquire) - tail;
      if (avail >= sizeof h) {
        copyOut(reinterpret_cast<char*>(&h), ring.ring(), ring.capacity(), tail, sizeof h);
        if (h.tag != tag_) return false;
        if (avail >= sizeof h + padded(h.bytes)) break;
      }
      if (Clock::now() >= until) return false;
      sched_yield();
    }
    r_.reading_ = true;
    lock.unlock();
    const MsgHeader got = *readHeader(Clock::time_point::max(), [] { return false; });
    readPayload(got, got.bytes == bytes_ ? data_ : nullptr, Clock::time_point::max());
    lock.lock();
    r_.reading_ = false;
    served();
    if (got.bytes != bytes_) throw mismatch(got.bytes);
    return true;
  }

  void complete(Clock::time_point deadline) override {
    std::unique_lock<std::mutex> lock(r_.mu_);
    while (true) {
      if (aborted_.load()) throw BackendError("aborted");
      if (!r_.broken_.empty()) throw BackendError(r_.broken_);
      if (r_.turns_[tag_].served == ticket_ && takeAside()) return;
      if (!r_.reading_) {
        r_.reading_ = true;
        lock.unlock();
        std::optional<MsgHeader> next;
        try {
          // Stops waiting when this receive's own message turns up aside (read ahead by another while
          // it was not its turn): the message this reader would wait for may never come.
          next = readHeader(deadline, [&] {
            std::lock_guard<std::mutex> look(r_.mu_);
            return r_.turns_[tag_].served == ticket_ && hasAside();
          });
        } catch (...) {
          // Nothing of a message was consumed: another receive may read on.
          lock.lock();
          r_.reading_ = false;
          r_.cv_.notify_all();
          throw;
        }
        lock.lock();
        if (!next) {
          r_.reading_ = false;
          r_.cv_.notify_all();
          continue;
        }
        const MsgHeader h = *next;
        // This receive's own message only if every earlier one of its tag is taken: the turn may have
        // come to it while it read, with messages of its tag read ahead by others still kept aside.
        const bool mine = h.tag == tag_ && r_.turns_[tag_].served == ticket_ && !hasAside();
        lock.unlock();
        std::vector<char> aside;
        char* dst = nullptr;
        if (!mine) {
          aside.resize(h.bytes);
          dst = aside.data();
        } else if (h.bytes == bytes_) {
          dst = data_;
        }
        try {
          readPayload(h, dst, deadline);
        } catch (const std::exception& e) {
          lock.lock();
          r_.broken_ = fmt::format("an earlier receive from rank {} stopped in the middle of a message ({}); "
                                   "the messages that follow cannot be told apart. Restart the job",
                                   r_.peer_.peer, e.what());
          r_.reading_ = false;
          r_.cv_.notify_all();
          throw;
        }
        lock.lock();
        r_.reading_ = false;
        if (mine) {
          served();
          if (h.bytes != bytes_) throw mismatch(h.bytes);
          return;
        }
        r_.aside_.push_back(Aside{h.tag, std::move(aside)});
        r_.cv_.notify_all();
        kickReader();
        continue;
      }
      const auto now = Clock::now();
      if (now >= deadline) {
        throw TimeoutError(fmt::format("rank {} waited for rank {} to send a message with tag {} until the op's "
                                       "timeout",
                                       r_.peer_.self, r_.peer_.peer, tag_));
      }
      r_.cv_.wait_until(lock, std::min<Clock::time_point>(deadline, now + kSlice));
    }
  }

  void abort() override {
    aborted_.store(true);
    wakeFutex(&r_.ring_->shared().written);
    std::lock_guard<std::mutex> lock(r_.mu_);
    r_.cv_.notify_all();
  }

 private:
  // The first message of this receive's tag kept aside, if any: copied out, and this receive's turn
  // passes on. r_.mu_ held. Throws mismatch() after passing the turn on.
  bool takeAside() {
    auto it = std::find_if(r_.aside_.begin(), r_.aside_.end(), [&](const Aside& a) { return a.tag == tag_; });
    if (it == r_.aside_.end()) return false;
    const std::size_t got = it->data.size();
    if (got == bytes_ && got > 0) std::memcpy(data_, it->data.data(), got);
    r_.aside_.erase(it);
    served();
    if (got != bytes_) throw mismatch(got);
    return true;
  }

  // This receive matched: the next of its tag may go. r_.mu_ held.
  void served() {
    ++r_.turns_[tag_].served;
    r_.cv_.notify_all();
    kickReader();
  }

  // Whether a message of this receive's tag is kept aside. r_.mu_ held.
  bool hasAside() const {
    return std::any_of(r_.aside_.begin(), r_.aside_.end(), [&](const Aside& a) { return a.tag == tag_; });
  }

  // Wakes a receive blocked in readHeader, so that it looks whether its own message is aside now (the
  // word only counts changes; bumping it from this side is harmless).
  void kickReader() { bump(r_.ring_->shared().written); }

  BackendError mismatch(std::size_t got) const {
    return BackendError(fmt::format("recv from rank {} (tag {}) expected {} bytes but rank {} sent {} bytes with "
                                    "that tag; the sender's count and dtype must match the receiver's",
                                    r_.peer_.peer, tag_, bytes_, r_.peer_.peer, got));
  }

  // Waits for the next message's header and consumes it; nullopt, consuming nothing, once `stop()`
  // says so. Throws on abort, the peer's death, the deadline, or a header out of sequence (the pair is
  // out of step).
  template <class Stop>
  std::optional<MsgHeader> readHeader(Clock::time_point deadline, Stop&& stop) {
    P2pRing& ring = *r_.ring_;
    P2pRing::Shared& sh = ring.shared();
    while (true) {
      const std::uint32_t seen = sh.written.load(std::memory_order_acquire);
      const std::uint64_t tail = sh.tail.load(std::memory_order_relaxed);
      if (sh.head.load(std::memory_order_acquire) - tail >= sizeof(MsgHeader)) {
        MsgHeader h{};
        copyOut(reinterpret_cast<char*>(&h), ring.ring(), ring.capacity(), tail, sizeof h);
        if (h.seq != r_.nextSeq_) {
          throw BackendError(fmt::format("the shm ring from rank {} to rank {} holds message {} where message {} "
                                         "should start: the two ranks are out of step. Restart the job",
                                         r_.peer_.peer, r_.peer_.self, h.seq, r_.nextSeq_));
        }
        ++r_.nextSeq_;
        sh.tail.store(tail + sizeof h, std::memory_order_release);
        bump(sh.consumed);
        return h;
      }
      if (stop()) return std::nullopt;
      waitWord(sh.written, seen, deadline, aborted_, r_.peer_, fmt::format("to send (tag {})", tag_));
    }
  }

  // Consumes the payload of `h` as it arrives, into dst (nullptr: dropped).
  void readPayload(const MsgHeader& h, char* dst, Clock::time_point deadline) {
    P2pRing& ring = *r_.ring_;
    P2pRing::Shared& sh = ring.shared();
    const std::size_t cap = ring.capacity();
    const std::size_t total = padded(h.bytes);
    std::size_t got = 0;
    while (got < total) {
      const std::uint32_t seen = sh.written.load(std::memory_order_acquire);
      const std::uint64_t tail = sh.tail.load(std::memory_order_relaxed);
      const std::size_t avail = static_cast<std::size_t>(sh.head.load(std::memory_order_acquire) - tail);
      if (avail == 0) {
        waitWord(sh.written, seen, deadline, aborted_, r_.peer_,
                 fmt::format("to send the rest of a {}-byte message", h.bytes));
        continue;
      }
      const std::size_t n = std::min(avail, total - got);
      if (dst != nullptr && got < h.bytes) copyOut(dst + got, ring.ring(), cap, tail, std::min(n, h.bytes - got));
      sh.tail.store(tail + n, std::memory_order_release);
      bump(sh.consumed);
      got += n;
    }
  }

  P2pReceiver& r_;
  const std::uint64_t ticket_;
  char* data_;
  const std::size_t bytes_;
  const int tag_;
  std::atomic<bool> aborted_{false};
};

std::unique_ptr<ProcessGroup::PostedP2p> P2pReceiver::post(void* data, std::size_t bytes, int tag) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_unique<Posted>(*this, turns_[tag].posted++, data, bytes, tag);
}

}  // namespace ds::comm::shm
