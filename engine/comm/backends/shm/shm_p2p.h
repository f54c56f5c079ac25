// send and recv of the shm backend: a ring per ordered pair of ranks of one host, in a file of its own
// under DS_SHM_DIR, and the posted ops that move messages through it (ProcessGroup::postPointToPoint).
//
// Layout: a 4 KiB header (the sender's `head` and the receiver's `tail`, bytes written and consumed
// since the start; a futex word each side bumps after moving its end; how many sides have attached),
// then the ring. A message is a 16-byte header (bytes, tag) and its payload rounded up to 16 bytes;
// one larger than the ring streams through it, the sender writing as the receiver frees space.
//
// Posting never waits for the peer: a send whose message fits in the ring's free space is complete
// when it is copied in (as an eager MPI send), and every op waits for its peer on a completion thread
// of the group (or briefly on the caller's, completeBriefly), so every rank may send first.
//
// Matching: messages of one pair arrive in the order sent. Receives of one (peer, tag) match them in
// the order posted; a receive that finds another tag's message ahead of its own keeps that message
// aside (a copy in this process) for the receive of that tag, as MPI's unexpected-message queue does,
// so tags may be received in any order. A message whose size differs from its receive's fails that
// receive, naming both ranks and both sizes; the message is consumed, the pair stays usable.
//
// Lifecycle: both sides open the file with O_CREAT (the name derives from the receiver's pid and pid
// namespace, the group's segment nonce and the two local ranks, so both compute it and removeStale
// removes it after a crash); the second to attach unlinks the name. A sender may finish and destroy its
// group before its receiver attached (its messages wait in the file); a receiver's group, destroyed,
// removes the names of every pair toward it that is still linked.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"

namespace ds::comm::shm {

// What a waiting side needs from its group: who it is, who the peer is, and whether the peer died.
struct P2pPeer {
  int self = 0;              // this rank (the group's)
  int peer = 0;              // the other rank (the group's)
  std::string host;          // for messages
  std::function<bool()> gone;  // the peer's process exited (checked while waiting)
};

// One side of one ordered pair's file, mapped.
class P2pRing {
 public:
  // Opens (creating if needed) dir/name with a ring of ringBytes (a multiple of 16), as the pair's
  // receiving side or its sending side. Throws IoError or ConfigError (a full tmpfs) naming the file.
  P2pRing(const std::string& dir, const std::string& name, std::size_t ringBytes, bool receiving);
  ~P2pRing();
  P2pRing(const P2pRing&) = delete;
  P2pRing& operator=(const P2pRing&) = delete;

  struct Shared;
  Shared& shared() { return *shared_; }
  char* ring() { return ring_; }
  std::size_t capacity() const { return cap_; }

 private:
  std::string path_;
  bool receiving_ = false;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  Shared* shared_ = nullptr;
  char* ring_ = nullptr;
  std::size_t cap_ = 0;
};

// This rank's sending side toward one peer: sends go into the ring whole and in the order posted.
class P2pSender {
 public:
  P2pSender(std::unique_ptr<P2pRing> ring, P2pPeer peer) : ring_(std::move(ring)), peer_(std::move(peer)) {}
  std::unique_ptr<ProcessGroup::PostedP2p> post(const void* data, std::size_t bytes, int tag);

 private:
  class Posted;
  std::unique_ptr<P2pRing> ring_;
  P2pPeer peer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t posted_ = 0;   // tickets handed out
  std::uint64_t serving_ = 0;  // the ticket whose message is being written
};

// This rank's receiving side from one peer.
class P2pReceiver {
 public:
  P2pReceiver(std::unique_ptr<P2pRing> ring, P2pPeer peer) : ring_(std::move(ring)), peer_(std::move(peer)) {}
  std::unique_ptr<ProcessGroup::PostedP2p> post(void* data, std::size_t bytes, int tag);

 private:
  class Posted;
  struct Aside {
    int tag;
    std::vector<char> data;
  };
  struct TagTurn {
    std::uint64_t posted = 0;
    std::uint64_t served = 0;
  };
  std::unique_ptr<P2pRing> ring_;
  P2pPeer peer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, TagTurn> turns_;  // per tag: receives posted and matched
  std::deque<Aside> aside_;       // messages read ahead of their receive, in arrival order
  bool reading_ = false;          // a receive is reading a message out of the ring
  std::uint32_t nextSeq_ = 0;     // the number the next message must carry (whoever reads it)
  std::string broken_;            // set when a read was cut off mid-message: the ring is out of step
};

// The file name of the pair (src -> dst, local ranks) of the segment `nonce`, whose receiver has
// `dstPid` in pid namespace `dstPidNamespace`.
std::string p2pFileName(std::uint64_t dstPidNamespace, std::int32_t dstPid, std::uint64_t nonce, int srcLocal,
                        int dstLocal);

}  // namespace ds::comm::shm
