// The run label: the cluster or system a run describes (dsbench coll/train --label, dsreport import
// --label, dsreport ingest --label), kept as metadata.label so that one history serves many. One rule
// for every tool that takes one.
#pragma once

#include <cstddef>
#include <string>

namespace ds::report {

inline constexpr std::size_t kMaxLabelLength = 64;

// 1..64 printable ASCII characters, not starting or ending with a space (labels end up in file names,
// SQL rows, HTML and CI logs). Returns the label unchanged; throws ConfigError naming `flag`, what is
// wrong (empty, too long, which byte at which position) and the rule.
std::string checkLabel(const std::string& label, const std::string& flag = "--label");

}  // namespace ds::report
