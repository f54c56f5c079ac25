// Family "net": can every rank reach the store, and will the backends pick the right NIC
// (REFERENCE.md §3, §6, §7.1, §7.2, §7.6, §7.11).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "diag/check.h"
#include "diag/util.h"
#include "engine/init.h"
#include "engine/common/error.h"

namespace ds::diag {
namespace {

struct Master {
  std::string addr;
  int port = 29500;
  std::string why;  // non-empty: unknown, and why
};

Master master(const Context& c) {
  Master m;
  if (c.world()) {
    if (c.world()->needsMpiMasterAddr) {
      m.why = "MASTER_ADDR is unset: rank 0's address is agreed through MPI at init_distributed";
      return m;
    }
    m.addr = c.world()->masterAddr.value;
    m.port = c.world()->masterPort.value;
    return m;
  }
  auto a = c.get("MASTER_ADDR");
  if (!a || trim(*a).empty()) {
    m.why = "MASTER_ADDR is not set and discovery failed (see env.world_info)";
    return m;
  }
  m.addr = trim(*a);
  if (auto p = c.get("MASTER_PORT")) {
    auto n = parseInteger(*p);
    if (!n || *n < 1 || *n > 65535) {
      m.why = fmt::format("MASTER_PORT={} is not a TCP port (1 to 65535)", quoteValue(*p));
      return m;
    }
    m.port = static_cast<int>(*n);
  }
  return m;
}

// Whether this process is on the master's node: rank 0, or MASTER_ADDR is one of our addresses.
bool onMasterNode(Context& c, const Master& m) {
  if (c.rank() == 0) return true;
  if (c.rank() > 0 && c.world() && c.world()->nodeRank.value == 0 && c.multiNode()) return true;
  auto r = resolveHost(m.addr, c.options().connectTimeout);
  return std::any_of(r.addresses.begin(), r.addresses.end(), isLocalAddress);
}

Finding masterResolves(Context& c) {
  auto m = master(c);
  if (m.addr.empty()) return skip(m.why);
  auto r = resolveHost(m.addr, c.options().connectTimeout);
  Json data{{"master_addr", m.addr}, {"addresses", r.addresses}};
  if (!r.error.empty() || r.addresses.empty()) {
    return fail(fmt::format("MASTER_ADDR={} does not resolve ({}): no rank can reach the store", quoteValue(m.addr),
                            r.error.empty() ? "no addresses" : r.error),
                "Use an IP address of rank 0's node, or a host name every node resolves (check /etc/hosts and DNS).",
                data);
  }
  bool allLoop = std::all_of(r.addresses.begin(), r.addresses.end(), isLoopbackAddress);
  if (allLoop && c.multiNode()) {
    return fail(fmt::format("MASTER_ADDR={} resolves to loopback ({}) in a multi-node job: ranks on other nodes "
                            "connect to themselves and time out",
                            m.addr, join(r.addresses, ", ")),
                "Set MASTER_ADDR to rank 0's address on the network the nodes share (a hostname mapped to 127.0.1.1 in "
                "/etc/hosts is the usual cause).",
                data);
  }
  return pass(fmt::format("MASTER_ADDR={} resolves to {}{}", m.addr, join(r.addresses, ", "),
                          allLoop ? " (loopback: fine on one node)" : ""),
              data);
}

Finding masterReachable(Context& c) {
  auto m = master(c);
  if (m.addr.empty()) return skip(m.why);
  if (c.rank() == 0 && !agentHostsStore(c.env())) {
    return skip("This is rank 0: it hosts the store, so there is nothing to connect to yet");
  }
  if (c.rank() < 0 && !c.storeUp && isLocalAddress(m.addr) && !c.multiNode()) {
    return skip("A single process on the master's own node; the connect test runs on the other ranks");
  }
  int err = tryConnect(m.addr, m.port, c.options().connectTimeout);
  Json data{{"master_addr", m.addr}, {"master_port", m.port}, {"timeout_ms", c.options().connectTimeout.count()}};
  std::string route;
  std::string why;
  auto res = resolveHost(m.addr, c.options().connectTimeout);
  if (!res.addresses.empty()) {
    if (auto r = routeTo(res.addresses.front(), why)) {
      route = fmt::format(" via {} ({})", r->iface.empty() ? "?" : r->iface, r->localAddress);
      data["route"] = {{"iface", r->iface}, {"local_address", r->localAddress}};
    }
  }
  if (err == 0) return pass(fmt::format("TCP connect to {}:{} succeeded{}", m.addr, m.port, route), data);
  data["errno"] = err;
  if (err == ECONNREFUSED) {
    return warn(fmt::format("{}:{} answered but nothing listens there (connection refused){}: the host is reachable, "
                            "but the store is not up yet, or MASTER_PORT is wrong",
                            m.addr, m.port, route),
                "Expected before rank 0 starts; otherwise check MASTER_PORT on every node. Run dsdiag --world across "
                "the job to test the real rendezvous.",
                data);
  }
  return fail(fmt::format("Cannot reach {}:{} ({}){}: clients would time out connecting to the store (\"The client "
                          "socket has timed out ... while trying to connect\")",
                          m.addr, m.port, err == ETIMEDOUT ? fmt::format("no answer within {} ms", c.options().connectTimeout.count())
                                                         : errnoText(err),
                          route),
              "Check that MASTER_ADDR is rank 0's address on a network this node shares (not a private/docker "
              "address), and that no firewall drops the port.",
              data);
}

Finding masterPortFree(Context& c) {
  auto m = master(c);
  if (m.addr.empty()) return skip(m.why);
  if (!onMasterNode(c, m)) return skip(fmt::format("Not the master's node ({} is not a local address)", m.addr));
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = fd >= 0;
  if (!v6) fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return warn(fmt::format("Could not create a socket: {}", errnoText(errno)), "Check the process limits.");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    int zero = 0;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(m.port));
    rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(m.port));
    rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  int err = rc == 0 ? 0 : errno;
  close(fd);
  Json data{{"port", m.port}};
  if (err == 0) return pass(fmt::format("MASTER_PORT {} is free on this node", m.port), data);
  auto owners = tcpPortOwners(m.port, c.paths().procfs);
  Json ow = Json::array();
  std::vector<std::string> names;
  bool self = false;
  for (const auto& o : owners) {
    ow.push_back({{"pid", o.pid}, {"command", o.command}});
    names.push_back(fmt::format("pid {} ({})", o.pid, o.command));
    if (o.pid == getpid()) self = true;
  }
  data["owners"] = ow;
  data["errno"] = err;
  if (agentHostsStore(c.env())) {
    // torchrun's elastic agent hosts the job's c10d store on MASTER_PORT on purpose; every rank is its
    // client (engine/init.h).
    data["held_by_launcher"] = "torchrun";
    return pass(fmt::format("MASTER_PORT {} is held by the launcher's store, as it should be: torchrun's agent hosts "
                            "it (TORCHELASTIC_USE_AGENT_STORE=True){} and every rank is its client",
                            m.port, names.empty() ? "" : " in " + join(names, ", ")),
                data);
  }
  if (c.storeUp) {
    // World mode: this job's store listens there (rank 0's process), which is what should hold it.
    return pass(fmt::format("MASTER_PORT {} is held by this job's store{}", m.port,
                            self ? " (this process, rank 0)" : names.empty() ? "" : " (" + join(names, ", ") + ")"),
                data);
  }
  if (err != EADDRINUSE) {
    return fail(fmt::format("Binding MASTER_PORT {} fails (errno: {})", m.port, errnoText(err)),
                m.port < 1024 ? "Ports below 1024 need root; pick MASTER_PORT above 1024." : "Pick another MASTER_PORT.",
                data);
  }
  return fail(fmt::format("MASTER_PORT {} is already in use{} (errno: {}): the store cannot start (\"The server socket "
                          "has failed to bind\")",
                          m.port, names.empty() ? " (the owner is not visible in /proc: another user's process?)"
                                                : " by " + join(names, ", "),
                          errnoText(err)),
              names.empty() ? "Pick another MASTER_PORT, or find the owner with `ss -ltnp`."
                            : fmt::format("A stale job or a second job on this node: stop {} or pick another MASTER_PORT.",
                                          names.front()),
              data);
}

