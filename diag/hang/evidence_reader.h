// Readers of the evidence a hung job leaves outside its Flight Recorder dumps (evidence.h): the ranks'
// logs, an NCCL RAS answer and dsdiag's fleet JSON. Each appends plain facts to an ExternalEvidence and
// joins a rank->host map from whatever ties a rank to a host (first source wins).
//
// Rules every reader keeps:
// - Nothing from a file is trusted to be well formed: a line or a field that does not parse is one
//   sentence in `out.problems` naming the file (and line), never an exception; the rest is read.
// - A path that does not exist (or a glob that matches nothing) is the caller's mistake: ConfigError
//   naming the path. The caller adds which flag it came from.
// - Bounded: logs are streamed line by line (any size; a line longer than kMaxLogLineBytes is skipped
//   and counted); a RAS or fleet file is read whole only when it is a regular file smaller than half
//   the memory available to this process.
// - Matching is RE2 (time linear in the line, bounded memory), as dsdiag explain does.
//
// Wordings recognised (checked against the sources named in diag/hang/tests/data/evidence/README.md):
// - PyTorch ProcessGroupNCCL, torch 1.13 .. 2.15:
//   "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=N, OpType=X, [NumelIn=..,
//   NumelOut=..,] Timeout(ms)=T) ran for M milliseconds before timing out" (any "Work...(" type);
//   "... failure detected by watchdog at work sequence id: N PG status: last enqueued work: E, last
//   completed work: C" (2.4+), "Exception (either an error or timeout) detected by watchdog at work: N,
//   last enqueued NCCL work: E, last completed NCCL work: C" and "Timeout at NCCL work: N, ..." (2.2/2.3);
//   "Received a dump signal due to a collective timeout from this local rank | rank N ..." (2.4+),
//   "Received a dump signal from this local rank", "Received a global timeout from another rank" (2.2/2.3).
//   Group prefixes "[PG ID 0 PG GUID 0(default_pg) Rank 3]", "[PG ID 1 PG GUID 1 Rank 0]", "[PG 0
//   (default_pg) Rank 3]", "[PG 0 Rank 3]", "[Rank 3]".
// - NCCL WARN lines ("host:pid:tid [dev] [file:line] NCCL WARN ..."): "NET/IB : Got completion from peer
//   <ip><port> with error|status=...", "... hca mlx5_3"; "NET/IB : mlx5_0:1 Got async error event: ...";
//   "Connection closed by remote peer <addr><port>"; "Call to recv from <addr> failed"; "[Proxy Service N]
//   Failed to execute operation X from rank M, retcode R"; ncclRemoteError / "remote process exited or
//   there was a network error".
// - NCCL RAS (2.24 .. 2.29) STATUS / VERBOSE STATUS text and `SET FORMAT json` (2.28.7+), including
//   MONITOR's PEER_DEAD events.
// - dsdiag's own "dsperf.diag" report (its "fleet" object) or a bare "dsperf.fleet" document, read with
//   reports/diag/fleet_json.h.
#pragma once

#include <cstddef>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "diag/hang/evidence.h"

namespace ds::diag::hang {

// Longer lines are skipped (and counted in one problem sentence per file): no log line of interest
// is that long, and a binary file or a progress bar without newlines must not grow a buffer.
inline constexpr std::size_t kMaxLogLineBytes = std::size_t{64} * 1024;

// Reads rank logs (stdout/stderr of the training processes, or a launcher's combined console). Each
// path is a file, a directory (every regular file under it, recursively, in natural name order) or a
// glob; a file reached twice is read once. Appends one LogFact per watchdog / NCCL line (a line repeated
// inside an exception message is merged into the first), and ties ranks to hosts from NCCL's
// "host:pid:tid" headers, deepspeed/pdsh "host: [rank3]:" prefixes and torchrun's error summary
// ("host : gpu-017" / "rank : 12 (local_rank: 4)").
//
// The rank of a line, strongest first (LogFact::rankFrom): c10's "[rank3]:" prefix (RANK, global);
// the rank of a "[PG ID 0 ...]" / "[PG 0 ...]" / "(default_pg)" prefix (the default group's rank is the
// global rank); srun -l "3: " or mpirun "[1,3]<stderr>:" labels; the trailing number of the file's
// name ("rank_3.log", "worker-3.err"; not "slurm-<jobid>.out", and not once NCCL lines of a second GPU show
// the file holds several ranks, e.g. srun --output=%N.log); a bare "[Rank 3]" (the rank in the group
// that timed out: global only in the default group); torchrun's "[default3]:" (a LOCAL rank: used only
// when nothing else names one). A rank named inside a non-default group is kept in groupRank only.
// Only the first four tie a rank to a host.
//
// Throws ConfigError when a path does not exist or a glob matches nothing. Blocking file I/O only.
void readLogs(const std::vector<std::string>& paths, ExternalEvidence& out);

// Reads an NCCL RAS answer saved to a file (`ncclras`, `echo verbose status | nc localhost 28028`),
// text or JSON. One RasRank per rank (or process) RAS names: "missing" (a communicator's missing rank),
// "incomplete" / "dead" (a process RAS could not reach / gave up on; rank -1 unless the same host, pid
// and GPU appear as a rank of the job-wide communicator), "mismatch" (an outlier of a MISMATCH, with
// launchedUpTo), "error" (ERROR block or a JSON rank with an error), "ok" (JSON ranks without one).
// Ranks of the job-wide communicator (worldComm) tie rank->host (RAS prints IP addresses).
// Throws ConfigError when the path does not exist.
void readRas(const std::string& path, ExternalEvidence& out);

// Reads dsdiag's report (`dsdiag --world --json FILE`, schema dsperf.diag with a "fleet" object) or a
// bare dsperf.fleet document: one FleetHostFact per host verdict, and rank->host from their ranks.
// Throws ConfigError when the path does not exist; a report without a fleet object, a newer schema or a
// bad field is a problem sentence.
void readFleetJson(const std::string& path, ExternalEvidence& out);

// Ties `rank` to `host` unless a host is already known for it (first source wins). A different host of
// the same kind (both names, compared up to the first '.', or both IP addresses) is a problem sentence
// naming both sources; a name against an IP address is not comparable and is left alone. Returns true
// when this call set the host.
bool addRankHost(ExternalEvidence& out, int rank, const std::string& host, const Source& source);

// After every reader: a rank placed by an IP address (RAS, an NCCL WARN line) whose address the fleet
// JSON ties to a host is placed on that host (its source says through which address); a rank whose
// address belongs to another host than the name another source gave is a problem sentence naming
// both sources.
void joinAddresses(ExternalEvidence& out);

// The host that owns `address` ("10.0.0.7", "10.0.0.7<43121>", "[fe80::1]:43121"), "" when unknown.
std::string hostOfAddress(const ExternalEvidence& ev, const std::string& address);

namespace detail {
// The cores of readLogs / readRas on text already opened; `file` names it in sources and problems
// (and gives the file-name rank). For tests and for callers that hold the text.
void readLogStream(std::istream& in, const std::string& file, ExternalEvidence& out);
void readRasText(const std::string& text, const std::string& file, ExternalEvidence& out);
// The rank in a log file's name: the trailing number of its base name once non-numeric extensions are
// dropped ("rank_3.log" -> 3, "log.3" -> 3, "stderr.log" -> none); none for more than 6 digits or a
// Slurm "slurm-<jobid>" name.
std::optional<int> rankFromFileName(const std::string& path);
}  // namespace detail

}  // namespace ds::diag::hang
