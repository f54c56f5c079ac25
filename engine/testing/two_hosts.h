// Two "hosts" inside one machine for the netns tests: network namespaces nodeA and nodeB joined by a
// veth pair (10.<net>.<y>.1 and .2), each command run with its own hostname (a UTS namespace). Needs
// root and `ip netns`; ok() is false with why() saying what is missing, for GTEST_SKIP.
#pragma once

#include <string>
#include <vector>

namespace ds::testing {

class TwoHosts {
 public:
  // tag: a letter that keeps the namespace names of different test programs apart (ds<tag>a<pid>);
  // net: the second octet of the subnet, likewise distinct per test program.
  TwoHosts(const std::string& tag, int net);
  ~TwoHosts();  // removes both namespaces (and with them the veth pair)
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  std::string addrA() const;
  std::string addrB() const;
  const std::string& nsA() const { return nsA_; }
  const std::string& nsB() const { return nsB_; }
  // argv that runs `command` (a shell line) on host "nodeA" or "nodeB", with that hostname.
  std::vector<std::string> on(const std::string& host, const std::string& command) const;

 private:
  int net_ = 0;
  int subnet_ = 0;
  std::string nsA_, nsB_, why_;
  bool made_ = false, ok_ = false;
};

}  // namespace ds::testing
