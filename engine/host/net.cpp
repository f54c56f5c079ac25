#include "engine/host/net.h"

#include <netinet/in.h>
#include <unistd.h>

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

}  // namespace ds::net
