// Host lists in the forms schedulers and launchers take: Slurm's compressed hostlist ("node[03,17-18]",
// what `sbatch --exclude` / `srun --exclude` and SLURM_JOB_NODELIST use) and DeepSpeed's launcher
// `--exclude` ("host1@host2").
#pragma once

#include <string>
#include <vector>

namespace ds::report {

// Compresses host names into one Slurm hostlist: names that differ only in their trailing number share
// a bracket ("node[01-03,07]"); zero padding is kept (a range's width is that of its first number, as
// Slurm expands it: "node[08-10]", "node[9-10]"); several prefixes are joined by commas
// ("gpu[1-2],node07"); names without a trailing number stay as they are. Duplicates are dropped and the
// result is ordered by prefix, then number. engine/env's expandNodelist gives back the same set of
// names. "" for no hosts. Names that cannot stand in a hostlist (containing ',', '[' or ']', or empty)
// throw ConfigError.
std::string slurmHostlist(std::vector<std::string> hosts);

// DeepSpeed's `deepspeed --exclude` value: the hosts joined by '@' ("node07@node14"), sorted, without
// duplicates; "" for none.
std::string deepspeedExclude(std::vector<std::string> hosts);

}  // namespace ds::report
