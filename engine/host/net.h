// Host identity helpers shared by discovery, the store and diagnostics.
#pragma once

#include <cstdint>
#include <string>

namespace ds::net {

// gethostname(), or "unknown-host".
std::string hostName();
// The first IPv4 address of an interface that is up, not loopback; else the first non-loopback IPv6
// address; else "127.0.0.1". This is what DeepSpeed's MPI discovery broadcasts as MASTER_ADDR.
std::string firstHostAddress();

// What the kernel counted on one end of a TCP connection (TCP_INFO): the data bytes this end sent,
// retransmissions included, and the bytes it sent again that the peer had not received: all
// retransmissions (RTO, fast retransmit, tail loss probes) less the duplicates the peer reported with
// D-SACK (a retransmission timer that fires early on a busy host resends what had arrived; on the
// 64-host namespace bed such spurious resends reached 3 % of a healthy pair's bytes). `known` is
// false where the kernel does not say (before Linux 4.19, not TCP).
struct TcpSendCounters {
  bool known = false;
  std::uint64_t sentBytes = 0;
  std::uint64_t retransBytes = 0;
};
TcpSendCounters tcpSendCounters(int fd);

}  // namespace ds::net
