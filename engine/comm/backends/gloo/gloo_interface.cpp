#include "engine/comm/backends/gloo/gloo_interface.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "engine/common/error.h"
#include "engine/env/world_info.h"
#include "engine/host/interfaces.h"

namespace ds::comm::detail {
namespace {

std::string numericHost(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST] = {0};
  if (::getnameinfo(sa, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return host;
}

// name -> addresses, for interfaces that are up and have an IP address.
std::map<std::string, std::vector<std::string>> upInterfaceMap() {
  std::map<std::string, std::vector<std::string>> out;
  for (const host::Interface& i : host::listInterfaces()) {
    if (!i.up) continue;
    for (const host::InterfaceAddress& a : i.addrs) {
      if (!a.numeric.empty()) out[i.name].push_back(a.numeric);
    }
  }
  return out;
}

std::string listUp() {
  auto l = upInterfaces();
  return l.empty() ? std::string("none found") : fmt::format("{}", fmt::join(l, ", "));
}

// The local address the kernel would use to reach host:port. Empty on failure (with why in `err`).
std::string localAddressTowards(const std::string& host, int port, std::string& err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    err = fmt::format("cannot resolve it ({})", ::gai_strerror(rc));
    return "";
  }
  std::string out;
  for (addrinfo* ai = res; ai != nullptr && out.empty(); ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {  // UDP: only picks a route, sends nothing
      sockaddr_storage local{};
      socklen_t len = sizeof(local);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        out = numericHost(reinterpret_cast<sockaddr*>(&local), len);
      }
    } else {
      err = fmt::format("no route to it ({})", errnoText(errno));
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

}  // namespace

std::vector<std::string> upInterfaces() {
  std::vector<std::string> out;
  for (const auto& [name, addrs] : upInterfaceMap())
    out.push_back(fmt::format("{} ({})", name, fmt::join(addrs, ", ")));
  return out;
}

GlooInterfaceChoice chooseGlooInterface(const std::optional<std::string>& socketIfname,
                                        const env::WorldInfo* world) {
  GlooInterfaceChoice c;
  if (socketIfname && !socketIfname->empty()) {
    const std::string& value = *socketIfname;
    // One device per group: a comma list picks its first name (c10d would open one device per name).
    std::string name = value.substr(0, value.find(','));
    if (!name.empty() && (name[0] == '^' || name[0] == '=')) {
      throw ConfigError(
          fmt::format("GLOO_SOCKET_IFNAME='{}' uses NCCL_SOCKET_IFNAME syntax ('^' excludes, '=' matches "
                      "exactly), which Gloo does "
                      "not accept: it takes plain interface names only, and fails with \"Unable to find "
                      "address for: {}\". Set "
                      "GLOO_SOCKET_IFNAME to the name of the interface to use. Interfaces that are up: {}.",
                      value, name, listUp()));
    }
    auto up = upInterfaceMap();
    if (name.empty() || up.find(name) == up.end()) {
      throw ConfigError(
          fmt::format("GLOO_SOCKET_IFNAME='{}' names interface '{}', which does not exist or is down (or has "
                      "no IP address), so "
                      "Gloo cannot bind to it. Interfaces that are up: {}. Set GLOO_SOCKET_IFNAME to one of "
                      "them, or unset it to "
                      "use the interface that reaches MASTER_ADDR.",
                      value, name, listUp()));
    }
    c.iface = name;
    c.hostname = up[name].front();  // informational: Gloo binds by interface name
    c.reason = fmt::format("GLOO_SOCKET_IFNAME={}", value);
    return c;
  }
  if (world != nullptr && !world->masterAddr.value.empty()) {
    const std::string& master = world->masterAddr.value;
    int port = world->masterPort.value > 0 ? world->masterPort.value : 29500;
    std::string err;
    std::string local = localAddressTowards(master, port, err);
    if (local.empty()) {
      throw ConfigError(fmt::format(
          "gloo: no local address reaches MASTER_ADDR={} ({}: {}), so Gloo cannot pick an interface. Fix "
          "MASTER_ADDR, or set GLOO_SOCKET_IFNAME to the interface to use. Interfaces that are up: {}.",
          master, world->masterAddr.source, err.empty() ? "unknown error" : err, listUp()));
    }
    c.hostname = local;
    c.reason = fmt::format("the local address {} routes to MASTER_ADDR={}", local, master);
    return c;
  }
  c.hostname = "127.0.0.1";
  c.reason = "loopback (no world record)";
  return c;
}

}  // namespace ds::comm::detail