Finding interfaces(Context& c) {
  auto list = listInterfaces();
  Json arr = Json::array();
  std::vector<std::string> parts;
  for (const auto& i : list) {
    arr.push_back({{"name", i.name}, {"addresses", i.addresses}, {"up", i.up}, {"running", i.running}});
    parts.push_back(fmt::format("{}{}{}", i.name, i.up ? (i.running ? "" : " (up, not running)") : " (down)",
                                i.addresses.empty() ? "" : " " + i.addresses.front()));
  }
  Json data{{"interfaces", arr}};
  if (list.empty()) return warn("No network interfaces are visible", "Check the container's network namespace.", data);
  auto m = master(c);
  if (m.addr.empty()) return pass(fmt::format("Interfaces: {}; route to master unknown ({})", join(parts, ", "), m.why), data);
  auto res = resolveHost(m.addr, c.options().connectTimeout);
  if (res.addresses.empty()) return pass(fmt::format("Interfaces: {}; MASTER_ADDR does not resolve", join(parts, ", ")), data);
  std::string why;
  auto r = routeTo(res.addresses.front(), why);
  if (!r) {
    return fail(fmt::format("No local interface routes to MASTER_ADDR={} ({}). Interfaces: {}", m.addr, why,
                            join(parts, ", ")),
                "Add a route to rank 0's network, or set MASTER_ADDR to an address on a network this node has.", data);
  }
  data["route_to_master"] = {{"iface", r->iface}, {"local_address", r->localAddress}};
  bool virt = r->iface == "lo" || r->iface.rfind("docker", 0) == 0 || r->iface.rfind("virbr", 0) == 0 ||
              r->iface.rfind("veth", 0) == 0;
  if (virt && c.multiNode()) {
    return warn(fmt::format("Traffic to MASTER_ADDR={} leaves through {} ({}), a loopback/virtual interface, in a "
                            "multi-node job: it is slow or does not reach other hosts",
                            m.addr, r->iface, r->localAddress),
                "Use rank 0's address on the cluster network for MASTER_ADDR, and set NCCL_SOCKET_IFNAME / "
                "GLOO_SOCKET_IFNAME to that NIC.",
                data);
  }
  return pass(fmt::format("Route to MASTER_ADDR={}: {} ({}). Interfaces: {}", m.addr, r->iface, r->localAddress,
                          join(parts, ", ")),
              data);
}

