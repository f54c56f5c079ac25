// The nccl-tests text table of a sweep (REFERENCE.md §5): the same preamble, column headers, row
// layout and footer lines as nccl-tests, so that existing parsers keep working. Our additions are
// '#' comment lines (which nccl-tests parsers skip) and one trailing column, the straggler.
//
// Per-iteration columns (dsbench coll -I, args.perIterTiming): 0 none, the table byte for byte as
// without -I; 1 nccl-tests' -I 1 columns i_min i_max i_p99 i_cv% after each place's #wrong (its header
// lines and units); 2 the tail columns i_p50 i_p90 i_p99 i_p99.9 i_max there instead. Each i_* is
// a statistic of the per-iteration maximum over ranks (PlaceResult::iter), "-" when unknown.
#pragma once

#include <string>
#include <vector>

#include "reports/sweep/sweep_schema.h"

namespace ds::report {

// nccl-tests' type names: float, double, half, bfloat16, int32, int64, uint8, int8.
std::string ncclTestsTypeName(const std::string& dtype);
// nccl-tests' time column: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f.
std::string formatTimeUs(double us);

// "# nThread 1 nGpus 1 minBytes ... graph: 0", the blocking line, with -I nccl-tests' "# Per-Iteration
// Report: ..." line, "# Using devices" and one line per rank, then our own comment lines (backends,
// collectives, how time is combined, -K without -I).
std::string formatSweepPreamble(const SweepArgs& args, const SweepMetadata& meta);
// nccl-tests' per-iteration columns (getFloatStr, width 7): %7.2f, else %7.1f, %7.0f or %7.1e,
// whichever fits in 7 characters.
std::string formatIterValue(double v);

// A "# Collective ..." comment line and nccl-tests' three column-header lines (with -I 1|2, the
// per-iteration columns of each place).
std::string formatTableHeader(const std::string& backend, const std::string& collective,
                              const std::string& busFactor, int perIterTiming = 0);
// One row: size count type redop root | out-of-place time algbw busbw #wrong [i_*] | in-place ...
// [i_*] | straggler.
std::string formatRow(const SweepMeasurement& m, int perIterTiming = 0);
// After a table: one comment line listing the sizes that were rounded, or "" when none was.
std::string formatRoundingNote(const std::vector<SweepMeasurement>& rows);
// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X", "#"; preceded by a
// "# Stopped early: ..." line when the run did not finish.
std::string formatFooter(const SweepSummary& s);

}  // namespace ds::report
