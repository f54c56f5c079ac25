// ds_fleet_delay: adds a fixed delay to the packets of one network namespace, for the fleet test bed
// (diag/tests/fleet.sh `fault delay`) on kernels without sch_netem. iptables sends the host's
// packets to NFQUEUE queue `--queue`; this program holds each one for `--ms` milliseconds and then
// accepts it, in arrival order. Only the packets' metadata crosses to userspace (no payload copy).
//   ds_fleet_delay --queue N --ms D
// Runs until killed (fleet.sh teardown kills every process of the fleet's namespaces).
#include <arpa/inet.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

struct Held {
  std::uint32_t id;
  Clock::time_point due;
};

std::deque<Held> held;
std::chrono::milliseconds delay{0};

int onPacket(nfq_q_handle*, nfgenmsg*, nfq_data* nfa, void*) {
  if (auto* ph = nfq_get_msg_packet_hdr(nfa)) held.push_back({ntohl(ph->packet_id), Clock::now() + delay});
  return 0;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "ds_fleet_delay: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  int queue = -1;
  long ms = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--queue") queue = std::atoi(argv[i + 1]);
    if (a == "--ms") ms = std::atol(argv[i + 1]);
  }
  if (queue < 0 || queue > 65535 || ms < 0 || ms > 10000) {
    std::fprintf(stderr, "usage: ds_fleet_delay --queue N (0..65535) --ms D (0..10000)\n");
    return 2;
  }
  delay = std::chrono::milliseconds(ms);
  nfq_handle* h = nfq_open();
  if (h == nullptr) fail("cannot open a netfilter queue handle (needs CAP_NET_ADMIN)");
  nfq_q_handle* q = nfq_create_queue(h, static_cast<std::uint16_t>(queue), &onPacket, nullptr);
  if (q == nullptr) fail("cannot bind NFQUEUE queue " + std::to_string(queue));
  if (nfq_set_mode(q, NFQNL_COPY_META, 0) < 0) fail("cannot set the queue to metadata only");
  nfq_set_queue_maxlen(q, 65536);
  // Whole GSO packets: one verdict per large send instead of one per segment.
  nfq_set_queue_flags(q, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
  int fd = nfq_fd(h);
  int rcvbuf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  std::printf("ds_fleet_delay: queue %d, %ld ms\n", queue, ms);
  std::fflush(stdout);
  alignas(8) static char buf[1 << 16];
  for (;;) {
    int wait = -1;
    if (!held.empty()) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(held.front().due - Clock::now()).count();
      wait = left > 0 ? static_cast<int>(left) : 0;
    }
    pollfd p{fd, POLLIN, 0};
    int n = poll(&p, 1, wait);
    if (n < 0 && errno != EINTR) fail("poll");
    if (n > 0) {
      // Everything waiting, without blocking.
      for (;;) {
        ssize_t got = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (got < 0) {
          if (errno == ENOBUFS) continue;  // the kernel dropped some: they were never queued to us
          break;
        }
        nfq_handle_packet(h, buf, static_cast<int>(got));
      }
    }
    auto now = Clock::now();
    while (!held.empty() && held.front().due <= now) {
      nfq_set_verdict(q, held.front().id, NF_ACCEPT, 0, nullptr);
      held.pop_front();
    }
  }
}