// NCCL_SOCKET_IFNAME / NCCL_IB_HCA: every (non-excluded) entry must select something that is up.
Finding checkNcclList(Context& c, const char* var, const std::vector<std::pair<std::string, bool>>& candidates,
                      const char* what) {
  auto v = c.get(var);
  if (!v) return skip(fmt::format("{} is not set (NCCL picks {} itself)", var, what));
  auto spec = parseIfnameSpec(*v);
  std::vector<std::string> upNames, all;
  for (const auto& [n, up] : candidates) {
    all.push_back(n + (up ? "" : " (down)"));
    if (up) upNames.push_back(n);
  }
  Json data{{"value", *v}, {"available", all}, {"exclude", spec.exclude}, {"exact", spec.exact}};
  if (!spec.error.empty()) {
    return fail(fmt::format("{}={} is malformed: {}. NCCL then finds no {} and fails at init", var, quoteValue(*v),
                            spec.error, what),
                fmt::format("Syntax: [^][=]name[:port][,name...], e.g. {}=eth0 or {}=^docker,lo. Available: {}", var,
                            var, all.empty() ? "none" : join(all, ", ")),
                data);
  }
  std::vector<std::string> selected;
  std::vector<std::string> unmatched;
  for (const auto& e : spec.entries) {
    bool any = false;
    for (const auto& n : upNames) {
      if (ifnameEntryMatches(spec, e, n)) any = true;
    }
    if (!any) unmatched.push_back(e.name);
  }
  for (const auto& n : upNames) {
    bool m = std::any_of(spec.entries.begin(), spec.entries.end(),
                         [&](const auto& e) { return ifnameEntryMatches(spec, e, n); });
    if (m != spec.exclude) selected.push_back(n);
  }
  data["selected"] = selected;
  data["unmatched"] = unmatched;
  if (selected.empty()) {
    return fail(fmt::format("{}={} selects no {} that is up: NCCL fails at init (\"no socket interface found\" / "
                            "\"unhandled system error\")",
                            var, quoteValue(*v), what),
                fmt::format("Use a name that exists and is up on every node. Up here: {}",
                            upNames.empty() ? "none" : join(upNames, ", ")),
                data);
  }
  if (!spec.exclude && !unmatched.empty()) {
    return warn(fmt::format("{}={}: {} match(es) nothing that is up here (NCCL uses {})", var, quoteValue(*v),
                            join(unmatched, ", "), join(selected, ", ")),
                fmt::format("Remove or fix the entries; up here: {}", join(upNames, ", ")), data);
  }
  return pass(fmt::format("{}={} selects {}", var, *v, join(selected, ", ")), data);
}

std::vector<std::pair<std::string, bool>> netCandidates() {
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& i : listInterfaces()) out.emplace_back(i.name, i.up && i.running);
  return out;
}

Finding ncclSocketIfname(Context& c) { return checkNcclList(c, "NCCL_SOCKET_IFNAME", netCandidates(), "interface"); }

