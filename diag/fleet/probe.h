// Fleet mode's own TCP: a probe listener on every host leader, reachability connects with bounded
// timeouts, and the link test of one pair over its own connection. Plain sockets, not a process
// group: one pair that hangs or fails costs that pair, never the run, and nothing waits for a
// full-mesh connect.
//
// Every connection opens with a hello (magic, the job id, the sender's rank, a purpose and a tag);
// the listener answers only members of this job (DESIGN.md "Isolation"), and closes anything else.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reports/diag/fleet_schema.h"

namespace ds::diag::fleet {

using Clock = std::chrono::steady_clock;
inline double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

enum class Purpose : std::uint8_t { kReach = 1, kLink = 2, kRing = 3 };

// The listener. One thread polls the listening socket and the connections whose hello is not
// complete (a peer that connects and then says nothing is dropped after 2 s); link and ring
// connections are kept for take().
class ProbeServer {
 public:
  // bindAddr "" listens on every interface, "127.0.0.1" on loopback only. isMember(rank) says
  // whether a rank belongs to the job (until the member list is known, any rank in 0..n-1).
  ProbeServer(const std::string& bindAddr, std::string jobId, std::function<bool(int)> isMember);
  ~ProbeServer();
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;

  int port() const { return port_; }
  // The connection `peer` opened with `purpose` and `tag`, or -1 when none came by the deadline.
  // The caller owns the fd.
  int take(int peer, Purpose purpose, int tag, Clock::time_point deadline);
  // Hellos refused (another job, not a member, garbage): for the report and the tests.
  int refused() const;

 private:
  void loop();
  int listenFd_ = -1;
  int port_ = 0;
  std::string jobId_;
  std::function<bool(int)> isMember_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, int> ready_;  // (peer, purpose, tag) -> fd
  int refused_ = 0;
  bool stop_ = false;
  int wakeFd_[2] = {-1, -1};
};

// One connect probe: from one of our interfaces (source address bound) to a peer's address.
struct ReachTarget {
  int peer = 0;
  std::string fromIface, fromAddr;  // fromAddr "" = let the kernel choose
  std::string toIface, toAddr;
  int port = 0;
};

struct ReachOptions {
  std::string jobId;
  int myRank = 0;
  std::chrono::milliseconds connectTimeout{2000};
  int window = 64;  // connects in flight
  bool retry = true;  // a failed probe is tried once more, alone, before it counts
};

// Probes every target (at most `window` at a time); a probe succeeds when the peer's listener
// answers our hello. Counts successes, keeps failures. `messages` counts connects made.
report::ReachSummary probeAll(const std::vector<ReachTarget>& targets, const ReachOptions& o, long long& messages);

struct LinkOptions {
  std::string jobId;
  int myRank = 0;
  std::size_t largeBytes = 4u << 20;
  std::chrono::milliseconds connectTimeout{2000};
  // This rank's link tests of the stage already went bad with several peers (FleetRun::runRounds):
  // the pair only connects and ends at once, recorded as kSkipped with the reason.
  bool shortTest = false;
};

// A pair that lasted longer than this once both ends were there counts as bad toward the short test
// (FleetRun::runRounds), as one that failed does: a healthy pair takes 0.1-0.3 s on the 64-host test
// bed (its slowest best-of-two 0.135 GB/s), one over a lossy link or a 30 Mbit/s NIC 2 s or more.
inline constexpr std::chrono::milliseconds kBadPairTime{1000};
// After this many peers with bad pairs in the links stage, a rank's remaining pairs of the stage are
// short tests: one more than the two clean witnesses that name a host (localise.cpp), and the
// confirmation stage re-tests it with healthy peers either way.
inline constexpr int kShortTestAfterBadPeers = 3;

// What the higher rank of a pair saw (servePair).
struct ServedPair {
  std::string error;       // "" or what went wrong (for the log; the lower rank reports the pair)
  bool peerGone = false;   // the peer was declared dead before it opened its connection
  double busySeconds = 0;  // from taking the peer's connection to the end of the pair
};

// Asked about twice a second while a rank waits for its pair's peer to arrive: true when the peer
// has been declared dead (its heartbeat stopped), which ends the wait.
using PeerGone = std::function<bool()>;

// The lower rank of a pair: connects to the peer's listener (tag = the round) and measures: a
// warm-up ping, which waits for the peer to arrive (it may still be busy with its previous round:
// until `arriveBy`, or until `peerGone` says it is dead, then the pair is kSkipped), then 7 small
// ping-pongs (median latency) and the large message both ways (best of 2; the warm-up alone when it
// was slow), all within `measureFor` of the peer's arrival. A pair that runs out is kTimeout with
// what it measured so far (a crawling link still gives a bandwidth from the bytes that moved).
// Short tests: with `o.shortTest` the pair ends right after connecting; when the peer answers the
// warm-up ping with its own short-test mark, right after the warm-up; either is kSkipped, with why.
// `busySeconds` (when given) gets the time from the peer's arrival to the end. The result carries the
// kernel's TCP counters of the connection (bytes sent, bytes sent again): this end's, plus the peer's
// when the pair ends normally (it answers a 'T' with its own).
report::PairResult measurePair(int peer, const std::string& addr, int port, int tag, const LinkOptions& o,
                               Clock::time_point arriveBy, std::chrono::milliseconds measureFor,
                               long long& messages, const PeerGone& peerGone = {}, double* busySeconds = nullptr);

// The higher rank: takes the peer's connection from the listener (waiting until `arriveBy`, or until
// `peerGone` says the peer is dead) and echoes until the peer is done or `measureFor` has passed
// since. With `shortTest` it marks its answer to the warm-up ping, and the lower rank ends the pair.
ServedPair servePair(ProbeServer& server, int peer, int tag, Clock::time_point arriveBy,
                     std::chrono::milliseconds measureFor, const PeerGone& peerGone = {}, bool shortTest = false);

// A ring over the probe connections among `ranks` (sorted, containing myRank): each rank sends a
// token to the next and receives from the previous, twice around, all before `deadline` (the
// bisection's group collective). `addrOf(rank)` gives a member's address and port. Returns "" or
// the error (which neighbour did not answer).
std::string ringCollective(ProbeServer& server, const std::vector<int>& ranks, int tag,
                           const std::function<std::pair<std::string, int>(int)>& addrOf, const std::string& jobId,
                           int myRank, Clock::time_point deadline, long long& messages);

// Connect, hello and the listener's answer, all before the deadline: the connected fd, or -1 with
// `why` (and `timedOut`). For link and ring connections; reachability uses probeAll.
int connectProbe(const std::string& fromAddr, const std::string& toAddr, int port, Purpose p, int myRank, int tag,
                 const std::string& jobId, Clock::time_point deadline, std::string& why, bool* timedOut = nullptr);

// "timed out after 2.0 s", "connection refused", ...: errno as an operator reads it.
std::string connectErrorText(int err, double seconds);

}  // namespace ds::diag::fleet
