// Reading the Flight Recorder dumps of a hung job into RankDump (dump.h): one file per rank, the
// pickle the watchdog writes or the JSON of _dump_fr_trace_json(), every format version from 2.2.
// Entries are converted one at a time as the file is parsed, so a dump of a million entries needs
// a few hundred MB, not its generic tree (pickle.h). Dumps are read one rank at a time and handed on
// (forEachDump), so a job of 16,384 ranks is never in memory at once. Nothing here knows the world
// size: which ranks are missing is the analysis' call, from pg_config.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diag/hang/dump.h"

namespace ds::diag::hang {

// One rank's dump from its file. Throws IoError when the file cannot be opened, ConfigError when
// it is not a regular file, is larger than the memory this node has available, or its content is
// not a dump (see parseDump).
RankDump readDump(const std::string& path, int rank);

// The same from bytes in memory (tests, fuzzing); `name` stands for the file in every message. The
// format is sniffed: a pickle starts with PROTO (0x80), a JSON dump with '{'. Throws ConfigError
// for an empty or truncated file, one that is neither, a refused pickle (pickle.h), and a top
// level that is not a dict. A field of the wrong type is not an error: it becomes a sentence in
// RankDump::warnings and the field stays unknown.
//
// A pickle's entries are read the fast way by default: the light path of the pickle reader (pickle.h)
// and a one-pass reading of an entry whose every field has the type torch writes. An entry either
// cannot take goes by the general rules; kGeneral reads every entry by them (tests compare the two,
// which must give the same dump).
enum class EntryPath { kFast, kGeneral };
RankDump parseDump(std::string_view bytes, const std::string& name, int rank, EntryPath path = EntryPath::kFast);
// The same into `dump`, whose entries' buffers are reused (what it held before is replaced).
void parseDumpInto(std::string_view bytes, const std::string& name, int rank, RankDump& dump,
                   EntryPath path = EntryPath::kFast);

// The rank a dump's file name ends in: "comm_lib_trace_rank_7.json" -> 7, "nccl_trace_rank_12" ->
// 12 (a ".json", ".pickle" or ".pkl" suffix is skipped); nullopt when it ends in no number.
std::optional<int> rankFromFileName(std::string_view fileName);

// The dump files named on the command line, by the rank their names end in.
struct DumpFiles {
  struct File {
    std::string path;
    std::uint64_t bytes = 0;
  };
  std::map<int, std::vector<File>> byRank;  // each rank's files in name order
  std::vector<std::string> problems;        // each a sentence naming the path; the rest is read
};

// The files `args` name: files, directories (each regular file in it whose name ends in a rank;
// other files are skipped quietly) and glob(3) patterns (matched the same way). A path that does not
// exist, a folder or glob without dumps, and a named file whose name ends in no rank are problems.
// Throws ConfigError when nothing named is a dump file at all. Reads no dump.
DumpFiles findDumpFiles(const std::vector<std::string>& args);

struct ReadOptions {
  // Threads that read and parse dumps ahead of the caller (1: the caller's thread reads them).
  int threads = 1;
  // The most bytes of files read ahead of the caller at once (at least one rank's are).
  std::uint64_t maxBytesInFlight = 256ull << 20;
};

// This process's CPUs (its affinity mask), at most 8: ReadOptions::threads for dsdiag hang.
int defaultReadThreads();

// Reads every rank's dump and hands it to `sink`, one rank at a time in rank order; the sink owns it
// and drops it when done, so memory holds the dumps read ahead (a few) rather than all of them. A
// rank's files are read in name order: the first readable one is kept; a second is a problem naming
// both, except that a pickle and a JSON with the same records are only a note and the pickle is
// kept. A file that cannot be read is a problem sentence naming it (appended to `problems` in rank
// order) and the others are read. Returns the number of dumps handed over. What the sink leaves in
// the dump it was handed (moved from or not) is reused for a later rank. What the sink throws ends
// the reading and is rethrown. Blocking; the reading threads wait on a condition variable, never spin.
std::size_t forEachDump(const DumpFiles& files, const std::function<void(RankDump&&)>& sink,
                        std::vector<std::string>& problems, const ReadOptions& options = {});

}  // namespace ds::diag::hang
