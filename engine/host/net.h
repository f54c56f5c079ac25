// Host identity helpers shared by discovery, the store and diagnostics.
#pragma once

#include <string>

namespace ds::net {

// gethostname(), or "unknown-host".
std::string hostName();
// The first IPv4 address of an interface that is up, not loopback; else the first non-loopback IPv6
// address; else "127.0.0.1". This is what DeepSpeed's MPI discovery broadcasts as MASTER_ADDR.
std::string firstHostAddress();

}  // namespace ds::net
