#include "engine/testing/two_hosts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "engine/testing/subprocess.h"

namespace ds::testing {

using namespace std::chrono_literals;

TwoHosts::TwoHosts(const std::string& tag, int net) : net_(net) {
  int id = static_cast<int>(getpid() % 100000);
  subnet_ = 20 + (id % 200);
  nsA_ = fmt::format("ds{}a{}", tag, id);
  nsB_ = fmt::format("ds{}b{}", tag, id);
  auto r = run({"ip", "netns", "add", nsA_}, cleanOptions(10s));
  if (r.exitCode != 0) {
    why_ = "cannot create network namespaces (needs root and ip netns): " + r.err;
    return;
  }
  made_ = true;
  const std::string vA = "v" + nsA_, vB = "v" + nsB_;
  const std::vector<std::vector<std::string>> steps = {
      {"ip", "netns", "add", nsB_},
      {"ip", "link", "add", vA, "type", "veth", "peer", "name", vB},
      {"ip", "link", "set", vA, "netns", nsA_},
      {"ip", "link", "set", vB, "netns", nsB_},
      {"ip", "-n", nsA_, "addr", "add", addrA() + "/24", "dev", vA},
      {"ip", "-n", nsB_, "addr", "add", addrB() + "/24", "dev", vB},
      {"ip", "-n", nsA_, "link", "set", "lo", "up"},
      {"ip", "-n", nsB_, "link", "set", "lo", "up"},
      {"ip", "-n", nsA_, "link", "set", vA, "up"},
      {"ip", "-n", nsB_, "link", "set", vB, "up"},
  };
  for (const auto& s : steps) {
    auto x = run(s, cleanOptions(10s));
    if (x.exitCode != 0) {
      why_ = fmt::format("'{}' failed: {}", fmt::join(s, " "), x.err);
      return;
    }
  }
  if (run({"unshare", "--version"}, cleanOptions(10s)).exitCode != 0) {
    why_ = "unshare (util-linux) is missing";
    return;
  }
  ok_ = true;
}

TwoHosts::~TwoHosts() {
  if (made_) {
    run({"ip", "netns", "del", nsA_}, cleanOptions(10s));
    run({"ip", "netns", "del", nsB_}, cleanOptions(10s));
  }
}

std::string TwoHosts::addrA() const { return fmt::format("10.{}.{}.1", net_, subnet_); }
std::string TwoHosts::addrB() const { return fmt::format("10.{}.{}.2", net_, subnet_); }

std::vector<std::string> TwoHosts::on(const std::string& host, const std::string& command) const {
  return {"ip",
          "netns",
          "exec",
          host == "nodeA" ? nsA_ : nsB_,
          "unshare",
          "--uts",
          "sh",
          "-c",
          "hostname " + host + " && exec " + command};
}

}  // namespace ds::testing
