#include "engine/host/net.h"

#include <linux/tcp.h>  // the kernel's tcp_info (glibc's stops before the byte counters)
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>

#include "engine/host/interfaces.h"

namespace ds::net {

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

std::string firstHostAddress() {
  std::string v6;
  for (const host::Interface& i : host::listInterfaces()) {
    if (!i.up || i.loopback) continue;
    for (const host::InterfaceAddress& a : i.addrs) {
      if (a.family == AF_INET) return a.text;
      if (a.family == AF_INET6 && v6.empty() && !a.linkLocal) v6 = a.text;
    }
  }
  return v6.empty() ? "127.0.0.1" : v6;
}

TcpSendCounters tcpSendCounters(int fd) {
  TcpSendCounters c;
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return c;
  // An older kernel fills less of the struct: the counters are there only when it reached them.
  if (len < offsetof(tcp_info, tcpi_dsack_dups) + sizeof(info.tcpi_dsack_dups)) return c;
  c.known = true;
  c.sentBytes = info.tcpi_bytes_sent;
  const std::uint64_t duplicates = std::uint64_t{info.tcpi_dsack_dups} * info.tcpi_snd_mss;
  c.retransBytes = info.tcpi_bytes_retrans > duplicates ? info.tcpi_bytes_retrans - duplicates : 0;
  return c;
}

}  // namespace ds::net
