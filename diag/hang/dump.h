// The Flight Recorder dump of one rank, as read from a file that PyTorch (ProcessGroupNCCL or, from
// torch 2.15, ProcessGroupGloo) or a dsperf process group wrote: the pickle (protocol 2) that the
// watchdog writes on a timeout, or the JSON of _dump_fr_trace_json(). Format facts: REFERENCE.md
// §11; field names are torch's (FlightRecorderDetail.hpp).
//
// Rules every reader of this model may rely on:
// - A field the file did not carry is std::nullopt or empty, never 0: "unknown" is not "seq 0".
// - Nothing in a file is executed: the pickle reader builds data only (pickle.h).
// - Fields this model has no slot for are kept in `extra` (top level) so nothing is lost.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds::diag::hang {

// One record of the ring buffer: one collective or p2p op issued on one process group.
struct FrEntry {
  std::optional<int64_t> recordId;
  std::string pgId;           // the group's key in pg_config / pg_status ("0", "1", ...)
  std::string pgName;         // process_group[0]
  std::string pgDesc;         // process_group[1], e.g. "default_pg", "undefined"
  std::optional<int64_t> collectiveSeqId;  // 0 for a p2p op in torch's dumps
  std::optional<int64_t> p2pSeqId;
  std::optional<int64_t> opId;
  std::string profilingName;  // "nccl:all_reduce", "gloo:broadcast", "nccl:send 1->2"
  std::string backend;        // the part before ':' ("nccl", "gloo", "mpi", "shm"); "" if none
  std::string op;             // the part after ':' without the p2p suffix ("all_reduce", "send")
  std::optional<int> p2pPeer; // for "send a->b" the b, for "recv a<-b" the b (global ranks)
  std::vector<std::vector<int64_t>> inputSizes, outputSizes;  // one shape per tensor
  std::vector<std::string> inputDtypes, outputDtypes;         // "Float", "BFloat16", ...
  std::string state;          // "scheduled", "started", "completed" ("" if absent)
  std::optional<int64_t> timeCreatedNs;
  std::optional<int64_t> timeDiscoveredStartedNs;    // None in torch's pickles
  std::optional<int64_t> timeDiscoveredCompletedNs;
  std::optional<double> durationMs;
  std::optional<int64_t> timeoutMs;
  std::optional<bool> isP2p;
  std::optional<bool> retired;
  std::string topFrame;       // "name (filename:line)" of frames[0], "" when the dump has no frames
};

// pg_config[name]: a process group's members, as global ranks.
struct FrGroup {
  std::string name;
  std::string desc;
  std::vector<int> ranks;     // parsed from the string "[0, 1]" (or a list); empty if unknown
  bool ranksKnown = false;    // false when the field was missing or unreadable
};

// pg_status[pg_id]: the watermarks of one group on this rank, as collective sequence ids.
struct FrPgStatus {
  std::optional<int64_t> lastEnqueued;
  std::optional<int64_t> lastStarted;
  std::optional<int64_t> lastCompleted;
};

struct RankDump {
  int rank = -1;              // from the file name's trailing number
  std::string file;           // the path it was read from, as the user gave it
  std::string format;         // "pickle" or "json"
  std::string version;        // "2.2" ... "2.10"; "" if absent
  std::string commLibVersion; // comm_lib_version, or nccl_version in older dumps
  std::map<std::string, FrGroup> groups;        // keyed by pg_config's key
  std::map<std::string, FrPgStatus> pgStatus;   // keyed by pg_id
  std::vector<FrEntry> entries;                 // in file order
  nlohmann::json extra = nlohmann::json::object();  // top-level fields without a slot above
  std::vector<std::string> warnings;  // what was odd but readable, each a sentence naming the file
};

}  // namespace ds::diag::hang