Finding ncclIbHca(Context& c) {
  // IB devices and their port states from sysfs: /sys/class/infiniband/<dev>/ports/<n>/state.
  std::vector<std::pair<std::string, bool>> devs;
  std::string base = c.paths().sysfs + "/class/infiniband";
  if (DIR* d = opendir(base.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      bool active = false;
      for (int p = 1; p <= 4; ++p) {
        auto st = readTextFile(fmt::format("{}/{}/ports/{}/state", base, n, p));
        if (st && st->find("ACTIVE") != std::string::npos) active = true;
      }
      devs.emplace_back(n, active);
    }
    closedir(d);
  }
  std::sort(devs.begin(), devs.end());
  return checkNcclList(c, "NCCL_IB_HCA", devs, "InfiniBand device with an active port");
}

Finding glooSocketIfname(Context& c) {
  auto v = c.get("GLOO_SOCKET_IFNAME");
  if (!v) return skip("GLOO_SOCKET_IFNAME is not set (Gloo uses the interface that routes to MASTER_ADDR)");
  Json data{{"value", *v}};
  std::vector<std::string> up;
  for (const auto& i : listInterfaces()) {
    if (i.up && !i.addresses.empty()) up.push_back(i.name);
  }
  data["up"] = up;
  std::string t = trim(*v);
  if (!t.empty() && (t[0] == '^' || t[0] == '=')) {
    return fail(fmt::format("GLOO_SOCKET_IFNAME={} uses NCCL_SOCKET_IFNAME syntax ('{}'); Gloo takes plain interface "
                            "names and fails with \"Unable to find address for: {}\"",
                            quoteValue(*v), t[0], t),
                fmt::format("Name the interface itself, e.g. GLOO_SOCKET_IFNAME={}", up.empty() ? "eth0" : up.front()),
                data);
  }
  std::vector<std::string> missing;
  for (const auto& n : split(t, ',')) {
    if (std::find(up.begin(), up.end(), trim(n)) == up.end()) missing.push_back(trim(n));
  }
  if (!missing.empty()) {
    return fail(fmt::format("GLOO_SOCKET_IFNAME={}: {} is not an interface that is up with an address: Gloo fails with "
                            "\"Unable to find address for: {}\"",
                            quoteValue(*v), join(missing, ", "), missing.front()),
                fmt::format("Use one of: {}", up.empty() ? "(none is up)" : join(up, ", ")), data);
  }
  return pass(fmt::format("GLOO_SOCKET_IFNAME={} is up", t), data);
}

Finding somaxconn(Context& c) {
  auto text = readTextFile(c.paths().procfs + "/sys/net/core/somaxconn");
  if (!text) return skip("/proc/sys/net/core/somaxconn is not readable");
  auto v = parseInteger(*text);
  if (!v) return warn("somaxconn is not a number: " + quoteValue(*text), "Check /proc/sys/net/core/somaxconn.");
  int n = c.worldSize();
  Json data{{"somaxconn", *v}, {"world_size", n}};
  if (*v < n) {
    return warn(fmt::format("net.core.somaxconn={} is below WORLD_SIZE={}: when every rank connects to the store at "
                            "once, the listen backlog overflows and connects are dropped and retried (slow or failed "
                            "rendezvous at scale)",
                            *v, n),
                fmt::format("sysctl -w net.core.somaxconn={} (on rank 0's node at least)", std::max<long long>(4096, n)),
                data);
  }
  return pass(fmt::format("net.core.somaxconn={} >= WORLD_SIZE={}", *v, n), data);
}

}  // namespace

std::vector<CheckDef> netChecks() {
  return {
      {"net.master_addr_resolves", "net", "MASTER_ADDR resolves (not to loopback in a multi-node job)", masterResolves},
      {"net.master_reachable", "net", "TCP connect to MASTER_ADDR:MASTER_PORT from non-master ranks", masterReachable},
      {"net.master_port_free", "net", "MASTER_PORT is free on the master's node (names the owner)", masterPortFree},
      {"net.interfaces", "net", "Local interfaces and the one that routes to the master", interfaces},
      {"net.nccl_socket_ifname", "net", "NCCL_SOCKET_IFNAME syntax and matches", ncclSocketIfname},
      {"net.nccl_ib_hca", "net", "NCCL_IB_HCA syntax and active devices", ncclIbHca},
      {"net.gloo_socket_ifname", "net", "GLOO_SOCKET_IFNAME names an interface that is up", glooSocketIfname},
      {"net.somaxconn", "net", "net.core.somaxconn >= WORLD_SIZE", somaxconn},
  };
}

}  // namespace ds::diag
