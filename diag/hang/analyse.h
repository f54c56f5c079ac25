// Cross-rank analysis of Flight Recorder dumps: which rank stopped the others, with evidence per
// claim (issue 37, section 2). Reads the dump model (dump.h) and outside evidence (evidence.h) and
// fills the report records of reports/diag/hang_schema.h; it prints nothing and writes no file.
//
// Cost: O(ranks x entries) time. Memory: each dump is reduced to a digest as it is added (4 bytes per
// collective entry, the last few entries in full, the pending ones), so a caller that reads one file
// at a time and drops it (HangAnalysis::add) never holds more than one dump. Nothing is
// O(ranks^2) except what the files themselves carry (every dump lists the world group's members).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "diag/hang/dump.h"
#include "diag/hang/evidence.h"
#include "reports/diag/hang_schema.h"

namespace ds::diag::hang {

struct AnalyseOptions {
  // Entries per rank and group kept for the report's per-rank timelines (0: none).
  int timelineEntries = 16;
  // Ranks whose per-rank timelines the report carries: all of a job of at most this many dumps, else
  // the ranks the verdict names, at most this many. Every rank's state is in the group timelines.
  int rankTimelines = 64;
  // Pending (not completed) entries kept per rank and group; older ones are counted, not kept.
  int pendingEntries = 64;
  // Log lines of waiting ranks cited per culprit (their watchdog naming the stuck op).
  int peerLogsCited = 3;
};

// The analysis, fed one dump at a time. Not thread-safe; add() may be called in any rank order.
class HangAnalysis {
 public:
  explicit HangAnalysis(AnalyseOptions options = {});
  ~HangAnalysis();
  HangAnalysis(const HangAnalysis&) = delete;
  HangAnalysis& operator=(const HangAnalysis&) = delete;

  // Digests one rank's dump; the dump may be dropped afterwards. A second dump of a rank already
  // added is refused with a problem sentence (the reader decides which one to keep).
  void add(const RankDump& dump);
  // A sentence about the input (a file that could not be read), kept in the report's problems ahead
  // of those the analysis finds, whenever it is added.
  void addProblem(std::string sentence);
  // The verdict. Call once, after the last add().
  report::HangReport finish(const ExternalEvidence& evidence);

  struct State;  // the digests; defined in analyse.cpp

 private:
  std::unique_ptr<State> s_;
};

// All dumps at once: HangAnalysis fed with every dump in `dumps` and every sentence of loadProblems.
report::HangReport analyse(const std::map<int, RankDump>& dumps, const ExternalEvidence& evidence,
                           const AnalyseOptions& options, const std::vector<std::string>& loadProblems);

}  // namespace ds::diag::hang
