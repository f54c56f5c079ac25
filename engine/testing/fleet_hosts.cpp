#include "engine/testing/fleet_hosts.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>

namespace ds::testing {

using namespace std::chrono_literals;

FleetHosts::FleetHosts(std::string script, const std::string& tag, int hosts, int net,
                       std::vector<std::string> options)
    : script_(std::move(script)), hosts_(hosts), net_(net), width_(hosts > 100 ? 3 : 2) {
  static std::atomic<int> counter{0};
  name_ = fmt::format("f{}{}n{}", tag, getpid() % 1000000, counter++);
  std::vector<std::string> argv{"bash",
                                script_,
                                "setup",
                                name_,
                                std::to_string(hosts),
                                "--net",
                                std::to_string(net),
                                "--owner",
                                std::to_string(getpid())};
  argv.insert(argv.end(), options.begin(), options.end());
  auto r = run(argv, cleanOptions(120s));
  made_ = true;  // teardown is safe on a half-made fleet
  if (r.exitCode != 0) {
    skipped_ = r.exitCode == 4;
    why_ = fmt::format("fleet.sh setup {} {} exited {}: {}{}", name_, hosts, r.exitCode, r.err, r.out);
    return;
  }
  setupSeconds_ = r.seconds;
  ok_ = true;
}

FleetHosts::~FleetHosts() {
  if (made_) run({"bash", script_, "teardown", name_}, cleanOptions(60s));
}

std::string FleetHosts::addr(int host) const { return fmt::format("10.79.{}.{}", net_, host + 1); }

std::string FleetHosts::hostname(int host) const { return fmt::format("fleet{:0{}}", host, width_); }

int FleetHosts::hostIndex(const std::string& hostname) const {
  if (hostname.size() != 5u + static_cast<size_t>(width_) || hostname.rfind("fleet", 0) != 0) return -1;
  int v = 0;
  for (size_t k = 5; k < hostname.size(); ++k) {
    if (hostname[k] < '0' || hostname[k] > '9') return -1;
    v = v * 10 + (hostname[k] - '0');
  }
  return v < hosts_ ? v : -1;
}

std::vector<std::string> FleetHosts::on(int host, const std::vector<std::string>& argv) const {
  std::vector<std::string> full{"bash", script_, "exec", name_, std::to_string(host), "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

RunResult FleetHosts::fault(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{"bash", script_, "fault", name_};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, cleanOptions(60s));
}

}  // namespace ds::testing
