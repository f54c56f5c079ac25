// Which local interface/address Gloo's TCP transport binds to.
//
// Order (as in c10d's ProcessGroupGloo, minus its multi-device support):
//   1. GLOO_SOCKET_IFNAME: a plain interface name. A comma list picks the first name (one device per
//      group). "^x" / "=x" are NCCL_SOCKET_IFNAME syntax and fail in Gloo ("Unable to find address
//      for: ^lo"), so they are rejected here with that explanation.
//   2. The local address whose route reaches MASTER_ADDR (UDP connect + getsockname; no packet is
//      sent), so that traffic takes the same NIC as the store.
//   3. Loopback, when there is no world record (tests, single process).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ds::env {
struct WorldInfo;
}

namespace ds::comm::detail {

struct GlooInterfaceChoice {
  std::string iface;     // set when GLOO_SOCKET_IFNAME chose it; Gloo then binds by name
  std::string hostname;  // numeric address to bind (without iface), or the interface's first address
  std::string reason;    // "GLOO_SOCKET_IFNAME=eth0", "route to MASTER_ADDR=10.0.0.1", "loopback (no world)"
};

// The interfaces that are up and carry an IPv4/IPv6 address, as "name (addr, addr)", sorted by name.
std::vector<std::string> upInterfaces();

// Throws ConfigError for a missing/down interface or NCCL-style syntax (naming the variable, the
// value, and the interfaces that are up), or when no local address reaches MASTER_ADDR.
GlooInterfaceChoice chooseGlooInterface(const std::optional<std::string>& socketIfname,
                                        const env::WorldInfo* world);

}  // namespace ds::comm::detail
