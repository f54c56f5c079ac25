#include "diag/fleet/fleet_iface.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>

#include "engine/host/interfaces.h"

namespace ds::diag::fleet {

namespace {

std::uint32_t ipv4(const std::string& a) {
  in_addr x{};
  if (::inet_pton(AF_INET, a.c_str(), &x) != 1) return 0;
  return ntohl(x.s_addr);
}

}  // namespace

std::vector<report::FleetIface> candidateInterfaces(bool loopbackOnly) {
  std::vector<report::FleetIface> out;
  for (const host::Interface& i : host::listInterfaces()) {
    if (!i.up || i.loopback != loopbackOnly) continue;
    for (const host::InterfaceAddress& a : i.addrs) {
      if (a.family != AF_INET || (loopbackOnly && a.text != "127.0.0.1")) continue;
      out.push_back(report::FleetIface{i.name, a.text, a.prefixLen, host::interfaceMtu(i.name)});
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  return out;
}

bool sameSubnet(const report::FleetIface& a, const report::FleetIface& b) {
  int len = std::min(a.prefixLen, b.prefixLen);
  if (len <= 0) return false;
  std::uint32_t mask = len >= 32 ? 0xffffffffu : ~((1u << (32 - len)) - 1);
  return (ipv4(a.addr) & mask) == (ipv4(b.addr) & mask);
}

}  // namespace ds::diag::fleet
