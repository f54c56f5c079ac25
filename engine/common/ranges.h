// Range lists, "0-3,5,7-9": how CPU lists (taskset, cgroups' cpuset), rank lists in findings and
// fleet member lists are written. One formatter and one parser for every floor.
#pragma once

#include <string>
#include <vector>

namespace ds {

// "0-3,5,7-9" of any numbers: sorted, duplicates dropped; "" for none.
std::string formatRanges(const std::vector<int>& values);

// The inverse: numbers and ranges ("0-3,8"), ascending, without duplicates. Throws ConfigError
// "<what> '<text>' is not a <listName>; expected <itemName> numbers and ranges such as 0-3,8" on an
// empty text, a sign, a range that runs backwards, an empty part or a number of more than 6 digits.
std::vector<int> parseRanges(const std::string& text, const std::string& what,
                             const std::string& listName = "cpu list", const std::string& itemName = "CPU");

}  // namespace ds
