#include "engine/host/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>

#include <fstream>
#include <map>

namespace ds::host {

std::vector<Interface> listInterfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::vector<Interface> out;
  std::map<std::string, std::size_t> index;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_name == nullptr) continue;
    auto [it, added] = index.emplace(a->ifa_name, out.size());
    if (added) {
      out.emplace_back();
      out.back().name = a->ifa_name;
    }
    Interface& i = out[it->second];
    i.up = (a->ifa_flags & IFF_UP) != 0;
    i.running = (a->ifa_flags & IFF_RUNNING) != 0;
    i.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
    if (a->ifa_addr == nullptr) continue;
    const int fam = a->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    InterfaceAddress addr;
    addr.family = fam;
    char buf[INET6_ADDRSTRLEN] = {};
    if (fam == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
      if (a->ifa_netmask != nullptr) {
        addr.prefixLen = __builtin_popcount(reinterpret_cast<sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr);
      }
    } else {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr);
      ::inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof buf);
      addr.linkLocal = IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr);
    }
    addr.text = buf;
    char host[NI_MAXHOST] = {};
    const socklen_t len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::getnameinfo(a->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0)
      addr.numeric = host;
    i.addresses.push_back(addr.text);
    i.addrs.push_back(std::move(addr));
  }
  ::freeifaddrs(list);
  return out;
}

int interfaceMtu(const std::string& name) {
  int mtu = 0;
  std::ifstream in("/sys/class/net/" + name + "/mtu");
  in >> mtu;
  return in ? mtu : 0;
}

}  // namespace ds::host
