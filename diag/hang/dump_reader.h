// Reading the Flight Recorder dumps of a hung job into RankDump (dump.h): one file per rank, the
// pickle the watchdog writes or the JSON of _dump_fr_trace_json(), every format version from 2.2.
// Entries are converted one at a time as the file is parsed, so a dump of a million entries needs
// a few hundred MB, not its generic tree (pickle.h). Nothing here knows the world size: which
// ranks are missing is the analysis' call, from pg_config.
#pragma once

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
RankDump parseDump(std::string_view bytes, const std::string& name, int rank);

// The rank a dump's file name ends in: "comm_lib_trace_rank_7.json" -> 7, "nccl_trace_rank_12" ->
// 12 (a ".json", ".pickle" or ".pkl" suffix is skipped); nullopt when it ends in no number.
std::optional<int> rankFromFileName(std::string_view fileName);

struct DumpSet {
  std::map<int, RankDump> ranks;      // by the rank in the file name
  std::vector<std::string> problems;  // each a sentence naming the file; the analysis goes on without it
};

// Reads every dump that `args` name: files, directories (each regular file in it whose name ends
// in a rank; other files are skipped quietly) and glob(3) patterns (matched the same way). Files
// are read in name order; a second file for a rank is a problem naming both and the first is kept,
// except that a pickle and a JSON with the same records are only a note and the pickle is kept.
// Throws ConfigError when nothing named is a dump file at all.
DumpSet loadDumps(const std::vector<std::string>& args);

}  // namespace ds::diag::hang
