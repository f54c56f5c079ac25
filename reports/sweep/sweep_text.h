// The nccl-tests text table of a sweep (REFERENCE.md §5): the same preamble, column headers, row
// layout and footer lines as nccl-tests, so that existing parsers keep working. Our additions are
// '#' comment lines (which nccl-tests parsers skip) and one trailing column, the straggler.
#pragma once

#include <string>
#include <vector>

#include "reports/sweep/sweep_schema.h"

namespace ds::report {

// nccl-tests' type names: float, double, half, bfloat16, int32, int64, uint8, int8.
std::string ncclTestsTypeName(const std::string& dtype);
// nccl-tests' time column: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f.
std::string formatTimeUs(double us);

// "# nThread 1 nGpus 1 minBytes ... graph: 0", the blocking line, "# Using devices" and one line per
// rank, then our own comment lines (backends, collectives, how time is combined).
std::string formatSweepPreamble(const SweepArgs& args, const SweepMetadata& meta);
// A "# Collective ..." comment line and nccl-tests' three column-header lines.
std::string formatTableHeader(const std::string& backend, const std::string& collective,
                              const std::string& busFactor);
// One row: size count type redop root | out-of-place time algbw busbw #wrong | in-place ... | straggler.
std::string formatRow(const SweepMeasurement& m);
// After a table: one comment line listing the sizes that were rounded, or "" when none was.
std::string formatRoundingNote(const std::vector<SweepMeasurement>& rows);
// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X", "#"; preceded by a
// "# Stopped early: ..." line when the run did not finish.
std::string formatFooter(const SweepSummary& s);

}  // namespace ds::report
