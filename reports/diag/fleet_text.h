// Fleet mode's human output (dsdiag --world on many hosts) and its exclude file. The text leads with
// what an operator acts on: the suspect hosts and links with their evidence, the hosts with no result,
// counts of the rest, the interface to use, and the exclude lines. Healthy hosts are listed only when
// asked, so that a fleet of thousands does not scroll the suspects away.
#pragma once

#include <string>
#include <vector>

#include "reports/diag/fleet_schema.h"

namespace ds::report {

struct FleetTextOptions {
  bool color = false;
  bool verbose = false;  // every host with its verdict, and every evidence sentence
};

// The fleet section (several lines, each ending in '\n').
std::string formatFleetText(const FleetReport& report, const FleetTextOptions& options = {});

// What the judgement found about interfaces when it advises no setting (no job-wide value, no host's
// own): which names reach every peer ("eth0 reaches every peer from every host; nothing to set."), or
// that none was judged to. One sentence, for the text and the HTML page.
std::string interfacesFound(const FleetJudgement& judgement);

// The hosts to keep out of the next job: suspect hosts and hosts with no result, sorted. Suspect links
// are not in it (either end may be fine); the text names them.
std::vector<std::string> excludedHosts(const FleetJudgement& judgement);

// Writes the exclude file: one line, the Slurm hostlist of excludedHosts (`srun --exclude=./FILE`, or
// `sbatch --exclude="$(cat FILE)"`), or an empty file when no host is to be excluded. Atomic (a temp
// file and rename): a reader sees the old file or the new one. Throws IoError naming the path.
void writeExcludeFile(const std::string& path, const FleetJudgement& judgement);

}  // namespace ds::report
