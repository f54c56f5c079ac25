#include "engine/common/ranges.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "engine/common/error.h"

namespace ds {

std::string formatRanges(const std::vector<int>& values) {
  std::vector<int> v = values;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t k = i;
    while (k + 1 < v.size() && v[k + 1] == v[k] + 1) ++k;
    if (!out.empty()) out += ',';
    out += k == i ? std::to_string(v[i]) : fmt::format("{}-{}", v[i], v[k]);
    i = k + 1;
  }
  return out;
}

std::vector<int> parseRanges(const std::string& text, const std::string& what, const std::string& listName,
                             const std::string& itemName) {
  auto bad = [&] {
    return ConfigError(fmt::format("{} '{}' is not a {}; expected {} numbers and ranges such as 0-3,8", what,
                                   text, listName, itemName));
  };
  auto number = [&](const std::string& s) {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) throw bad();
    return std::stoi(s);
  };
  std::set<int> out;
  std::stringstream in(text);
  std::string part;
  if (text.empty()) throw bad();
  while (std::getline(in, part, ',')) {
    auto dash = part.find('-');
    int lo = number(part.substr(0, dash));
    int hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    if (hi < lo) throw bad();
    for (int c = lo; c <= hi; ++c) out.insert(c);
  }
  if (text.back() == ',') throw bad();
  return {out.begin(), out.end()};
}

}  // namespace ds
