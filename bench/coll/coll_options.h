// The options of `dsbench coll` (nccl-tests' flags, REFERENCE.md §5, plus our own) and the pure
// functions that turn them into a plan: sizes, collectives, dtypes, ops. No globals: the CLI binds
// flags into CollFlags, and resolveOptions() checks them into CollOptions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/types.h"

namespace ds::bench::coll {

// The flags as typed (sizes keep their K/M/G suffix text until resolveOptions()).
struct CollFlags {
  std::string minBytes = "32M";  // -b
  std::string maxBytes = "32M";  // -e
  std::string stepBytes = "1M";  // -i
  int stepFactor = 0;            // -f; 0 = not given (additive steps of -i)
  bool stepFactorGiven = false;
  int iters = 20;                         // -n
  int warmupIters = 1;                    // -w (nccl-tests' default)
  int check = 1;                          // -c
  std::string op = "sum";                 // -o: a name, a comma list or all
  std::string datatype = "float";         // -d: a name, a comma list or all
  int root = 0;                           // -r
  int average = 1;                        // -a: 0 rank 0, 1 average, 2 min, 3 max
  double timeoutS = 0;                    // -T; 0 = the process group's timeout
  std::string jsonPath;                   // -J
  std::string journalPath;                // --journal; default next to -J
  std::string collectives = "allreduce";  // --coll: a comma list or all
  std::string backends;                   // --backend: a comma list; empty = the accelerator's default
  double minTimeS = 0;                    // --min-time
  bool blocking = false;                  // -z, --blocking
  int repeat = 1;                         // --repeat: passes over the sizes, size order rotated each time
  int perIterTiming = 0;                  // -I: 0, 1 (nccl-tests' i_* columns) or 2 (the tail columns)
  int perIterSkip = 0;                    // -K: leading timed iterations left out of per-iteration stats
  std::string initMethod;                 // --init-method
  std::string label;                      // --label; empty = none
  bool labelGiven = false;                // --label was given (an empty value is then an error)
};

struct CollOptions {
  std::size_t minBytes = 0, maxBytes = 0, stepBytes = 0;
  int stepFactor = 0;  // > 1: multiply; 0: add stepBytes
  int iters = 20, warmupIters = 1, check = 1;
  std::vector<comm::ReduceOp> ops;
  std::vector<comm::DType> dtypes;
  int root = 0;
  int average = 1;
  std::optional<double> timeoutS;
  std::string jsonPath, journalPath;
  std::vector<std::string> collectives;  // canonical names, run in this order
  // Those named one by one (not only through "all"): a collective the world size cannot run is an
  // error when named, and left out with a note when it came from "all".
  std::vector<std::string> collectivesNamed;
  std::vector<std::string> backends;     // empty = the world's default
  double minTimeS = 0;
  bool blocking = false;
  int repeat = 1;  // >= 1
  // -I: 0 the table as nccl-tests prints it without -I; 1 adds nccl-tests' i_min i_max i_p99 i_cv%
  // after each place's #wrong; 2 adds i_p50 i_p90 i_p99 i_p99.9 i_max instead. 1 and 2 also keep every
  // iteration's time in the JSON (times_us).
  int perIterTiming = 0;
  // -K: 0 <= perIterSkip < iters; the first perIterSkip timed iterations of each place are left out of
  // every per-iteration statistic (never out of the loop time per op).
  int perIterSkip = 0;
  std::string initMethod;
  std::string label;  // checked (reports/schema/label.h); goes to the JSON's metadata.label
};

// The order of the sizes in pass `rep` of `repeats` (--repeat): indices 0..n-1 rotated by
// rep * n / repeats, so that each size takes every part of the pass about equally often and a slow
// drift of the machine spreads over all sizes instead of landing on the last ones. Pure.
std::vector<std::size_t> repeatOrder(std::size_t n, int rep, int repeats);

// nccl-tests' sizes: a number with an optional binary K, M or G suffix ("32M" = 33554432). Also
// accepts a trailing B or iB ("4KiB") and a fraction ("1.5K" = 1536). Throws ConfigError naming
// `flag`, the text and the accepted forms.
std::size_t parseSize(const std::string& text, const std::string& flag);

// -I/--per_iter_timing as typed: "0", "1" or "2" (an optional '+'); anything else throws ConfigError
// naming `flag` and saying what each valid value does.
int parsePerIterTiming(const std::string& text, const std::string& flag = "-I/--per_iter_timing");

// Checks every flag (min > max, factor <= 1, unknown op/dtype/collective, ...) and returns the plan.
// Throws ConfigError with a message that says what is wrong and what is accepted.
CollOptions resolveOptions(const CollFlags& flags);

// The sizes of the sweep, from minBytes to maxBytes inclusive, as nccl-tests steps them: times
// stepFactor when > 1, else plus stepBytes.
std::vector<std::size_t> sweepSizes(const CollOptions& o);

// "a,b , c" -> {"a","b","c"}; empty items dropped.
std::vector<std::string> splitList(const std::string& text);

}  // namespace ds::bench::coll
