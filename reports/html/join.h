// Lists as the report pages write them in a cell or a sentence: "gloo, mpi".
#pragma once

#include <string>
#include <vector>

namespace ds::report::html {

// The items joined by ", ". No separator is written while the text so far is empty, so a leading empty
// item leaves no ", " in front of the next one.
inline std::string joinStrings(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& e : items) s += (s.empty() ? "" : ", ") + e;
  return s;
}

}  // namespace ds::report::html
