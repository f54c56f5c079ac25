// Slurm's compressed host and task lists.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds::env {

// Expands a Slurm hostlist such as "node[01-04,07]", "a-[1,3-5]b", "gpu[1-2],cpu7" or
// "rack[1-2]-n[01-02]" (cartesian product, zero padding kept) into host names, in Slurm's order.
// Throws ConfigError naming `varName` and the text on malformed input.
std::vector<std::string> expandNodelist(std::string_view list,
                                        std::string_view varName = "SLURM_JOB_NODELIST");

// Expands SLURM_TASKS_PER_NODE ("2(x3),1") into one count per node.
std::vector<int> expandTasksPerNode(std::string_view list, std::string_view varName = "SLURM_TASKS_PER_NODE");

}  // namespace ds::env
