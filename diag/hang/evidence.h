// Evidence about a hung job from outside the Flight Recorder dumps: the ranks' logs (PyTorch's
// watchdog lines, NCCL's WARN lines), an NCCL RAS answer, and dsdiag's fleet JSON. Each parser
// turns text a user pasted or a file they pointed at into these plain facts; the analysis
// (analyse.h) joins them to the dumps. Every fact keeps where it came from (file:line), so a
// verdict can cite it.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ds::diag::hang {

// Where a fact was read: "logs/rank3.err:1042", "ras.txt:12", "diag.json".
struct Source {
  std::string file;
  int line = 0;  // 0 when the fact is not from one line (a JSON document)
  std::string text;  // the line itself (trimmed to ~300 chars) or a short description
};

// One line of PyTorch's watchdog or NCCL about one rank.
struct LogFact {
  enum class Kind {
    kWatchdogTimeout,   // "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=N, OpType=X ...)"
    kWatchdogFailure,   // "failure detected by watchdog at work sequence id: N PG status: last enqueued work: E, last completed work: C"
    kDumpSignal,        // "Received a dump signal ... from rank N" (N: the rank that timed out first)
    kNcclNetError,      // NCCL WARN of a network fault: peer address, HCA, "Connection closed by remote peer"
    kNcclRemoteError,   // ncclRemoteError / "remote process exited or there was a network error"
    kGlooPeerClosed,    // gloo's "[.../pair.cc:N] Connection closed by peer [10.0.0.7]:13716": that peer left
    kGlooTimeout,       // gloo's "Timed out waiting 5000ms for recv operation to complete" (send or recv)
    kException,         // a Python traceback's exception ("ValueError: bad batch") or a C++ exception that
                        // ended the process ("terminate called after throwing an instance of '...'")
  };
  Kind kind;
  std::optional<int> rank;       // the rank whose log it is (from the line's "[Rank N]" / "[PG 0 Rank N]" or the file name)
  std::optional<int> fromRank;   // kDumpSignal: the rank that asked for the dump
  std::string pgId;              // "0" when the line names "PG 0"; "" if not said
  std::optional<int64_t> seq;    // SeqNum / work sequence id
  std::string opType;            // "ALLREDUCE", "BROADCAST", ... as the line spells it; kGlooTimeout: "send"/"recv"
  std::optional<int64_t> lastEnqueued, lastCompleted;  // from kWatchdogFailure
  std::optional<int64_t> timeoutMs, ranForMs;
  std::string peerAddr;          // kNcclNetError, kGlooPeerClosed: the peer's IP (or ip:port)
  std::string hca;               // kNcclNetError: "mlx5_3"
  std::string host;              // the host the line was written on, when the line says it
  // How `rank` was decided, strongest first (evidence_reader.h): "log_prefix" (c10's "[rank3]:"),
  // "default_group" ("[PG ID 0 ... Rank 3]"), "launcher_label" (srun -l "3: ", mpirun "[1,3]<stderr>:"),
  // "file_name", "group_rank" ("[Rank 3]" with no group named), "local_rank" (torchrun's "[default3]:");
  // "" when rank is unknown.
  std::string rankFrom;
  std::optional<int> groupRank;  // the rank the line names inside its group ("[PG ID 1 ... Rank 0]": 0)
  std::optional<int> peerRank;   // kNcclNetError "[Proxy Service N] ... from rank M": M (communicator rank)
  // kException: the exception's type as printed ("ValueError", "torch.distributed.DistBackendError",
  // "gloo::EnforceNotMet"), the first line of its message, the innermost frame of the traceback
  // ("load_batch (train.py:88)"; "" when none), and whether it is an error that a hang itself raises on
  // the ranks that wait (a collective's timeout, a peer's closed connection, a watchdog abort): such an
  // error says the rank waited, not why. `source` is the exception's line.
  std::string exception, message, frame;
  bool hangConsequence = false;
  Source source;
};

// One rank as NCCL RAS reports it (STATUS / VERBOSE STATUS, text or JSON).
struct RasRank {
  int rank = -1;
  std::string host;
  std::optional<int> pid;
  std::optional<int> gpu;
  std::string state;   // "missing", "dead", "mismatch", "incomplete", "ok" ... as RAS says, lower-cased
  std::optional<int64_t> launchedUpTo;  // "26 ranks have launched up to operation 6650": 6650
  std::string detail;  // what RAS said beyond the state: "AllReduce operation counts", "status FINALIZE", ...
  // The communicator: "#0-0 (27a079b828ff1a75)" (text) or its "hash" (JSON); "" for a process that RAS
  // names without a rank (INCOMPLETE / DEAD processes; then rank stays -1 unless the same process appears
  // as a rank of the job-wide communicator).
  std::string comm;
  std::optional<int> commSize;
  bool worldComm = false;  // the communicator spans every GPU of the job, so `rank` is the global rank
  Source source;
};

// A host verdict from dsdiag's fleet JSON (dsperf.fleet: healthy | suspect | no_result).
struct FleetHostFact {
  std::string host;
  std::string state;
  std::vector<int> ranks;
  std::string evidence;  // the first line of its evidence
  Source source;
};

struct ExternalEvidence {
  std::vector<LogFact> logs;
  std::vector<RasRank> ras;
  std::vector<FleetHostFact> fleet;
  std::map<int, std::string> rankHost;   // joined from all of the above; first source wins
  std::map<int, Source> rankHostSource;
  // Addresses and their hosts, from dsdiag's fleet JSON (each rank's interfaces): what turns the IP
  // addresses of RAS and of NCCL's WARN lines into host names (joinAddresses, evidence_reader.h).
  std::map<std::string, std::string> addressHost;
  std::map<std::string, Source> addressHostSource;
  // A rank's address where a host name was already known for it, and a rank's host name where an
  // address was already known for it (not comparable until joinAddresses).
  std::map<int, std::pair<std::string, Source>> rankAddress;
  std::map<int, std::pair<std::string, Source>> rankName;
  std::vector<std::string> problems;     // unreadable files, lines that looked relevant but did not parse
};

}  // namespace ds::diag::hang
