// This host's network interfaces, read once (getifaddrs) for every floor: the engine's own address
// and Gloo's interface choice, dsdiag's network checks and fleet mode's candidate interfaces.
#pragma once

#include <string>
#include <vector>

namespace ds::host {

struct InterfaceAddress {
  int family = 0;          // AF_INET or AF_INET6
  std::string text;        // as inet_ntop writes it: "10.0.0.2", "fe80::1"
  std::string numeric;     // as getnameinfo(NI_NUMERICHOST) writes it: link-local IPv6 with "%eth0"
  int prefixLen = 0;       // from the netmask (IPv4 only; 0 when unknown)
  bool linkLocal = false;  // IPv6 fe80::/10
};

struct Interface {
  std::string name;
  bool up = false;
  bool running = false;
  bool loopback = false;
  std::vector<InterfaceAddress> addrs;  // IPv4 and IPv6, in the kernel's order
  std::vector<std::string> addresses;   // the addrs' text, in the same order
};

// Every interface getifaddrs reports, also those without an address, in the kernel's order (by
// first appearance, which is interface index order); empty when getifaddrs fails.
std::vector<Interface> listInterfaces();

// /sys/class/net/<name>/mtu; 0 when unreadable.
int interfaceMtu(const std::string& name);

}  // namespace ds::host
