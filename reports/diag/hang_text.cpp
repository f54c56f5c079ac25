#include "reports/diag/hang_text.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "engine/common/ranges.h"

namespace ds::report {
namespace {

std::string groupText(const HangGroupRef& g) {
  return g.pgDesc.empty() || g.pgDesc == "undefined" ? fmt::format("group {}", g.pgName)
                                                     : fmt::format("group {} ({})", g.pgName, g.pgDesc);
}

std::string ranksText(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", formatRanges(ranks));
}

// "rank 12 on gpu-017" / "ranks 3,7" of the culprits of one kind.
std::string whoText(const std::vector<const HangCulprit*>& cs) {
  std::vector<int> ranks;
  std::set<std::string> hosts;
  for (const auto* c : cs) {
    ranks.push_back(c->rank);
    if (!c->host.empty()) hosts.insert(c->host);
  }
  std::string out = ranksText(ranks);
  if (!hosts.empty()) out += fmt::format(" on {}", fmt::join(hosts, ", "));
  return out;
}

void evidence(std::string& out, const HangReport& r) {
  if (r.culprits.empty()) return;
  out += "\nEvidence:\n";
  for (const auto& c : r.culprits) {
    if (r.culprits.size() > 1) out += fmt::format("  {}\n", c.summary);
    for (const auto& e : c.evidence) {
      out += fmt::format("  - {}\n", e.claim);
      if (!e.file.empty() || !e.detail.empty())
        out += fmt::format("      {}{}{}\n", e.file, e.file.empty() || e.detail.empty() ? "" : ": ", e.detail);
    }
  }
}

void noDump(std::string& out, const HangReport& r, int maxLines) {
  if (r.noDump.empty()) return;
  // One line per (group, last sighting): a host that died takes all its ranks with it.
  std::map<std::tuple<std::string, std::string, long long>, std::pair<std::vector<int>, std::set<std::string>>> lines;
  for (const auto& n : r.noDump) {
    auto& [ranks, hosts] = lines[{n.group.pgName, n.group.pgDesc, n.lastSeenSeq.value_or(-1)}];
    ranks.push_back(n.rank);
    if (!n.host.empty()) hosts.insert(n.host);
  }
  out += "\nRanks without a dump:\n";
  int shown = 0;
  for (const auto& [key, v] : lines) {
    if (shown++ == maxLines) {
      out += fmt::format("  ... {} more lines (see --json)\n", lines.size() - maxLines);
      break;
    }
    const auto& [name, desc, seq] = key;
    const auto& [ranks, hosts] = v;
    const std::string where = hosts.empty() ? "" : fmt::format(" ({})", fmt::join(hosts, ", "));
    out += seq >= 0 ? fmt::format("  - {}{}: peers last saw {} at #{} of {}\n", ranksText(ranks), where,
                                  ranks.size() == 1 ? "it" : "them", seq, groupText({name, desc}))
                    : fmt::format("  - {}{}: no op of {} was completed by all its peers\n", ranksText(ranks), where,
                                  groupText({name, desc}));
  }
}

void waiting(std::string& out, const HangReport& r, int maxLines) {
  if (r.waiting.empty()) return;
  out += "\nWaiting:\n";
  int shown = 0;
  for (const auto& w : r.waiting) {
    if (shown++ == maxLines) {
      out += fmt::format("  ... {} more lines (see --json)\n", r.waiting.size() - maxLines);
      break;
    }
    const std::string seq = w.seq ? fmt::format(" #{}", *w.seq) : "";
    const std::string iso = w.sinceNs ? hangIsoTime(*w.sinceNs) : "";
    const std::string since = iso.size() >= 19 ? fmt::format(" since {} UTC", iso.substr(11, 8)) : "";
    out += fmt::format("  - {} {}{}{} of {}: {}{}: {}\n", ranksText(w.ranks), w.op, seq, w.p2p ? " (p2p)" : "",
                       groupText(w.group), w.blockedByOtherGroup ? "blocked by another group" : "waiting", since,
                       w.reason);
  }
}

void lines(std::string& out, const char* title, const std::vector<std::string>& items) {
  if (items.empty()) return;
  out += fmt::format("\n{}:\n", title);
  for (const auto& s : items) out += fmt::format("  - {}\n", s);
}

}  // namespace

std::vector<std::string> hangAdvice(const HangReport& r) {
  std::map<FaultKind, std::vector<const HangCulprit*>> byKind;
  for (const auto& c : r.culprits) byKind[c.kind].push_back(&c);
  std::vector<std::string> out;
  for (const auto& [kind, cs] : byKind) {
    const std::string who = whoText(cs);
    switch (kind) {
      case FaultKind::kNeverEntered:
        out.push_back(fmt::format("The code of {} took another path before the collective: read its last op's stack "
                                  "(the top frame above) and the conditions around the call (a rank-dependent branch, "
                                  "an uneven number of batches per rank, an exception caught on one rank).",
                                  who));
        break;
      case FaultKind::kStalledHost:
        out.push_back(fmt::format("{} stopped issuing work: run `py-spy dump --native --pid PID` on its process; check "
                                  "its data loader (workers, a stuck file system read), a thread holding the GIL, a "
                                  "long host computation, and its log around the time of its last op.",
                                  who));
        break;
      case FaultKind::kStalledDevice:
        out.push_back(fmt::format("The GPU or network of {} holds the op: check the host's GPU (`nvidia-smi -q`: Xid "
                                  "errors, ECC, a GPU busy without progress) and NIC (`ibstat`, link flaps, NCCL WARN "
                                  "lines); run `dsdiag` on that node, and `dsdiag --world` across the job's hosts.",
                                  who));
        break;
      case FaultKind::kMismatchedOp:
      case FaultKind::kMismatchedSize:
      case FaultKind::kMismatchedDtype:
        out.push_back(fmt::format("{} called a different {} at the same point as its peers: compare the call sites "
                                  "(the dumps' frames), look for rank-dependent branches, per-rank model or bucket "
                                  "differences, mixed precision on one rank; TORCH_DISTRIBUTED_DEBUG=DETAIL checks "
                                  "collectives' shapes as they run.",
                                  who,
                                  kind == FaultKind::kMismatchedOp     ? "collective"
                                  : kind == FaultKind::kMismatchedSize ? "tensor size"
                                                                       : "dtype"));
        break;
      case FaultKind::kP2pUnmatched:
        out.push_back(fmt::format("Every send needs its recv on the peer, in the same order: check the p2p schedule of "
                                  "{} and its peer (microbatch counts, the order of sends and recvs).",
                                  who));
        break;
      case FaultKind::kNoDump:
      case FaultKind::kBlockedByOtherGroup:
        break;
    }
  }
  if (byKind.count(FaultKind::kNoDump) || !r.noDump.empty()) {
    std::vector<int> ranks;
    for (const auto& n : r.noDump) ranks.push_back(n.rank);
    out.push_back(fmt::format("Check the host and log of {} for a crash or an OOM kill (`journalctl -k | grep -i "
                              "oom`, the scheduler's exit code); set TORCH_FR_DUMP_ON_TIMEOUT=1 (older torch: "
                              "TORCH_NCCL_DUMP_ON_TIMEOUT=1) and TORCH_NCCL_ASYNC_ERROR_HANDLING=3 so that every live "
                              "rank writes its dump next time.",
                              ranksText(ranks)));
  }
  if (r.verdict == HangVerdict::kCannotDecide)
    out.push_back("Add the evidence the dumps lack: the ranks' logs (--logs), an NCCL RAS answer taken while the job "
                  "still hangs (`VERBOSE STATUS` on localhost:28028, --ras), dsdiag's fleet JSON (--fleet).");
  if (r.verdict == HangVerdict::kNoFaultFound)
    out.push_back("Nothing is pending in the dumps: they were taken before the hang or after a restart. Take them while "
                  "the job hangs (TORCH_FR_DUMP_ON_TIMEOUT=1, or torch._C._distributed_c10d._dump_fr_trace()).");
  return out;
}

std::string formatHangText(const HangReport& r, const HangTextOptions& options) {
  std::string out = r.headline + "\n";
  out += fmt::format("verdict: {} (exit {}); {} of {} ranks left a dump\n", hangVerdictName(r.verdict),
                     hangExitCode(r.verdict), r.dumpsRead, r.worldSize);
  evidence(out, r);
  noDump(out, r, options.maxLines);
  waiting(out, r, options.maxLines);
  std::vector<std::string> undecided;
  for (const auto& u : r.undecided) undecided.push_back(u.reason);
  if (!r.culprits.empty() || undecided.size() > 1) lines(out, "Cannot decide", undecided);
  else if (undecided.size() == 1 && r.headline.find(undecided.front()) == std::string::npos)
    lines(out, "Cannot decide", undecided);
  lines(out, "Problems", r.problems);
  lines(out, "What to do", hangAdvice(r));
  return out;
}

}  // namespace ds::report
