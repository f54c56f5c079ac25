// Small system helpers the checks share: files, integers, interfaces, the NCCL/Gloo interface-list
// syntax, the owner of a TCP port, and running a risky probe (dlopen of a vendor library) in a
// child process so that a broken library cannot crash dsdiag.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/host/interfaces.h"

namespace ds::diag {

std::optional<std::string> readTextFile(const std::string& path, std::size_t maxBytes = 1 << 20);
std::string trim(std::string_view s);
std::vector<std::string> split(std::string_view s, char sep);
// A whole-string decimal integer, or nullopt (garbage, empty, overflow).
std::optional<long long> parseInteger(std::string_view s);
// Whether an executable `name` is in one of PATH's directories (`pathEnv`, colon-separated).
bool onPath(std::string_view pathEnv, const std::string& name);
// The first executable `name` in PATH's directories, as execvp would find it; "" when none.
std::string findOnPath(std::string_view pathEnv, const std::string& name);
// Bytes as "512 MiB", "1.5 GiB".
std::string humanBytes(double bytes);
// Shortens a value for messages (garbage can be long or binary): printable ASCII, at most n chars.
std::string quoteValue(std::string_view v, std::size_t n = 60);

using Interface = host::Interface;  // engine/host/interfaces.h
// Every interface getifaddrs reports, sorted by name (also those without an address).
std::vector<Interface> listInterfaces();

// NCCL_SOCKET_IFNAME / NCCL_IB_HCA syntax (REFERENCE.md §6): [^][=]name[:port][,name[:port]...].
struct IfnameSpec {
  bool exclude = false;  // leading '^'
  bool exact = false;    // '=' (after '^' when both)
  struct Entry {
    std::string name;
    std::optional<int> port;
  };
  std::vector<Entry> entries;
  std::string error;  // non-empty when the text is malformed (e.g. "=^x", an empty entry, a bad port)
};
IfnameSpec parseIfnameSpec(std::string_view text);
// Whether `candidate` is selected by one entry (prefix match unless exact).
bool ifnameEntryMatches(const IfnameSpec& spec, const IfnameSpec::Entry& e, const std::string& candidate);

// Processes holding a TCP socket bound to `port` (from <procfs>/net/tcp{,6} and <procfs>/<pid>/fd),
// as "pid (comm)". Empty when /proc does not tell (another user's process without root).
struct PortOwner {
  long pid = 0;
  std::string command;
};
std::vector<PortOwner> tcpPortOwners(int port, const std::string& procfs = "/proc");

// Runs fn in a forked child and returns the JSON it produced. A child that crashes, exits or
// exceeds `timeout` gives an error text instead ("killed by signal 11 (SIGSEGV)"). Call only while
// the process is single-threaded enough for fork (before rendezvous starts threads).
struct IsolatedResult {
  nlohmann::json value;
  std::string error;  // empty on success
};
// Runs a program (argv[0] a path) in its own process group with stdin from /dev/null and stdout and
// stderr together in `output` (at most 64 KiB kept); past `timeout` the whole group is killed. For
// probes of the job's own tools (its Python). `error` is set when it could not be started.
struct ProgramResult {
  int exitCode = -1;      // the exit status, or -signal when a signal ended it
  bool timedOut = false;
  std::string output;
  std::string error;      // "cannot start /usr/bin/python3: No such file or directory"
};
ProgramResult runProgram(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

IsolatedResult runIsolated(const std::function<nlohmann::json()>& fn, std::chrono::milliseconds timeout);

// The local interface whose address routes to `addr` (UDP connect + getsockname; no packet sent),
// as {interface, local address}; nullopt with `why` filled when no route.
struct Route {
  std::string iface;
  std::string localAddress;
};
std::optional<Route> routeTo(const std::string& addr, std::string& why);

// getaddrinfo bounded by `timeout` (a slow resolver would otherwise stall dsdiag). Numeric results.
struct Resolution {
  std::vector<std::string> addresses;
  std::string error;  // gai_strerror text, or "timed out after N ms"
};
Resolution resolveHost(const std::string& host, std::chrono::milliseconds timeout);

bool isLoopbackAddress(const std::string& numeric);
// A numeric address of this machine: loopback, or one of its interfaces' addresses.
bool isLocalAddress(const std::string& numeric);

// Non-blocking TCP connect to addr:port bounded by `timeout`. Returns 0, or the errno (ETIMEDOUT on
// the bound, EHOSTUNREACH when addr does not resolve: pass a numeric address to keep it bounded).
int tryConnect(const std::string& addr, int port, std::chrono::milliseconds timeout);

}  // namespace ds::diag
