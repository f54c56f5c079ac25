// `dsdiag explain "<error text>"`: maps an error users paste (c10d, NCCL, Gloo, CUDA, launcher
// texts; REFERENCE.md §3, §7) to its likely causes and the checks that confirm them.
#pragma once

#include <string>
#include <vector>

namespace ds::diag {

struct Explanation {
  std::string key;    // stable pattern id, e.g. "port_in_use"
  std::string title;  // "MASTER_PORT is already taken"
  std::vector<std::string> causes;
  std::vector<std::string> checks;  // ids to run: dsdiag --only <ids>
};

// Every pattern whose text occurs in `text` (case-insensitive), most specific first.
std::vector<Explanation> explain(const std::string& text);
// The whole catalogue (for tests and --list).
const std::vector<Explanation>& explanations();

// The human text for `explain`'s output; says so when nothing matched.
std::string formatExplanations(const std::string& text, const std::vector<Explanation>& found);

}  // namespace ds::diag
