// Shared command-line checks of every dsperf tool (dsrun, dsbench, dsdiag, dsreport): CLI11
// validators with short messages of our own, and a parse() whose environment twins name the
// variable, not the flag, when their value is bad.
//
// A validator's message is the part after "<flag>: " (CLI11 puts the flag in front). Numbers refuse
// empty text, NaN, inf, trailing text and anything outside their bounds; values are echoed at most
// 40 characters long, with control and non-ASCII bytes as \xNN, so a hostile value cannot flood or
// corrupt a terminal. Attach numeric validators with ->transform(): they also rewrite the text to
// plain decimal, so CLI11 never reads "010" as octal or "0x10" as hex.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ds::cli {

// A whole number in [lo, hi], e.g. integer(1, 4096).
CLI::Validator integer(long long lo, long long hi);
// A finite number in [lo, hi]; with loOpen, lo itself is refused (e.g. seconds that must be > 0).
CLI::Validator number(double lo, double hi, bool loOpen = false);
// One of `names`, exactly (case-sensitive, as the tools document them); with commaList, a
// comma-separated list of them ("gloo,mpi").
CLI::Validator oneOf(std::vector<std::string> names, bool commaList = false);
// A check by the tool's own parser (a list of names, a model spec, a label): passes when `check`
// returns, refuses with the message of the ds::ConfigError it throws. The same function then runs
// again on the value the tool uses, so flag and parser cannot disagree.
CLI::Validator checkedBy(std::function<void(const std::string&)> check);
// A file the tool will create or replace (results are written to a temp file in the same folder and
// renamed): not a directory, not a device, FIFO or socket, in a folder that exists and this user may
// write. Checked before any work starts, so a long run is never lost to a late write error.
CLI::Validator outputFile();
// A file the tool will read: it exists, is a regular file (not a directory, device or FIFO) and this
// user may read it. The size cap is the reader's (it knows what it reads).
CLI::Validator inputFile();

// "'abc'" for error messages: at most 40 characters, control and non-ASCII bytes as \xNN.
std::string shown(const std::string& value);

// app.parse(argc, argv), with CLI11's environment twins (Option::envname) applied by us after the
// command line: a twin counts only when its flag was not given and its (sub)command was chosen, an
// empty variable counts as unset (as in CLI11), and a bad value throws CLI::ValidationError naming
// the variable ("DSRUN_NPROC_PER_NODE (twin of --nproc-per-node): 'abc' is not a whole number ...").
// A required option whose twin is set counts as given. Throws CLI::ParseError like app.parse().
void parse(CLI::App& app, int argc, const char* const* argv);
// The same for app.parse(std::vector<std::string>&&): the arguments last first, without the program.
void parse(CLI::App& app, std::vector<std::string> reversedArgs);

}  // namespace ds::cli
