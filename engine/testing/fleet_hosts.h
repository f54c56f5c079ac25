// A fleet of "hosts" inside one machine for the fleet tests: N network namespaces on one bridge in a
// switch namespace of its own (diag/tests/fleet.sh), host i at 10.79.<net>.<i+1> on eth0 with the
// hostname fleet<i> (zero-padded). Faults are injected through fleet.sh's `fault` command. Needs root
// and `ip netns`; ok() is false with why() saying what is missing (skipped() when namespaces cannot
// be made here, for GTEST_SKIP).
#pragma once

#include <string>
#include <vector>

#include "engine/testing/subprocess.h"

namespace ds::testing {

class FleetHosts {
 public:
  // script: the path of fleet.sh; tag: a letter or two that keeps the namespace names of different
  // test programs apart; net: the third octet of the subnet (distinct per test program).
  FleetHosts(std::string script, const std::string& tag, int hosts, int net,
             std::vector<std::string> options = {});
  ~FleetHosts();  // tears the fleet down, also killing whatever still runs on its hosts
  FleetHosts(const FleetHosts&) = delete;
  FleetHosts& operator=(const FleetHosts&) = delete;

  bool ok() const { return ok_; }
  bool skipped() const { return skipped_; }  // fleet.sh said namespaces cannot be made here (exit 4)
  const std::string& why() const { return why_; }
  int hosts() const { return hosts_; }
  const std::string& name() const { return name_; }
  double setupSeconds() const { return setupSeconds_; }
  std::string addr(int host) const;      // "10.79.<net>.<host+1>"
  std::string hostname(int host) const;  // "fleet03"
  // The host index of a hostname this fleet gave ("fleet03" -> 3), -1 for any other text.
  int hostIndex(const std::string& hostname) const;
  // argv that runs argv on host `host` (its namespace, hostname and CPU cgroup); the started pid
  // becomes argv[0]'s pid (no fork on the way), so a test can signal it.
  std::vector<std::string> on(int host, const std::vector<std::string>& argv) const;
  // Runs `fleet.sh fault NAME args...`; exitCode 5 means the fault cannot be made on this machine.
  RunResult fault(const std::vector<std::string>& args) const;

 private:
  std::string script_, name_, why_;
  int hosts_ = 0, net_ = 0, width_ = 2;
  bool made_ = false, ok_ = false, skipped_ = false;
  double setupSeconds_ = 0;
};

}  // namespace ds::testing
