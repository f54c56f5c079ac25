#include "diag/hang/analyse.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "diag/hang/evidence_reader.h"
#include "engine/common/error.h"
#include "engine/common/ranges.h"

// How the verdict is reached (issue 37, section 2), from first principles.
//
// A collective of a group completes on a member only once every member has entered it. So when a job
// hangs, the members of the stuck group split into those that entered the stuck op and wait, and
// those that hold it. The dumps tell them apart with pg_status (last enqueued / started / completed
// collective seq per group), not with the entries: the entries are a ring buffer of the last N ops of
// the whole process, so an op missing from a buffer may only be older than its window. Per group, the
// earliest of these decides:
//
// - Agreement: the entries at one collective seq must agree in op, sizes (torch's rules: all_gather's
//   output is world x input, reduce_scatter's input is world x output, all_to_all splits are free)
//   and dtypes. Where they do not, the side that is not a strict majority entered the wrong op
//   (mismatched_*); without a strict majority it is a question.
// - Lateness: a minority that created its entry of a seq more than the op's timeout after the median
//   of the others arrived after they had given up: its host stalled, then went on (stalled_host).
// - Progress: k = (lowest last_completed among the dumped members) + 1 is the first op not completed
//   by all. A member with last_enqueued < k never issued it: it holds everyone who did. If it issued
//   nothing after, its host stopped issuing work (stalled_host: data loader, GIL, compute); if it went
//   on with other groups' ops, its code took another path (never_entered); if it waits in another
//   group's op, the search follows it there (below). A member that enqueued k and has not completed
//   it while others completed it and went on: the op reached it (they could not complete without its
//   part) and its own device or link has not finished (stalled_device); with timing on, a member that
//   never started k while the others did is the same. A "completion" nobody went on from, or of an op
//   a member never entered, is an op that ended in an error (torch's gloo counts a failed collective
//   as completed): those ranks waited in it. Everyone inside k and nobody done: a member without a
//   dump is the only one whose state is unknown, and a healthy process dumps on the timeout or on its
//   peers' signal, so one such rank (or several, all on one host) is named (no_dump); several on
//   different hosts, or every dump present, is a question (RAS may settle it).
// - A side that holds an op is named only when it is at most half of the dumped members: when most
//   members never issued an op that a few entered, the few may have issued an extra collective.
//   Position (rank 0, the first file) never decides.
//
// Across groups: every rank is stuck in at most one place, its oldest pending op. A rank that holds
// group A's op while it waits in group B's op is not a culprit but blocked_by_other_group; the search
// goes on in B, to the root. Ranks that each wait in an op the other never entered (a cycle) called
// the ops in different orders: only the ranks in every group of the cycle have both ops in their
// program, so they vote; a tie is a question. A p2p send or recv whose peer has nothing matching
// pending names that peer (p2p_unmatched). torch 2.15's gloo records no send/recv, so there a rank
// whose dump just ends may be blocked in one: "issued nothing after" convicts only where p2p ops are
// recorded, and is a question on gloo.
//
// Logs, NCCL RAS and fleet verdicts add evidence lines to the ranks they name. RAS may settle a
// question (exactly one candidate dead or missing); where it contradicts a dump, the dump stands and
// the contradiction becomes a problem sentence.

namespace ds::diag::hang {

using namespace std::string_view_literals;

using report::FaultKind;
using report::HangEvidence;
using report::HangGroupRef;
using report::HangReport;

namespace {

constexpr uint32_t kNoSig = 0xffffffffu;

// ---- vocabulary ----

enum class Family { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kScatter, kGather, kOther };

Family familyOf(std::string_view op) {
  auto has = [&](std::string_view s) { return op.find(s) != std::string_view::npos; };
  if (has("all_gather") || has("allgather")) return Family::kAllGather;
  if (has("reduce_scatter")) return Family::kReduceScatter;
  if (has("all_to_all") || has("alltoall")) return Family::kAllToAll;
  if (has("all_reduce") || has("allreduce")) return Family::kAllReduce;
  if (op == "scatter") return Family::kScatter;
  if (op == "gather") return Family::kGather;
  return Family::kOther;
}

// Compared as string_views: a std::string against a "literal" measures the literal with strlen and
// calls memcmp, per entry of every dump.
bool isP2p(const FrEntry& e) {
  return e.isP2p.value_or(false) || e.op == "send"sv || e.op == "recv"sv || e.p2pPeer.has_value();
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
int64_t numel(const std::vector<std::vector<int64_t>>& shapes) {
  int64_t n = 0;
  for (const auto& s : shapes) n += numel(s);
  return n;
}

// Are one rank's own input and output consistent with the op (torch's fr_trace rules)? `size` is
// the group's size, `index` the rank's position in it (-1 when unknown: the rules are not applied).
bool selfConsistent(Family f, const FrEntry& e, int size, int index) {
  const auto& in = e.inputSizes;
  const auto& out = e.outputSizes;
  if (in.empty() || out.empty() || size <= 0) return true;
  switch (f) {
    case Family::kAllReduce:
      return in == out;
    case Family::kAllGather:  // one tensor of world x input, or a list with one slot per member
      return numel(out) == size * numel(in) ||
             (index >= 0 && in.size() == 1 && out.size() == static_cast<size_t>(size) && out[index] == in[0]);
    case Family::kReduceScatter:
      return numel(in) == size * numel(out) ||
             (index >= 0 && out.size() == 1 && in.size() == static_cast<size_t>(size) && in[index] == out[0]);
    default:
      return true;
  }
}

struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0x100000001b3ull;
  }
  // Eight bytes at a time, inline: the strings hashed are an op and dtype names of every entry.
  void add(std::string_view s) {
    add(s.size());
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      add(w);
    }
    if (i < s.size()) {
      uint64_t w = 0;
      for (; i < s.size(); ++i) w = (w << 8) | static_cast<unsigned char>(s[i]);
      add(w);
    }
  }
  void add(const std::vector<std::vector<int64_t>>& shapes) {
    add(shapes.size());
    for (const auto& s : shapes) {
      add(s.size());
      for (int64_t d : s) add(static_cast<uint64_t>(d));
    }
  }
  void add(const std::vector<std::string>& v) {
    add(v.size());
    for (const auto& s : v) add(std::string_view(s));
  }
};

// What the members of a group must agree on at one collective seq.
struct Sig {
  uint64_t hash = 0;
  std::string op;
  std::vector<std::vector<int64_t>> in, out;
  std::vector<std::string> inDtypes, outDtypes;
  bool selfOk = true;
  int entries = 1;  // > 1: several entries share the seq (a coalesced op)
};

// One entry kept in full: the timeline, pending ops, a rank's last op.
struct Detail {
  int64_t seq = -1;  // collective seq, or p2p seq when p2p; -1 when the dump did not say
  bool p2p = false;
  bool send = false;
  int peer = -1;
  std::string op, state, frame;
  std::optional<int64_t> timeNs, timeoutMs;
  int64_t order = 0;  // position in its dump: record order
  std::vector<std::vector<int64_t>> in, out;
};

Detail detailOf(const FrEntry& e, int64_t order) {
  Detail d;
  d.p2p = isP2p(e);
  d.seq = (d.p2p ? e.p2pSeqId : e.collectiveSeqId).value_or(-1);
  d.send = e.op.rfind("send", 0) == 0;
  d.peer = e.p2pPeer.value_or(-1);
  d.op = e.op.empty() ? e.profilingName : e.op;
  d.state = e.state;
  d.frame = e.topFrame;
  d.timeNs = e.timeCreatedNs;
  d.timeoutMs = e.timeoutMs;
  d.order = order;
  d.in = e.inputSizes;
  d.out = e.outputSizes;
  return d;
}

// One rank's record of one group.
struct Track {
  int group = -1;
  std::string pgId;
  bool statusKnown = false;     // from pg_status, or derived from the entries' states
  bool statusFromDump = false;  // from pg_status
  int64_t enq = -1, started = -1, done = -1;
  int64_t firstSeq = 0;          // sigs[i] is the signature of collective seq firstSeq + i
  std::vector<uint32_t> sigs;    // kNoSig where the buffer holds no entry of that seq
  std::vector<Detail> tail;      // the last timelineEntries entries
  std::vector<Detail> pending;   // entries not completed, oldest first
  int64_t lastOrder = -1;        // position of its last entry in the dump, -1 when none
};

struct RankData {
  int rank = -1;
  std::string file;
  std::string backend;  // of its entries: "nccl", "gloo", ...
  std::vector<Track> tracks;
  std::optional<Detail> last;  // its last entry on any group
  int lastGroup = -1;
  int trackOf(int group) const {
    for (size_t i = 0; i < tracks.size(); ++i)
      if (tracks[i].group == group) return static_cast<int>(i);
    return -1;
  }
};

// A membership list as one or more dumps' pg_config gave it.
struct Vote {
  std::vector<int> members;
  std::vector<int> ranks;      // whose dumps said so
  std::vector<int> asWritten;  // members in the order the first such dump wrote them
};

struct GroupData {
  std::string name, desc;
  std::vector<Vote> votes;
  std::unordered_map<uint64_t, size_t> voteIndex;
  std::vector<std::pair<int, int>> tracks;  // (rank data index, track index)
  std::vector<int> members;                 // settled in finish()
  bool membersKnown = false;
  std::size_t lastVote = SIZE_MAX;          // the vote the last dump matched
};

}  // namespace

struct HangAnalysis::State {
  AnalyseOptions opt;
  std::vector<RankData> ranks;
  std::unordered_map<int, int> rankIndex;
  std::vector<GroupData> groups;
  std::unordered_map<std::string, int> groupIndex;
  std::vector<Sig> sigs;
  std::unordered_map<uint64_t, uint32_t> sigIndex;
  std::string lastOp;                  // signature(): the op of the last entry, and its family
  Family lastFamily = familyOf("");
  std::vector<std::string> inputProblems;  // about the input (addProblem): first in the report
  std::vector<std::string> problems;       // found while digesting and judging
  int maxRankNamed = -1;     // the highest rank any dump names (pg_config, file, p2p peer)
  int namelessConfigs = 0;   // dumps whose pg_config holds a group without a name (torch's gloo)
  bool glooP2pSeen = false;  // a gloo dump recorded a send/recv (torch 2.15's gloo records none)
  bool finished = false;

  int groupOf(const std::string& name) {
    auto [it, added] = groupIndex.try_emplace(name, static_cast<int>(groups.size()));
    if (added) groups.emplace_back().name = name;
    return it->second;
  }

  uint32_t intern(Sig&& s) {
    auto [it, added] = sigIndex.try_emplace(s.hash, static_cast<uint32_t>(sigs.size()));
    if (added) sigs.push_back(std::move(s));
    return it->second;
  }

  void addDump(const RankDump& d);
  void addConfig(const RankDump& d, RankData& r);
  void addEntries(const RankDump& d, RankData& r, const std::vector<int>& trackOfEntry);
  void addStatus(const RankDump& d, RankData& r, const std::unordered_map<std::string, int>& byPgId);
  uint32_t signature(const FrEntry& e, const GroupData& g, int rank);
  void place(Track& t, int64_t seq, uint32_t sig, const std::string& file);
};

namespace {

int trackFor(RankData& r, int group) {
  int t = r.trackOf(group);
  if (t >= 0) return t;
  r.tracks.emplace_back().group = group;
  return static_cast<int>(r.tracks.size()) - 1;
}

}  // namespace

// ---- digesting one dump ----

void HangAnalysis::State::addConfig(const RankDump& d, RankData& r) {
  for (const auto& [key, fg] : d.groups) {
    for (int m : fg.ranks) maxRankNamed = std::max(maxRankNamed, m);
    // torch 2.15's gloo writes one nameless entry holding the ranks of the last group the process
    // built; no entry or pg_status refers to it. Its ranks still say who is in the job.
    if (key.empty()) {
      ++namelessConfigs;
      continue;
    }
    const int g = groupOf(key);
    GroupData& G = groups[g];
    if (G.desc.empty() || G.desc == "undefined") G.desc = fg.desc;
    trackFor(r, g);
    if (!fg.ranksKnown) continue;
    // Every dump of a job lists the world's members (16,384 of them): the list the last dump gave is
    // recognised by a comparison, not sorted and hashed again.
    if (G.lastVote < G.votes.size() && G.votes[G.lastVote].asWritten == fg.ranks) {
      G.votes[G.lastVote].ranks.push_back(r.rank);
      continue;
    }
    std::vector<int> members = fg.ranks;
    if (!std::is_sorted(members.begin(), members.end())) std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    Hasher h;
    for (int m : members) h.add(static_cast<uint64_t>(m));
    auto [it, added] = G.voteIndex.try_emplace(h.h, G.votes.size());
    if (added) G.votes.push_back({std::move(members), {}, fg.ranks});
    G.votes[it->second].ranks.push_back(r.rank);
    G.lastVote = it->second;
  }
}

uint32_t HangAnalysis::State::signature(const FrEntry& e, const GroupData& g, int rank) {
  // The op of most entries is the one before's: its family is looked up once.
  if (e.op != lastOp) {
    lastOp = e.op;
    lastFamily = familyOf(e.op);
  }
  const Family f = lastFamily;
  const std::vector<int>* members = g.votes.empty() ? nullptr : &g.votes.front().members;
  int size = members ? static_cast<int>(members->size()) : 0;
  int index = -1;
  if (members) {
    auto it = std::lower_bound(members->begin(), members->end(), rank);
    if (it != members->end() && *it == rank) index = static_cast<int>(it - members->begin());
  }
  const std::string& op = e.op.empty() ? e.profilingName : e.op;
  const bool selfOk = selfConsistent(f, e, size, index);
  // Sizes each member may legitimately differ in stay out of the signature: all_to_all splits are
  // free; a scatter's input and a gather's output exist on the root only; all_gather's input (uneven
  // lists) and reduce_scatter's output are checked per rank by selfConsistent instead.
  const bool cmpIn = f != Family::kAllToAll && f != Family::kScatter && f != Family::kAllGather;
  const bool cmpOut = f != Family::kAllToAll && f != Family::kGather && f != Family::kReduceScatter;
  Hasher h;
  h.add(std::string_view(op));
  h.add(selfOk ? 1 : 2);
  if (cmpIn) h.add(e.inputSizes);
  if (cmpOut) h.add(e.outputSizes);
  if (f != Family::kScatter) h.add(e.inputDtypes);
  if (f != Family::kGather) h.add(e.outputDtypes);
  if (auto it = sigIndex.find(h.h); it != sigIndex.end()) return it->second;
  Sig s;
  s.hash = h.h;
  s.op = op;
  s.selfOk = selfOk;
  s.in = e.inputSizes;
  s.out = e.outputSizes;
  s.inDtypes = e.inputDtypes;
  s.outDtypes = e.outputDtypes;
  return intern(std::move(s));
}

void HangAnalysis::State::place(Track& t, int64_t seq, uint32_t sig, const std::string& file) {
  if (t.sigs.empty()) t.firstSeq = seq;
  if (seq < t.firstSeq) {
    problems.push_back(fmt::format("{}: collective #{} comes after #{} in the file; it is ignored.", file, seq,
                                   t.firstSeq));
    return;
  }
  const int64_t end = t.firstSeq + static_cast<int64_t>(t.sigs.size());
  // A jump far beyond the buffer's own length is not a window of one ring buffer: keep the newer part.
  if (seq >= end + 4096) {
    t.sigs.clear();
    t.firstSeq = seq;
  }
  const size_t i = static_cast<size_t>(seq - t.firstSeq);
  if (i >= t.sigs.size()) t.sigs.resize(i + 1, kNoSig);
  if (t.sigs[i] == kNoSig) {
    t.sigs[i] = sig;
    return;
  }
  // Several entries with one seq: a coalesced op. Its signature is that of the whole list.
  Sig combined = sigs[t.sigs[i]];
  Hasher h;
  h.add(combined.hash);
  h.add(sigs[sig].hash);
  combined.hash = h.h;
  combined.entries += 1;
  t.sigs[i] = intern(std::move(combined));
}

void HangAnalysis::State::addEntries(const RankDump& d, RankData& r, const std::vector<int>& trackOfEntry) {
  std::vector<int> total(r.tracks.size(), 0), seen(r.tracks.size(), 0);
  for (int t : trackOfEntry) ++total[t];
  std::vector<bool> anyState(r.tracks.size(), false);
  std::vector<int64_t> maxSeq(r.tracks.size(), -1), maxDone(r.tracks.size(), -1), maxStarted(r.tracks.size(), -1);
  // A send/recv names its peer by its rank within the group ("nccl:send 1->2", as torch writes it):
  // the dump's own pg_config lists the group's members in group-rank order, which gives the global
  // rank. The default group's list is the world, so there the two are one.
  std::vector<const std::vector<int>*> membersOf(r.tracks.size(), nullptr);
  for (size_t ti = 0; ti < r.tracks.size(); ++ti) {
    auto it = d.groups.find(groups[r.tracks[ti].group].name);
    if (it != d.groups.end() && it->second.ranksKnown && !it->second.ranks.empty()) membersOf[ti] = &it->second.ranks;
  }
  std::set<std::string> peerOutside;
  auto detail = [&](const FrEntry& e, size_t i, int ti) {
    Detail x = detailOf(e, static_cast<int64_t>(i));
    if (!x.p2p || x.peer < 0 || !membersOf[ti]) return x;
    const auto& members = *membersOf[ti];
    if (static_cast<size_t>(x.peer) < members.size()) {
      x.peer = members[static_cast<size_t>(x.peer)];
    } else {
      if (peerOutside.insert(groups[r.tracks[ti].group].name).second)
        problems.push_back(fmt::format("{}: {} names peer {} of group {}, which has {} members in the dump's "
                                       "pg_config; that peer is unknown.",
                                       d.file, e.profilingName, x.peer, groups[r.tracks[ti].group].name,
                                       members.size()));
      x.peer = -1;
    }
    return x;
  };
  for (size_t i = 0; i < d.entries.size(); ++i) {
    const FrEntry& e = d.entries[i];
    const int ti = trackOfEntry[i];
    Track& t = r.tracks[ti];
    const bool p2p = isP2p(e);
    if (!p2p && e.collectiveSeqId && *e.collectiveSeqId >= 0) {
      const int64_t seq = *e.collectiveSeqId;
      place(t, seq, signature(e, groups[t.group], r.rank), d.file);
      maxSeq[ti] = std::max(maxSeq[ti], seq);
      if (!e.state.empty()) anyState[ti] = true;
      const bool completed = e.state == "completed"sv;
      if (completed) maxDone[ti] = std::max(maxDone[ti], seq);
      if (completed || e.state == "started"sv) maxStarted[ti] = std::max(maxStarted[ti], seq);
    }
    if (r.backend.empty()) r.backend = e.backend;
    if (e.p2pPeer && !membersOf[ti]) maxRankNamed = std::max(maxRankNamed, *e.p2pPeer);
    if (p2p && e.backend == "gloo"sv) glooP2pSeen = true;
    // pg_status is the authority on a collective (torch's gloo leaves every entry "scheduled"); the
    // entry's own state and retired flag otherwise.
    const bool pending = !p2p && e.collectiveSeqId && t.statusFromDump
                             ? *e.collectiveSeqId > t.done
                             : !e.state.empty() && e.state != "completed"sv && !e.retired.value_or(false);
    const bool inTail = seen[ti]++ >= total[ti] - opt.timelineEntries;
    if (inTail) t.tail.push_back(detail(e, i, ti));
    if (pending && static_cast<int>(t.pending.size()) < opt.pendingEntries) t.pending.push_back(detail(e, i, ti));
    t.lastOrder = static_cast<int64_t>(i);
  }
  for (size_t ti = 0; ti < r.tracks.size(); ++ti) {
    Track& t = r.tracks[ti];
    if (t.statusFromDump) {
      if (maxSeq[ti] > t.enq)
        problems.push_back(fmt::format("{}: pg_status of group {} says last enqueued #{}, but its entries reach #{}; "
                                       "the entries are taken.",
                                       d.file, groups[t.group].name, t.enq, maxSeq[ti]));
      t.enq = std::max(t.enq, maxSeq[ti]);
    } else if (anyState[ti]) {  // no pg_status (older dumps): what the entries' states say
      t.statusKnown = true;
      t.enq = maxSeq[ti];
      t.done = maxDone[ti];
      t.started = maxStarted[ti];
    }
  }
  if (!d.entries.empty()) {
    r.lastGroup = r.tracks[trackOfEntry.back()].group;
    r.last = detail(d.entries.back(), d.entries.size() - 1, trackOfEntry.back());
  }
}

void HangAnalysis::State::addStatus(const RankDump& d, RankData& r,
                                    const std::unordered_map<std::string, int>& byPgId) {
  for (const auto& [pgId, st] : d.pgStatus) {
    int g = -1;
    if (auto it = byPgId.find(pgId); it != byPgId.end()) {
      g = it->second;
    } else if (auto gi = groupIndex.find(pgId); gi != groupIndex.end()) {
      g = gi->second;  // torch numbers pg_id and the group's name alike unless a name was given
    } else {
      problems.push_back(fmt::format("{}: pg_status names pg_id '{}', which no entry or pg_config of the dump maps "
                                     "to a group; it is ignored.",
                                     d.file, pgId));
      continue;
    }
    Track& t = r.tracks[trackFor(r, g)];
    t.pgId = pgId;
    t.statusKnown = t.statusFromDump = st.lastEnqueued.has_value() || st.lastCompleted.has_value();
    t.enq = st.lastEnqueued.value_or(-1);
    t.started = st.lastStarted.value_or(-1);
    t.done = st.lastCompleted.value_or(-1);
  }
}

void HangAnalysis::State::addDump(const RankDump& d) {
  if (rankIndex.count(d.rank)) {
    problems.push_back(fmt::format("{}: a second dump of rank {} was given; only the first is used.", d.file, d.rank));
    return;
  }
  rankIndex[d.rank] = static_cast<int>(ranks.size());
  maxRankNamed = std::max(maxRankNamed, d.rank);
  RankData& r = ranks.emplace_back();
  r.rank = d.rank;
  r.file = d.file;
  addConfig(d, r);
  // Each entry's group (by name, else by pg_id), and which pg_id each group has in this dump.
  std::unordered_map<std::string, int> byPgId;
  std::vector<int> trackOfEntry(d.entries.size());
  const std::string* lastName = nullptr;
  int lastTrack = -1;
  for (size_t i = 0; i < d.entries.size(); ++i) {
    const FrEntry& e = d.entries[i];
    const std::string& name = e.pgName.empty() ? e.pgId : e.pgName;
    if (!lastName || *lastName != name) {
      const int g = groupOf(name);
      if (groups[g].desc.empty()) groups[g].desc = e.pgDesc;
      lastTrack = trackFor(r, g);
      lastName = &name;
      if (!e.pgId.empty()) byPgId.try_emplace(e.pgId, g);
    }
    trackOfEntry[i] = lastTrack;
  }
  for (auto& [pgId, g] : byPgId) r.tracks[trackFor(r, g)].pgId = pgId;
  addStatus(d, r, byPgId);
  addEntries(d, r, trackOfEntry);
  const int ri = static_cast<int>(ranks.size()) - 1;
  for (size_t t = 0; t < r.tracks.size(); ++t) groups[r.tracks[t].group].tracks.emplace_back(ri, static_cast<int>(t));
}

// ---- the judgement ----

namespace {

struct Blocker {
  int rank = -1;
  FaultKind kind = FaultKind::kNeverEntered;
  bool terminal = true;      // false: it is stuck in another record (blocked_by_other_group)
  uint32_t sig = kNoSig;     // mismatch: its signature
  int cycleRecord = -1;      // set when named to break a cycle: the record it waits in instead
  bool weak = false;         // a minority that entered the op may be the odd ones: named only by a cycle vote
  double lateS = 0;          // entered this long after its peers' median ...
  int64_t timeoutMs = 0;     // ... past this timeout of the op
};

// One stuck place: a group's first op not completed by all (or its first mismatch), or a rank's
// oldest pending p2p op.
struct Record {
  int group = -1;
  bool p2p = false;
  int64_t seq = -1;
  std::string op;
  int owner = -1;                // p2p: the waiting rank (rank data index)
  bool ownerSends = false;
  std::vector<Blocker> blockers;
  std::vector<int> entered;      // ranks inside the op (collective)
  std::vector<int> others;       // mismatch: the majority; completion lag: those that completed
  std::vector<int> missing;      // members without a dump
  std::vector<int> failedDone;   // show the op completed, but it cannot have: it ended with an error
  uint32_t majoritySig = kNoSig;
  std::string undecided;         // the question the dumps leave open here
  std::vector<int> undecidedRanks;
  bool idle = false;             // nothing pending; seq is the last op every dumped member completed
  std::vector<int> waiters;      // ranks whose oldest pending op is here (not blockers)
  std::vector<int> next;         // records its blocked blockers are stuck in
  std::vector<int> upstream;     // records with a blocker stuck here
};

Blocker hold(int rank, FaultKind kind, uint32_t sig = kNoSig) {
  Blocker b;
  b.rank = rank;
  b.kind = kind;
  b.sig = sig;
  return b;
}

std::string sinceText(std::optional<int64_t> ns) {
  if (!ns) return "";
  std::string iso = report::hangIsoTime(*ns);
  return iso.size() >= 19 ? fmt::format(" since {} UTC", iso.substr(11, 8)) : "";
}

std::string ranksText(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", formatRanges(ranks));
}

// "rank 3 waits", "ranks 0-2 wait"
std::string ranksDo(const std::vector<int>& ranks, const char* verb) {
  return fmt::format("{} {}{}", ranksText(ranks), verb, ranks.size() == 1 ? "s" : "");
}

std::string sizesText(const std::vector<std::vector<int64_t>>& s) { return fmt::format("{}", s); }

bool namesGlobalRank(const LogFact& f) {
  return f.rank && f.rankFrom != "group_rank" && f.rankFrom != "local_rank";
}

std::string sourceText(const Source& s) { return s.line > 0 ? fmt::format("{}:{}", s.file, s.line) : s.file; }

class Judge {
 public:
  Judge(HangAnalysis::State& st, const ExternalEvidence& ev) : st_(st), ev_(ev) {}
  HangReport run();

 private:
  HangAnalysis::State& st_;
  const ExternalEvidence& ev_;
  HangReport rep_;
  std::vector<Record> records_;
  std::vector<int> groupRecord_;      // per group: its record, -1 none
  std::vector<int> groupSummary_;     // per group: its index in rep_.groups
  std::vector<int> order_;            // groups in the report's order
  std::vector<int> p2pRecord_;        // per rank data index: the record of its oldest pending p2p op
  std::vector<int> blockingPoint_;    // per rank data index: the record of its oldest pending op
  std::vector<const Detail*> oldest_; // per rank data index: its oldest pending op
  std::vector<int> oldestGroup_;      // ... and that op's group
  std::vector<char> oldestIsFailed_;  // ... taken from an op that ended with an error (adoptFailed)
  std::set<int> culpritRanks_;
  std::unordered_map<int, const RasRank*> ras_;
  std::unordered_multimap<int, const LogFact*> logs_;

  // helpers
  const RankData* dumpOf(int rank) const {
    auto it = st_.rankIndex.find(rank);
    return it == st_.rankIndex.end() ? nullptr : &st_.ranks[it->second];
  }
  const Track* trackOf(int rank, int group) const {
    const RankData* r = dumpOf(rank);
    if (!r) return nullptr;
    int t = r->trackOf(group);
    return t < 0 ? nullptr : &r->tracks[t];
  }
  std::string host(int rank) const {
    auto it = ev_.rankHost.find(rank);
    return it == ev_.rankHost.end() ? "" : it->second;
  }
  std::string who(int rank) const {
    std::string h = host(rank);
    return h.empty() ? fmt::format("rank {}", rank) : fmt::format("rank {} on {}", rank, h);
  }
  HangGroupRef ref(int g) const { return {st_.groups[g].name, st_.groups[g].desc}; }
  std::string groupText(int g) const {
    const GroupData& G = st_.groups[g];
    return G.desc.empty() || G.desc == "undefined" ? fmt::format("group {}", G.name)
                                                   : fmt::format("group {} ({})", G.name, G.desc);
  }
  std::string opText(const Record& r) const {
    return r.p2p ? fmt::format("{} #{} (p2p)", r.op, r.seq) : fmt::format("{} #{}", r.op, r.seq);
  }
  std::string statusText(const Track& t) const {
    if (!t.statusFromDump)
      return fmt::format("from its entries' states: last enqueued #{}, last completed #{}", t.enq, t.done);
    return fmt::format("pg_status '{}': last_enqueued_collective {}, last_started_collective {}, "
                       "last_completed_collective {}",
                       t.pgId, t.enq, t.started, t.done);
  }
  std::optional<int64_t> earliest(const std::vector<int>& ranks) const;

  // steps
  void settleGroups();
  void analyseGroup(int g);
  bool mismatchRecord(int g, Record& rec, const std::vector<int>& dumped);
  bool lateRecord(int g, Record& rec, const std::vector<int>& dumped, int64_t upTo);
  void adoptFailed();
  void progressRecord(int g, Record& rec, const std::vector<int>& known, int64_t k);
  void p2pRecords();
  void blockingPoints();
  void resolveChains();
  bool breakCycle(const std::vector<int>& scc);
  void tieBreaks();
  void culprits();
  void addCulprit(const Record& rec, const Blocker& b);
  FaultKind finalKind(const Record& rec, const Blocker& b) const;
  std::optional<std::string> blindSpot(const Record& rec, const Blocker& b) const;
  std::string summaryOf(const Record& rec, const Blocker& b) const;
  std::vector<HangEvidence> dumpEvidence(const Record& rec, const Blocker& b) const;
  void outsideEvidence(const Record& rec, int rank, std::vector<HangEvidence>& out) const;
  std::string peerText(const std::string& addr) const;
  std::string addrText(const std::string& addr) const;
  std::string factClaim(const LogFact& f, int r) const;
  const LogFact* ownException(int rank) const;
  std::string raisedText(int rank) const;
  void contradictions();
  void noDumps();
  std::vector<int> roots(int R, std::vector<std::optional<std::vector<int>>>& memo) const;
  void waiting();
  void timelines();
  void groupTimelines();
  void verdict();
};

}  // namespace

namespace {

// The earliest time its ranks entered their oldest pending op.
std::optional<int64_t> Judge::earliest(const std::vector<int>& ranks) const {
  std::optional<int64_t> t;
  for (int r : ranks) {
    auto it = st_.rankIndex.find(r);
    if (it == st_.rankIndex.end() || !oldest_[it->second] || !oldest_[it->second]->timeNs) continue;
    int64_t v = *oldest_[it->second]->timeNs;
    if (!t || v < *t) t = v;
  }
  return t;
}

// Members of each group: the membership most dumps give; a disagreement is a problem sentence.
void Judge::settleGroups() {
  std::set<int> world;
  for (auto& G : st_.groups) {
    if (!G.votes.empty()) {
      auto best = std::max_element(G.votes.begin(), G.votes.end(),
                                   [](const Vote& a, const Vote& b) { return a.ranks.size() < b.ranks.size(); });
      G.members = best->members;
      G.membersKnown = true;
      for (const auto& v : G.votes) {
        if (&v == &*best) continue;
        st_.problems.push_back(fmt::format(
            "The dumps disagree on the members of group {}: {} [{}], {} [{}]; [{}] is used.", G.name,
            ranksDo(best->ranks, "list"), formatRanges(best->members), ranksDo(v.ranks, "list"), formatRanges(v.members),
            formatRanges(best->members)));
      }
    } else if (G.desc == "default_pg") {  // no pg_config names it: the default group holds every rank
      for (int r = 0; r <= st_.maxRankNamed; ++r) G.members.push_back(r);
    } else {  // ... another group: the ranks whose dumps carry it
      for (auto [ri, ti] : G.tracks) G.members.push_back(st_.ranks[ri].rank);
      std::sort(G.members.begin(), G.members.end());
    }
    world.insert(G.members.begin(), G.members.end());
  }
  for (const auto& r : st_.ranks) world.insert(r.rank);
  rep_.worldSize = static_cast<int>(world.size());
  if (st_.namelessConfigs > 0)
    st_.problems.push_back(fmt::format(
        "{} dumps carry a pg_config whose only group has no name (torch's gloo backend writes it so); each group's "
        "members are taken from the entries that name it, and the default group's as ranks 0-{}, every rank named.",
        st_.namelessConfigs, st_.maxRankNamed));
}

void Judge::analyseGroup(int g) {
  const GroupData& G = st_.groups[g];
  report::HangGroup sum{ref(g), G.members, 0, {}, {}, {}, {}};
  std::vector<int> dumped, known, silent;
  std::unordered_set<int> withTrack;
  int64_t maxEnq = -1, minDone = INT64_MAX;
  for (auto [ri, ti] : G.tracks) {
    const RankData& r = st_.ranks[ri];
    if (G.membersKnown && !std::binary_search(G.members.begin(), G.members.end(), r.rank)) continue;
    const Track& t = r.tracks[ti];
    withTrack.insert(r.rank);
    dumped.push_back(r.rank);
    if (!t.sigs.empty()) {
      const int64_t last = t.firstSeq + static_cast<int64_t>(t.sigs.size()) - 1;
      sum.minSeq = std::min(sum.minSeq.value_or(t.firstSeq), t.firstSeq);
      sum.maxSeq = std::max(sum.maxSeq.value_or(last), last);
    }
    if (!t.statusKnown) {
      silent.push_back(r.rank);
      continue;
    }
    known.push_back(r.rank);
    maxEnq = std::max(maxEnq, t.enq);
    minDone = std::min(minDone, t.done);
  }
  std::vector<int> missing;
  for (int m : G.members) {
    if (!dumpOf(m)) missing.push_back(m);
    else if (!withTrack.count(m)) silent.push_back(m);
  }
  sum.dumps = static_cast<int>(dumped.size());
  if (!silent.empty())
    st_.problems.push_back(fmt::format("The dumps of {} say nothing of {}'s progress (no pg_status, no entry with a "
                                       "state); they are left out of its analysis.",
                                       ranksText(silent), groupText(g)));
  const bool stuck = !known.empty() && maxEnq > minDone;
  const int64_t k = stuck ? minDone + 1 : INT64_MAX;
  if (!known.empty() && minDone >= 0) sum.lastCompletedByAll = minDone;
  // The earliest fault decides: a mismatch, a late arrival, the first op not completed by all.
  Record mis, late, rec;
  mis.group = late.group = rec.group = g;
  mis.missing = late.missing = rec.missing = missing;
  const bool hasMis = mismatchRecord(g, mis, dumped) && mis.seq <= k;
  const bool hasLate = lateRecord(g, late, dumped, k) && (!hasMis || late.seq < mis.seq);
  bool made = true;
  if (hasLate) {
    rec = std::move(late);
  } else if (hasMis) {
    rec = std::move(mis);
    if (rec.seq == k && rec.undecided.empty()) {  // at the hang's own seq, laggards hold it too
      std::vector<int> lagged;
      for (int r : known)
        if (trackOf(r, g)->enq < k) lagged.push_back(r);
      if (2 * lagged.size() <= known.size())
        for (int r : lagged) rec.blockers.push_back(hold(r, FaultKind::kNeverEntered));
    }
  } else if (stuck) {
    rec.seq = k;
    progressRecord(g, rec, known, k);
  } else if (!missing.empty() && !known.empty()) {  // idle, but someone is missing
    rec.seq = minDone;
    rec.undecided = fmt::format("{} left no dump; {} last saw {} at #{} of {} and show no pending op there",
                                ranksText(missing), missing.size() == 1 ? "its peers" : "their peers",
                                missing.size() == 1 ? "it" : "them", minDone, groupText(g));
    rec.undecidedRanks = missing;
    rec.idle = true;
    made = false;
  } else {
    return rep_.groups.push_back(std::move(sum));
  }
  if (made) sum.firstDivergentSeq = rec.seq;
  rep_.groups.push_back(std::move(sum));
  groupRecord_[g] = static_cast<int>(records_.size());
  records_.push_back(std::move(rec));
}

// The lowest seq (up to `upTo`) that a minority of members entered more than the op's timeout after
// the others: the others had given up waiting for them (a host-side stall that ended). From the
// entries kept in full, the last timelineEntries per rank, which is where a hang is.
bool Judge::lateRecord(int g, Record& rec, const std::vector<int>& dumped, int64_t upTo) {
  std::map<int64_t, std::vector<std::tuple<int64_t, int, int64_t>>> bySeq;  // seq -> (time, rank, timeout ms)
  for (int r : dumped)
    for (const auto& d : trackOf(r, g)->tail)
      if (!d.p2p && d.seq >= 0 && d.seq <= upTo && d.timeNs) bySeq[d.seq].emplace_back(*d.timeNs, r, d.timeoutMs.value_or(0));
  for (auto& [seq, v] : bySeq) {
    if (v.size() < 3) continue;  // "late" needs a majority that was on time
    rec.blockers.clear();
    rec.others.clear();
    std::sort(v.begin(), v.end());
    const int64_t median = std::get<0>(v[(v.size() - 1) / 2]);
    for (const auto& [t, r, timeout] : v) {
      if (timeout > 0 && t - median > timeout * 1'000'000) {
        Blocker b = hold(r, FaultKind::kStalledHost);
        b.lateS = static_cast<double>(t - median) / 1e9;
        b.timeoutMs = timeout;
        rec.blockers.push_back(b);
      } else {
        rec.others.push_back(r);
      }
    }
    if (rec.blockers.empty() || 2 * rec.blockers.size() >= v.size()) continue;
    rec.seq = seq;
    const Track* t = trackOf(rec.others.front(), g);
    const uint32_t sig = t->sigs.empty() || seq < t->firstSeq ? kNoSig : t->sigs[seq - t->firstSeq];
    rec.op = sig == kNoSig ? "collective" : st_.sigs[sig].op;
    std::sort(rec.others.begin(), rec.others.end());
    rec.entered = rec.others;
    return true;
  }
  rec.blockers.clear();
  rec.others.clear();
  return false;
}

// The lowest collective seq where the dumped members' entries disagree; false when none does.
bool Judge::mismatchRecord(int g, Record& rec, const std::vector<int>& dumped) {
  std::vector<const Track*> ts;
  int64_t hi = -1, lo = INT64_MAX;
  size_t longest = 0;
  for (int r : dumped) {
    const Track* t = trackOf(r, g);
    if (!t || t->sigs.empty()) continue;
    ts.push_back(t);
    hi = std::max(hi, t->firstSeq + static_cast<int64_t>(t->sigs.size()) - 1);
    lo = std::min(lo, t->firstSeq);
    longest = std::max(longest, t->sigs.size());
  }
  if (ts.size() < 2) return false;
  lo = std::max(lo, hi - 2 * static_cast<int64_t>(longest));  // no older window can be compared anyway
  // Per seq: the first signature seen and whether another differs. One pass: O(ranks x entries).
  std::vector<uint32_t> first(static_cast<size_t>(hi - lo + 1), kNoSig);
  std::vector<char> differs(first.size(), 0);
  for (const Track* t : ts) {
    for (size_t i = 0; i < t->sigs.size(); ++i) {
      const int64_t seq = t->firstSeq + static_cast<int64_t>(i);
      if (seq < lo || t->sigs[i] == kNoSig) continue;
      uint32_t& f = first[seq - lo];
      if (f == kNoSig) f = t->sigs[i];
      else if (f != t->sigs[i]) differs[seq - lo] = 1;
    }
  }
  auto at = std::find(differs.begin(), differs.end(), 1);
  if (at == differs.end()) return false;
  const int64_t d = lo + (at - differs.begin());
  std::map<uint32_t, std::vector<int>> sides;
  size_t present = 0;
  for (int r : dumped) {
    const Track* t = trackOf(r, g);
    if (!t || d < t->firstSeq || d >= t->firstSeq + static_cast<int64_t>(t->sigs.size())) continue;
    if (uint32_t s = t->sigs[d - t->firstSeq]; s != kNoSig) sides[s].push_back(r), ++present;
  }
  auto major = std::max_element(sides.begin(), sides.end(),
                                [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  rec.seq = d;
  rec.op = st_.sigs[major->first].op;
  if (2 * major->second.size() <= present) {
    std::vector<std::string> parts;
    for (const auto& [s, rs] : sides) {
      const Sig& sig = st_.sigs[s];
      parts.push_back(fmt::format("{} have {} {} {} {}", ranksText(rs), sig.op, sizesText(sig.in),
                                  sizesText(sig.out), fmt::join(sig.inDtypes, ",")));
      rec.undecidedRanks.insert(rec.undecidedRanks.end(), rs.begin(), rs.end());
    }
    rec.undecided = fmt::format("at #{} of {} the members disagree and no side is a majority: {}", d, groupText(g),
                                fmt::join(parts, "; "));
    return true;
  }
  rec.majoritySig = major->first;
  rec.others = major->second;
  const Sig& m = st_.sigs[major->first];
  for (const auto& [s, rs] : sides) {
    if (s == major->first) continue;
    const Sig& o = st_.sigs[s];
    FaultKind kind = o.op != m.op                                          ? FaultKind::kMismatchedOp
                     : (o.in != m.in || o.out != m.out || o.selfOk != m.selfOk) ? FaultKind::kMismatchedSize
                                                                                  : FaultKind::kMismatchedDtype;
    for (int r : rs) rec.blockers.push_back(hold(r, kind, s));
  }
  return true;
}

// The first op not completed by every dumped member: who holds it (see the comment at the top).
void Judge::progressRecord(int g, Record& rec, const std::vector<int>& known, int64_t k) {
  std::vector<int> lagged, entered, done, notStarted;
  bool anyStarted = false, wentOn = false;
  // A rank whose last op, in another group, came after its last op here went on from this group.
  auto laterElsewhere = [&](int r) {
    const RankData* d = dumpOf(r);
    const Track* t = trackOf(r, g);
    return d && d->last && t && d->lastGroup != g && d->last->order > t->lastOrder;
  };
  for (int r : known) {
    const Track& t = *trackOf(r, g);
    if (t.enq < k) lagged.push_back(r);
    else if (t.done >= k) done.push_back(r), wentOn = wentOn || t.enq > k || laterElsewhere(r);
    else entered.push_back(r);
    if (t.started >= k) anyStarted = true;
    else if (t.enq >= k) notStarted.push_back(r);
  }
  // The op's name, from a rank that holds it in its buffer.
  for (const auto* side : {&entered, &done}) {
    for (int r : *side) {
      const Track* t = trackOf(r, g);
      const int64_t i = k - t->firstSeq;
      if (rec.op.empty() && i >= 0 && i < static_cast<int64_t>(t->sigs.size()) && t->sigs[i] != kNoSig)
        rec.op = st_.sigs[t->sigs[i]].op;
    }
  }
  if (rec.op.empty()) rec.op = "collective";
  // A completion nobody went on from, or one that a member never entered, cannot be a success: the op
  // ended with an error there (gloo counts a failed collective as completed). Those ranks waited in it.
  if (!done.empty() && (!wentOn || !lagged.empty())) {
    rec.failedDone = done;
    entered.insert(entered.end(), done.begin(), done.end());
    std::sort(entered.begin(), entered.end());
    done.clear();
  }
  const size_t n = known.size();
  rec.entered = entered;
  rec.others = done;
  const std::string op = fmt::format("{} of {}", opText(rec), groupText(g));
  auto holdAll = [&](const std::vector<int>& rs, FaultKind kind) {
    for (int r : rs) rec.blockers.push_back(hold(r, kind));
  };
  // Members without a dump that one host explains (one rank, or all on one host): a dead or stopped
  // process, the likeliest holder of an op its dumped peers all wait in.
  auto missingOnOneHost = [&] {
    if (rec.missing.empty()) return false;
    std::set<std::string> hosts;
    for (int m : rec.missing) hosts.insert(host(m));
    return rec.missing.size() == 1 || (hosts.size() == 1 && !hosts.begin()->empty());
  };
  if (!lagged.empty()) {
    if (2 * lagged.size() <= n) return holdAll(lagged, FaultKind::kNeverEntered);  // kind settled in finalKind
    // If the laggards wait in another op that the few never entered, a cycle vote settles it.
    holdAll(lagged, FaultKind::kNeverEntered);
    for (auto& b : rec.blockers) b.weak = true;
    rec.undecided = fmt::format("{} never enqueued {} that {} entered; with most members outside it, the dumps cannot "
                                "tell whether {} issued a collective the others never call or the others stopped together",
                                ranksText(lagged), op, ranksText(entered), formatRanges(entered));
    rec.undecidedRanks = lagged;
  } else if (!done.empty()) {
    // Some completed it and went on, the rest wait in it, and a member left no dump: it took part (the
    // op could complete somewhere) and stopped inside it, as a process killed or frozen mid-ring does.
    if (missingOnOneHost()) return holdAll(rec.missing, FaultKind::kNoDump);
    if (2 * entered.size() <= n) return holdAll(entered, FaultKind::kStalledDevice);
    rec.undecided = fmt::format("{} completed {} but {} did not, and they are most of the group; the dumps cannot say "
                                "whose device or link holds it",
                                ranksText(done), op, ranksText(entered));
    rec.undecidedRanks = entered;
  } else if (anyStarted && !notStarted.empty() && 2 * notStarted.size() <= n) {
    holdAll(notStarted, FaultKind::kStalledDevice);
  } else if (!rec.missing.empty()) {
    if (missingOnOneHost()) return holdAll(rec.missing, FaultKind::kNoDump);
    rec.undecided = fmt::format("{} left no dump; their peers last saw them at #{} of {} and wait for them in {}: any "
                                "of them could hold it",
                                ranksText(rec.missing), k - 1, groupText(g), opText(rec));
    rec.undecidedRanks = rec.missing;
  } else {
    rec.undecided = fmt::format("all {} dumped members of {} entered {} and none completed it; nothing in the dumps "
                                "says whose device or network holds it (NCCL RAS or the ranks' NCCL WARN lines can: "
                                "pass --ras / --logs)",
                                n, groupText(g), opText(rec));
    rec.undecidedRanks = entered;
  }
}

// A rank with nothing pending whose last op of a group ended with an error (failedDone) waited there.
void Judge::adoptFailed() {
  for (const auto& rec : records_) {
    for (int r : rec.failedDone) {
      const int ri = st_.rankIndex.at(r);
      if (oldest_[ri] && !oldestIsFailed_[ri]) continue;  // it is really pending somewhere
      const Track* t = trackOf(r, rec.group);
      for (const auto& d : t->tail) {
        if (d.p2p || d.seq != rec.seq) continue;
        if (oldest_[ri] && d.order < oldest_[ri]->order) continue;  // the latest failure is where it stopped
        oldest_[ri] = &d;
        oldestGroup_[ri] = rec.group;
        oldestIsFailed_[ri] = 1;
      }
    }
  }
}

// A rank's oldest pending p2p op is a record of its own: its peer either has the matching op pending
// too (both wait: device or network), left no dump, or has nothing matching pending (it owes it).
void Judge::p2pRecords() {
  std::map<std::tuple<int, int, bool, int>, int> open;  // (rank, peer, sends, group) -> pending count
  for (const auto& r : st_.ranks)
    for (const auto& t : r.tracks)
      for (const auto& d : t.pending)
        if (d.p2p && d.peer >= 0) ++open[{r.rank, d.peer, d.send, t.group}];
  std::map<std::tuple<int, int, int>, int> pairRecord;  // matched pairs share one record
  for (size_t ri = 0; ri < st_.ranks.size(); ++ri) {
    const Detail* d = oldest_[ri];
    if (!d || !d->p2p || d->peer < 0) continue;
    const int r = st_.ranks[ri].rank, p = d->peer, g = oldestGroup_[ri];
    const bool matched = open.count({p, r, !d->send, g}) > 0;
    if (matched) {
      auto key = std::make_tuple(std::min(r, p), std::max(r, p), g);
      if (auto it = pairRecord.find(key); it != pairRecord.end()) {
        p2pRecord_[ri] = it->second;
        continue;
      }
    }
    Record rec;
    rec.group = g;
    rec.p2p = true;
    rec.seq = d->seq;
    rec.op = d->op;
    rec.owner = static_cast<int>(ri);
    rec.ownerSends = d->send;
    rec.entered = {r};
    if (matched) {
      rec.undecided = fmt::format("rank {}'s {} to rank {} and rank {}'s matching {} are both pending in {}; the "
                                  "dumps cannot say whose device or link holds them",
                                  r, opText(rec), p, p, d->send ? "recv" : "send", groupText(g));
      rec.undecidedRanks = {std::min(r, p), std::max(r, p)};
      pairRecord[{std::min(r, p), std::max(r, p), g}] = static_cast<int>(records_.size());
    } else if (!dumpOf(p)) {
      rec.missing = {p};
      rec.blockers.push_back(hold(p, FaultKind::kNoDump));
    } else {
      rec.blockers.push_back(hold(p, FaultKind::kP2pUnmatched));
    }
    p2pRecord_[ri] = static_cast<int>(records_.size());
    records_.push_back(std::move(rec));
  }
}

// Each rank is stuck in at most one place: the record of its oldest pending op.
void Judge::blockingPoints() {
  blockingPoint_.assign(st_.ranks.size(), -1);
  for (size_t ri = 0; ri < st_.ranks.size(); ++ri) {
    const Detail* d = oldest_[ri];
    if (!d) continue;
    blockingPoint_[ri] = d->p2p ? p2pRecord_[ri] : groupRecord_[oldestGroup_[ri]];
    const int bp = blockingPoint_[ri];
    if (bp < 0) continue;
    const int rank = st_.ranks[ri].rank;
    const auto& bs = records_[bp].blockers;
    if (std::none_of(bs.begin(), bs.end(), [&](const Blocker& b) { return b.rank == rank; }))
      records_[bp].waiters.push_back(rank);
  }
}

// Blockers stuck elsewhere point the search at the record they are stuck in; cycles are broken (or
// left as questions) until the graph of records has none.
void Judge::resolveChains() {
  for (size_t R = 0; R < records_.size(); ++R) {
    for (auto& b : records_[R].blockers) {
      if (b.kind != FaultKind::kNeverEntered && b.kind != FaultKind::kStalledDevice &&
          b.kind != FaultKind::kP2pUnmatched)
        continue;  // a mismatch is a fault wherever the rank is now; a rank without a dump is nowhere
      const int bp = blockingPoint_[st_.rankIndex.at(b.rank)];
      if (bp < 0 || bp == static_cast<int>(R)) continue;
      b.terminal = false;
      records_[R].next.push_back(bp);
      records_[bp].upstream.push_back(static_cast<int>(R));
    }
  }
  // Find a cycle with an iterative DFS, break it, repeat: each round removes at least one edge.
  for (;;) {
    std::vector<int> color(records_.size(), 0), cycle;
    std::vector<std::pair<int, size_t>> stack;
    for (size_t s = 0; s < records_.size() && cycle.empty(); ++s) {
      if (color[s]) continue;
      stack.push_back({static_cast<int>(s), 0});
      color[s] = 1;
      while (!stack.empty() && cycle.empty()) {
        auto& [v, i] = stack.back();
        if (i == records_[v].next.size()) {
          color[v] = 2;
          stack.pop_back();
          continue;
        }
        const int w = records_[v].next[i++];
        if (color[w] == 1) {
          auto from = std::find_if(stack.begin(), stack.end(), [&](const auto& e) { return e.first == w; });
          for (auto it = from; it != stack.end(); ++it) cycle.push_back(it->first);
        } else if (color[w] == 0) {
          color[w] = 1;
          stack.push_back({w, 0});
        }
      }
      stack.clear();
    }
    if (cycle.empty() || !breakCycle(cycle)) return;
  }
}

// Records that wait on each other in a ring: ranks called the ring's ops in different orders. Only
// ranks that belong to every group of the ring have both ops in their program, so only they vote:
// the op most of them wait in is the order the program meant, and its blockers (stuck in the ring)
// are named. Members of one group only say nothing about the order; a tie is a question.
bool Judge::breakCycle(const std::vector<int>& cycle) {
  auto inCycle = [&](int R) { return std::find(cycle.begin(), cycle.end(), R) != cycle.end(); };
  std::vector<int> both = st_.groups[records_[cycle.front()].group].members;
  for (int R : cycle) {
    const auto& m = st_.groups[records_[R].group].members;
    std::vector<int> next;
    std::set_intersection(both.begin(), both.end(), m.begin(), m.end(), std::back_inserter(next));
    both = std::move(next);
  }
  std::map<int, std::vector<int>> votes;  // record -> the voters waiting in it
  for (int r : both) {
    auto it = st_.rankIndex.find(r);
    if (it != st_.rankIndex.end() && inCycle(blockingPoint_[it->second])) votes[blockingPoint_[it->second]].push_back(r);
  }
  int best = -1;
  size_t top = 0, voters = 0;
  for (const auto& [R, v] : votes) voters += v.size();
  for (const auto& [R, v] : votes) {
    if (v.size() > top) best = R, top = v.size();
    else if (v.size() == top) best = -1;
  }
  auto dropEdges = [&](Record& rec, bool name) {
    for (auto& b : rec.blockers) {
      if (b.terminal || b.kind == FaultKind::kNoDump) continue;
      const int bp = blockingPoint_[st_.rankIndex.at(b.rank)];
      if (!inCycle(bp)) continue;
      std::erase(rec.next, bp);
      if (name) b.terminal = true, b.cycleRecord = bp, b.kind = FaultKind::kNeverEntered;
    }
  };
  if (best >= 0 && 2 * top > voters) {
    dropEdges(records_[best], true);
    return true;
  }
  std::vector<std::string> parts;
  std::vector<int> ranks;
  for (int R : cycle) {
    Record& rec = records_[R];
    const auto& in = votes[R].empty() ? rec.entered : votes[R];
    parts.push_back(fmt::format("{} in {} of {}", ranksText(in), opText(rec), groupText(rec.group)));
    for (const auto& b : rec.blockers) ranks.push_back(b.rank);
  }
  const std::string why = fmt::format("ranks wait for each other: {}; {} of these groups split evenly between the "
                                      "ops, so the dumps cannot tell which order the program meant (`py-spy dump` of "
                                      "these ranks shows the two call sites)",
                                      fmt::join(parts, ", "), both.empty() ? std::string("no rank in all")
                                                                          : "the members " + formatRanges(both));
  for (int R : cycle) {
    dropEdges(records_[R], false);
    records_[R].undecided = why;
    records_[R].undecidedRanks = ranks;
  }
  return true;
}

// A question outside evidence can settle: exactly one of its candidates reported dead or missing by
// RAS, or else exactly one whose log shows an exception of its own (not one a hang raises on the ranks
// that wait): it failed in its own code, and the others waited for it.
void Judge::tieBreaks() {
  for (auto& rec : records_) {
    if (rec.undecided.empty() || !rec.blockers.empty()) continue;
    std::vector<int> named;
    for (int r : rec.undecidedRanks) {
      auto it = ras_.find(r);
      if (it != ras_.end() && (it->second->state == "dead" || it->second->state == "missing")) named.push_back(r);
    }
    bool raised = false;
    if (named.size() != 1) {
      named.clear();
      for (int r : rec.undecidedRanks)
        if (ownException(r)) named.push_back(r);
      raised = true;
    }
    if (named.size() != 1) continue;
    const bool dumped = dumpOf(named[0]) != nullptr;
    const FaultKind kind = !dumped ? FaultKind::kNoDump : raised ? FaultKind::kStalledHost : FaultKind::kStalledDevice;
    rec.blockers.push_back(hold(named[0], kind));
    rec.undecided.clear();
  }
}

std::string Judge::summaryOf(const Record& rec, const Blocker& b) const {
  const std::string op = fmt::format("{} of {}", opText(rec), groupText(rec.group));
  const std::string wait = rec.waiters.empty()
                               ? ""
                               : fmt::format("; {} in it{}", ranksDo(rec.waiters, "wait"), sinceText(earliest(rec.waiters)));
  const Track* t = trackOf(b.rank, rec.group);
  const RankData* r = dumpOf(b.rank);
  switch (b.kind) {
    case FaultKind::kNeverEntered: {
      std::string then;
      if (b.cycleRecord >= 0) {
        const Record& o = records_[b.cycleRecord];
        then = fmt::format("; it waits in {} of {} instead, which only {} of its members entered", opText(o),
                           groupText(o.group), ranksText(o.entered));
      } else if (r && r->last) {
        then = fmt::format(", and it went on to {} #{} of {} ({})", r->last->op, r->last->seq, groupText(r->lastGroup),
                           r->last->state.empty() ? "state unknown" : r->last->state);
      }
      return fmt::format("{} never entered {}; its last completed op there was #{}{}{}", who(b.rank), op,
                         t ? t->done : -1, then, wait);
    }
    case FaultKind::kStalledHost:
      if (b.lateS > 0)
        return fmt::format("{} entered {} {:.1f} s after its peers, past the op's {} ms timeout: a host-side stall; "
                           "{} had given up waiting for it",
                           who(b.rank), op, b.lateS, b.timeoutMs, ranksText(rec.others));
      return fmt::format("{} never entered {} and issued nothing after its last completed op, #{}: a host-side stall{}",
                         who(b.rank), op, t ? t->done : -1, wait);
    case FaultKind::kMismatchedOp:
    case FaultKind::kMismatchedSize:
    case FaultKind::kMismatchedDtype: {
      const Sig& mine = st_.sigs[b.sig];
      const Sig& theirs = st_.sigs[rec.majoritySig];
      std::string what = b.kind == FaultKind::kMismatchedOp ? fmt::format("called {} as #{}", mine.op, rec.seq)
                         : b.kind == FaultKind::kMismatchedSize
                             ? fmt::format("entered {} with sizes {} -> {}", op, sizesText(mine.in), sizesText(mine.out))
                             : fmt::format("entered {} with dtypes {} -> {}", op, fmt::join(mine.inDtypes, ","),
                                           fmt::join(mine.outDtypes, ","));
      std::string where = b.kind == FaultKind::kMismatchedOp ? fmt::format(" of {} where {} called {}", groupText(rec.group),
                                                                          ranksText(rec.others), theirs.op)
                          : b.kind == FaultKind::kMismatchedSize
                              ? fmt::format(" where {} used {} -> {}", ranksText(rec.others), sizesText(theirs.in),
                                            sizesText(theirs.out))
                              : fmt::format(" where {} used {} -> {}", ranksText(rec.others),
                                            fmt::join(theirs.inDtypes, ","), fmt::join(theirs.outDtypes, ","));
      return fmt::format("{} {}{}{}", who(b.rank), what, where, wait);
    }
    case FaultKind::kP2pUnmatched: {
      const int owner = st_.ranks[rec.owner].rank;
      return fmt::format("{} never posted the {} matching rank {}'s {} of {}; rank {} waits in it{}", who(b.rank),
                         rec.ownerSends ? "recv" : "send", owner, opText(rec), groupText(rec.group), owner,
                         sinceText(earliest({owner})));
    }
    case FaultKind::kStalledDevice: {
      if (!rec.others.empty())
        return fmt::format("{} enqueued {} but never completed it while {} did: its GPU or network holds it{}",
                           who(b.rank), op, ranksText(rec.others), wait);
      return fmt::format("{} enqueued {} but its device never started it while its peers' did: its GPU is stuck in "
                         "earlier work{}",
                         who(b.rank), op, wait);
    }
    case FaultKind::kNoDump:
      if (!rec.p2p && !rec.others.empty())
        return fmt::format("{} left no dump; it stopped inside {} ({} completed it, so it took part){}{}", who(b.rank),
                           op, ranksText(rec.others),
                           rec.waiters.empty() ? "" : fmt::format(" and {} for it in {}", ranksDo(rec.waiters, "wait"), opText(rec)),
                           sinceText(earliest(rec.waiters)));
      return fmt::format("{} left no dump; its peers last saw it at #{} of {}{}{}", who(b.rank),
                         rec.p2p || rec.idle ? rec.seq : rec.seq - 1, groupText(rec.group),
                         rec.waiters.empty() ? "" : fmt::format(" and {} for it in {}", ranksDo(rec.waiters, "wait"), opText(rec)),
                         sinceText(earliest(rec.waiters)));
    case FaultKind::kBlockedByOtherGroup:
      break;
  }
  return "";
}

std::vector<HangEvidence> Judge::dumpEvidence(const Record& rec, const Blocker& b) const {
  std::vector<HangEvidence> out;
  const RankData* r = dumpOf(b.rank);
  const std::string op = fmt::format("{} of {}", opText(rec), groupText(rec.group));
  auto file = [&](int rank) { return dumpOf(rank) ? dumpOf(rank)->file : std::string(); };
  auto status = [&](int rank) {
    const Track* x = trackOf(rank, rec.group);
    return x ? statusText(*x) : std::string("its dump has no record of the group");
  };
  auto lastOp = [&] {
    if (!r || !r->last) return;
    const Detail& l = *r->last;
    out.push_back({fmt::format("its last op: {} #{} of {}, {}{}", l.op, l.seq, groupText(r->lastGroup),
                               l.state.empty() ? "state unknown" : l.state, sinceText(l.timeNs).replace(0, 7, " created at")),
                   r->file, l.frame.empty() ? fmt::format("entry {} of the dump", l.order) : "top frame: " + l.frame});
  };
  switch (b.kind) {
    case FaultKind::kNeverEntered:
    case FaultKind::kStalledHost:
      if (b.lateS > 0) {
        out.push_back({fmt::format("rank {} created its entry of {} {:.1f} s after the median of {}", b.rank, op,
                                   b.lateS, ranksText(rec.others)),
                       r->file, fmt::format("timeout_ms {}", b.timeoutMs)});
        break;
      }
      out.push_back({fmt::format("rank {} never enqueued {}", b.rank, op), r->file, status(b.rank)});
      lastOp();
      if (r->backend == "gloo")
        out.push_back({fmt::format("gloo's Flight Recorder does not record send/recv: if rank {} is blocked in one, "
                                   "the peer that never posted the other side holds it (`py-spy dump` shows where "
                                   "rank {} is)",
                                   b.rank, b.rank),
                       "", ""});
      if (b.cycleRecord >= 0) {
        const Record& o = records_[b.cycleRecord];
        out.push_back({fmt::format("it waits in {} of {} instead, which {} entered and the rest of its members never did",
                                   opText(o), groupText(o.group), ranksText(o.entered)),
                       r->file, status(b.rank)});
      }
      break;
    case FaultKind::kMismatchedOp:
    case FaultKind::kMismatchedSize:
    case FaultKind::kMismatchedDtype: {
      auto sigText = [](const Sig& s) {
        return fmt::format("{}: input_sizes {}, output_sizes {}, input_dtypes [{}], output_dtypes [{}]{}", s.op,
                           sizesText(s.in), sizesText(s.out), fmt::join(s.inDtypes, ", "),
                           fmt::join(s.outDtypes, ", "), s.selfOk ? "" : " (its output does not fit its input)");
      };
      out.push_back({fmt::format("rank {}'s entry #{} of {} differs from the majority's", b.rank, rec.seq,
                                 groupText(rec.group)),
                     r->file, sigText(st_.sigs[b.sig])});
      out.push_back({fmt::format("{} on #{}", ranksDo(rec.others, "agree"), rec.seq), file(rec.others.front()),
                     sigText(st_.sigs[rec.majoritySig])});
      break;
    }
    case FaultKind::kP2pUnmatched: {
      const RankData& w = st_.ranks[rec.owner];
      const Detail* d = oldest_[rec.owner];
      out.push_back({fmt::format("rank {}'s {} with rank {} is pending", w.rank, opText(rec), b.rank), w.file,
                     fmt::format("state {}, sizes {} -> {}{}", d->state, sizesText(d->in), sizesText(d->out),
                                 sinceText(d->timeNs).replace(0, 7, ", created at"))});
      out.push_back({fmt::format("rank {} has no {} with rank {} pending", b.rank, rec.ownerSends ? "recv" : "send",
                                 w.rank),
                     r->file, oldest_[st_.rankIndex.at(b.rank)] ? "its oldest pending op is elsewhere" : "nothing pending"});
      lastOp();
      break;
    }
    case FaultKind::kStalledDevice:
      out.push_back({fmt::format("rank {} enqueued {} but has not {} it", b.rank, op,
                                 rec.others.empty() ? "started" : "completed"),
                     r->file, status(b.rank)});
      if (!rec.others.empty())
        out.push_back({fmt::format("{} completed it", ranksText(rec.others)), file(rec.others.front()),
                       fmt::format("e.g. rank {}: {}", rec.others.front(), status(rec.others.front()))});
      break;
    case FaultKind::kNoDump:
      out.push_back({fmt::format("rank {} left no dump", b.rank), "",
                     "no input file carries its rank number: its process died (crash, OOM kill) or never dumped"});
      break;
    case FaultKind::kBlockedByOtherGroup:
      break;
  }
  if (!rec.waiters.empty() && !rec.p2p) {
    const int w = rec.waiters.front();
    out.push_back({fmt::format("{} in {}{}", ranksDo(rec.waiters, "wait"), op, sinceText(earliest(rec.waiters))),
                   file(w), fmt::format("e.g. rank {}: {}", w, status(w))});
  }
  const int self = static_cast<int>(&rec - records_.data());
  for (int U : rec.upstream) {
    const Record& u = records_[U];
    for (const auto& x : u.blockers) {
      if (x.terminal || !dumpOf(x.rank) || blockingPoint_[st_.rankIndex.at(x.rank)] != self) continue;
      out.push_back({fmt::format("{} in {} of {} for rank {}, which is stuck here", ranksDo(u.waiters, "wait"),
                                 opText(u), groupText(u.group), x.rank),
                     file(x.rank), fmt::format("rank {}: {}", x.rank, statusText(*trackOf(x.rank, u.group)))});
    }
  }
  return out;
}

// ": peer 10.0.0.7<43121>", with the host and its ranks where dsdiag's fleet JSON knows the address.
std::string Judge::peerText(const std::string& addr) const { return addr.empty() ? "" : ": peer " + addrText(addr); }

// "10.0.0.7<43121> (gpu-018, rank(s) 3)": the address, and its host and ranks where they are known.
std::string Judge::addrText(const std::string& addr) const {
  const std::string host = hostOfAddress(ev_, addr);
  if (host.empty()) return addr;
  std::vector<int> ranks;
  for (const auto& [r, h] : ev_.rankHost) {
    if (h == host) ranks.push_back(r);
  }
  return fmt::format("{} ({}{})", addr, host, ranks.empty() ? "" : fmt::format(", rank(s) {}", formatRanges(ranks)));
}

// What one log line says about rank r, as a claim.
std::string Judge::factClaim(const LogFact& f, int r) const {
  switch (f.kind) {
    case LogFact::Kind::kWatchdogTimeout:
      return fmt::format("rank {}'s watchdog timed out in SeqNum={}{}", r, f.seq.value_or(-1),
                         f.opType.empty() ? "" : ", OpType=" + f.opType);
    case LogFact::Kind::kWatchdogFailure:
      return fmt::format("rank {}'s watchdog failed at work sequence id {} (last enqueued {}, last completed {})", r,
                         f.seq.value_or(-1), f.lastEnqueued.value_or(-1), f.lastCompleted.value_or(-1));
    case LogFact::Kind::kDumpSignal:
      return fmt::format("rank {} received a dump signal from rank {}", r, f.fromRank.value_or(-1));
    case LogFact::Kind::kNcclNetError:
      return fmt::format("NCCL network error on rank {}{}{}", r, peerText(f.peerAddr),
                         f.hca.empty() ? "" : ", HCA " + f.hca);
    case LogFact::Kind::kNcclRemoteError:
      return fmt::format("NCCL remote error on rank {}: a peer process exited or the network failed", r);
    case LogFact::Kind::kGlooPeerClosed:
      return fmt::format("rank {}'s gloo connection to {} was closed by that peer: its process exited or dropped the "
                         "connection",
                         r, addrText(f.peerAddr));
    case LogFact::Kind::kGlooTimeout:
      return fmt::format("rank {} timed out after {} ms waiting for a gloo {} to complete (gloo's collectives send "
                         "and receive too, so this names no send/recv of the program)",
                         r, f.timeoutMs.value_or(-1), f.opType);
    case LogFact::Kind::kException:
      return fmt::format("rank {} raised {}{}{}: {}", r, f.exception, f.message.empty() ? "" : ": " + f.message,
                         f.frame.empty() ? "" : " in " + f.frame,
                         f.hangConsequence ? "an error a hang raises on the ranks that wait, so it says this rank "
                                             "waited, not why"
                                           : "an error in its own code, not one a hang raises on the ranks that wait");
  }
  return "";
}

// The first exception of its own in a rank's logs (a chained traceback's first is its root).
const LogFact* Judge::ownException(int rank) const {
  auto [a, z] = logs_.equal_range(rank);
  for (auto it = a; it != z; ++it)
    if (it->second->kind == LogFact::Kind::kException && !it->second->hangConsequence) return it->second;
  return nullptr;
}

// "; its log shows it raised ValueError: ... in load_batch (train.py:88)", or "".
std::string Judge::raisedText(int rank) const {
  const LogFact* f = ownException(rank);
  if (!f) return "";
  return fmt::format("; its log shows it raised {}{}{} ({})", f->exception, f->message.empty() ? "" : ": " + f->message,
                     f->frame.empty() ? "" : " in " + f->frame, sourceText(f->source));
}

void Judge::outsideEvidence(const Record& rec, int rank, std::vector<HangEvidence>& out) const {
  auto [a, z] = logs_.equal_range(rank);
  for (auto it = a; it != z; ++it) out.push_back({factClaim(*it->second, rank), sourceText(it->second->source), it->second->source.text});
  int cited = 0;
  for (int w : rec.waiters) {
    if (cited >= st_.opt.peerLogsCited) break;
    auto [b, e] = logs_.equal_range(w);
    for (auto it = b; it != e && cited < st_.opt.peerLogsCited; ++it) {
      const LogFact& f = *it->second;
      const bool watchdog = f.kind == LogFact::Kind::kWatchdogTimeout || f.kind == LogFact::Kind::kWatchdogFailure;
      if (!watchdog || f.seq != rec.seq) continue;
      out.push_back({factClaim(f, w), sourceText(f.source), f.source.text});
      ++cited;
    }
  }
  if (auto it = ras_.find(rank); it != ras_.end())
    out.push_back({fmt::format("NCCL RAS reports rank {} {}", rank, it->second->state), sourceText(it->second->source),
                   it->second->source.text});
  const std::string h = host(rank);
  for (const auto& f : ev_.fleet) {
    if (h.empty() || f.host != h || f.state == "healthy") continue;
    out.push_back({fmt::format("dsdiag fleet judged host {} {}", h, f.state), sourceText(f.source), f.evidence});
  }
}

// A rank that never entered an op: it went on with another group's ops after its last op here
// (never_entered), or it issued nothing more (stalled_host).
FaultKind Judge::finalKind(const Record& rec, const Blocker& b) const {
  if (b.kind != FaultKind::kNeverEntered || b.cycleRecord >= 0) return b.kind;
  const RankData* r = dumpOf(b.rank);
  const Track* t = trackOf(b.rank, rec.group);
  const bool wentOn = r && r->last && r->lastGroup != rec.group && (!t || r->last->order > t->lastOrder);
  return wentOn ? FaultKind::kNeverEntered : FaultKind::kStalledHost;
}

// torch 2.15's gloo records no send/recv: a rank whose dump ends quietly may be blocked in one, and
// then its peer is the culprit. Only a backend that records p2p ops lets "nothing after" convict.
std::optional<std::string> Judge::blindSpot(const Record& rec, const Blocker& b) const {
  const RankData* r = dumpOf(b.rank);
  const bool quiet = (b.kind == FaultKind::kStalledHost && b.lateS == 0) ||
                     (b.kind == FaultKind::kNeverEntered && b.cycleRecord < 0);
  if (!quiet || !r || r->backend != "gloo" || st_.glooP2pSeen) return std::nullopt;
  if (ownException(b.rank)) return std::nullopt;  // it failed in its own code: not blocked in a send/recv
  const Track* t = trackOf(b.rank, rec.group);
  // Its own log's gloo errors: a wait inside gloo raised on it, which a rank stalled in its own code does
  // not reach (unless it went on later, after its dump was taken): said beside the question.
  std::string logs;
  auto [a, z] = logs_.equal_range(b.rank);
  int cited = 0;
  for (auto it = a; it != z && cited < 2; ++it) {
    const LogFact& f = *it->second;
    if (f.kind != LogFact::Kind::kGlooPeerClosed && f.kind != LogFact::Kind::kGlooTimeout) continue;
    logs += fmt::format("; its log: {} ({})", factClaim(f, b.rank), sourceText(f.source));
    ++cited;
  }
  return fmt::format("rank {} never entered {} of {} and its dump shows nothing pending after #{}; gloo records no "
                     "send/recv in the Flight Recorder, so rank {} is either stalled on the host (then it is the "
                     "culprit) or blocked in a send/recv whose peer never posted the other side (then the peer is); "
                     "`py-spy dump` of rank {} tells which{}{}",
                     b.rank, opText(rec), groupText(rec.group), t ? t->done : -1, b.rank, b.rank,
                     cited ? " (a gloo wait raised on it, so it was inside gloo, not in its own code, when it did)" : "",
                     logs);
}

void Judge::addCulprit(const Record& rec, const Blocker& b) {
  const RankData* r = dumpOf(b.rank);
  const Track* t = trackOf(b.rank, rec.group);
  if (culpritRanks_.count(b.rank)) {  // named already: the other place it holds is one more claim
    for (auto& c : rep_.culprits)
      if (c.rank == b.rank) c.evidence.push_back({"it also holds " + summaryOf(rec, b), r ? r->file : "", ""});
    return;
  }
  culpritRanks_.insert(b.rank);
  report::HangCulprit c;
  c.rank = b.rank;
  c.host = host(b.rank);
  c.group = ref(rec.group);
  c.pgId = t ? t->pgId : "";
  c.seq = rec.seq >= 0 ? std::optional<int64_t>(rec.seq) : std::nullopt;
  c.p2p = rec.p2p;
  c.op = b.sig != kNoSig ? st_.sigs[b.sig].op : rec.p2p ? (rec.ownerSends ? "recv" : "send") : rec.op;
  c.kind = b.kind;
  c.summary = summaryOf(rec, b) + raisedText(b.rank);
  c.evidence = dumpEvidence(rec, b);
  outsideEvidence(rec, b.rank, c.evidence);
  rep_.culprits.push_back(std::move(c));
}

void Judge::culprits() {
  std::vector<char> named(records_.size(), 0);
  for (size_t R = 0; R < records_.size(); ++R) {
    const Record& rec = records_[R];
    for (const auto& blocker : rec.blockers) {
      if (!blocker.terminal || (blocker.weak && blocker.cycleRecord < 0)) continue;
      Blocker b = blocker;
      b.kind = finalKind(rec, b);
      if (auto why = blindSpot(rec, b)) {
        rep_.undecided.push_back({ref(rec.group), rec.seq, {b.rank}, *why});
        continue;
      }
      addCulprit(rec, b);
      named[R] = 1;
    }
  }
  for (size_t R = 0; R < records_.size(); ++R) {
    const Record& rec = records_[R];
    if (rec.undecided.empty() || named[R]) continue;
    std::vector<int> ranks = rec.undecidedRanks;
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    rep_.undecided.push_back({ref(rec.group), rec.seq >= 0 ? std::optional<int64_t>(rec.seq) : std::nullopt,
                              std::move(ranks), rec.undecided});
  }
}

// Outside evidence that a dump contradicts: the dump stands, the user is told.
void Judge::contradictions() {
  for (const auto& [rank, ras] : ras_) {
    if ((ras->state != "dead" && ras->state != "missing") || !dumpOf(rank) || culpritRanks_.count(rank)) continue;
    st_.problems.push_back(fmt::format("NCCL RAS reports rank {} {} ({}), but its dump shows nothing wrong with it; "
                                       "the dump is taken as the evidence.",
                                       rank, ras->state, sourceText(ras->source)));
  }
  for (const auto& f : ev_.logs) {
    if (f.kind != LogFact::Kind::kWatchdogFailure || !namesGlobalRank(f) || !dumpOf(*f.rank)) continue;
    for (const auto& t : dumpOf(*f.rank)->tracks) {
      if (!t.statusKnown || (t.pgId != f.pgId && st_.groups[t.group].name != f.pgId)) continue;
      if (f.lastCompleted.value_or(-1) > t.done || f.lastEnqueued.value_or(-1) > t.enq)
        st_.problems.push_back(fmt::format(
            "{} says rank {} had enqueued #{} and completed #{} in group {}, but its dump says #{} and #{}; a dump "
            "is written after the watchdog fires, so one of the two files is from another run. The dump is used.",
            sourceText(f.source), *f.rank, f.lastEnqueued.value_or(-1), f.lastCompleted.value_or(-1),
            st_.groups[t.group].name, t.enq, t.done));
    }
  }
}

void Judge::noDumps() {
  std::unordered_map<int, int> best;  // rank without a dump -> the group its sighting is from
  for (const auto& rec : records_)
    for (int m : rec.missing) best.emplace(m, rec.group);
  std::vector<int> order(st_.groups.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = static_cast<int>(g);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return st_.groups[a].members.size() > st_.groups[b].members.size(); });
  for (int g : order)
    for (int m : st_.groups[g].members)
      if (!dumpOf(m)) best.emplace(m, g);
  for (const auto& [m, g] : best) {
    report::HangNoDump n{m, host(m), ref(g), rep_.groups[groupSummary_[g]].lastCompletedByAll, ""};
    n.detail = n.lastSeenSeq ? fmt::format("its peers last saw it at #{} of {} (the last op all of them completed)",
                                           *n.lastSeenSeq, groupText(g))
                             : fmt::format("no op of {} was completed by all its peers", groupText(g));
    n.detail += raisedText(m);
    rep_.noDump.push_back(std::move(n));
  }
  std::sort(rep_.noDump.begin(), rep_.noDump.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
}

// The culprits a record's waiters end at, following blocked blockers (the graph has no cycle now).
std::vector<int> Judge::roots(int R, std::vector<std::optional<std::vector<int>>>& memo) const {
  if (memo[R]) return *memo[R];
  memo[R] = std::vector<int>{};  // a guard; no cycle is left, but never recurse forever
  std::set<int> out;
  for (const auto& b : records_[R].blockers)
    if (b.terminal && (!b.weak || b.cycleRecord >= 0)) out.insert(b.rank);
  for (int n : records_[R].next)
    for (int r : roots(n, memo)) out.insert(r);
  memo[R] = std::vector<int>(out.begin(), out.end());
  return *memo[R];
}

void Judge::waiting() {
  std::vector<std::optional<std::vector<int>>> memo(records_.size());
  // (record, seq, op, blocked) -> ranks
  std::map<std::tuple<int, int64_t, std::string, bool>, std::vector<int>> groups;
  for (size_t R = 0; R < records_.size(); ++R) {
    const Record& rec = records_[R];
    for (int w : rec.waiters) {
      if (culpritRanks_.count(w)) continue;
      const Detail* d = oldest_[st_.rankIndex.at(w)];
      groups[{static_cast<int>(R), d->seq, d->op, false}].push_back(w);
    }
    for (const auto& b : rec.blockers)
      if (!b.terminal && b.kind != FaultKind::kNoDump) groups[{static_cast<int>(R), rec.seq, rec.op, true}].push_back(b.rank);
  }
  for (auto& [key, ranks] : groups) {
    const auto& [R, seq, op, blocked] = key;
    const Record& rec = records_[R];
    report::HangWaiting w;
    w.group = ref(rec.group);
    w.seq = seq >= 0 ? std::optional<int64_t>(seq) : std::nullopt;
    w.p2p = rec.p2p;
    w.op = op;
    w.blockedByOtherGroup = blocked;
    const std::vector<int> root = roots(R, memo);
    std::string tail = root.empty() ? "; who holds it is undecided" : fmt::format("; the chain ends at {}", ranksText(root));
    if (blocked) {
      const int bp = blockingPoint_[st_.rankIndex.at(ranks.front())];
      const Record& there = records_[bp];
      for (const auto& b : there.blockers) w.waitsFor.push_back(b.rank);
      w.reason = fmt::format("never entered it: stuck in {} of {}{}", opText(there), groupText(there.group), tail);
    } else {
      w.sinceNs = earliest(ranks);
      std::vector<std::string> parts;
      bool chained = false;
      for (const auto& b : rec.blockers) {
        w.waitsFor.push_back(b.rank);
        if (b.terminal || b.kind == FaultKind::kNoDump) continue;
        const Record& there = records_[blockingPoint_[st_.rankIndex.at(b.rank)]];
        parts.push_back(fmt::format("; rank {} is stuck in {} of {}", b.rank, opText(there), groupText(there.group)));
        chained = true;
      }
      std::sort(w.waitsFor.begin(), w.waitsFor.end());
      w.reason = (w.waitsFor.empty() ? std::string("wait in it") : "wait for " + ranksText(w.waitsFor)) +
                 fmt::format("{}", fmt::join(parts, "")) + (chained || root != w.waitsFor ? tail : "");
    }
    std::sort(w.waitsFor.begin(), w.waitsFor.end());
    w.chainEndsAt = root;
    w.ranks = std::move(ranks);
    rep_.waiting.push_back(std::move(w));
  }
}

// Each rank's last entries as it recorded them: every rank of a job of at most rankTimelines dumps,
// else the ranks the verdict names (culprits, then those of open questions), at most rankTimelines.
// Everyone's state is in the group timelines.
void Judge::timelines() {
  if (st_.opt.timelineEntries <= 0 || st_.opt.rankTimelines <= 0) return;
  std::vector<const RankData*> byRank;
  const auto limit = static_cast<std::size_t>(st_.opt.rankTimelines);
  if (st_.ranks.size() <= limit) {
    for (const auto& r : st_.ranks) byRank.push_back(&r);
  } else {
    std::set<int> named;
    for (const auto& c : rep_.culprits) named.insert(c.rank);
    for (const auto& u : rep_.undecided)
      for (int r : u.ranks)
        if (named.size() < limit) named.insert(r);
    for (int r : named)
      if (const RankData* d = dumpOf(r); d && byRank.size() < limit) byRank.push_back(d);
  }
  std::sort(byRank.begin(), byRank.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
  for (const RankData* r : byRank) {
    for (const auto& t : r->tracks) {
      if (t.tail.empty()) continue;
      report::HangTimeline tl{r->rank, st_.groups[t.group].name, {}};
      for (const auto& d : t.tail)
        tl.entries.push_back({d.seq >= 0 ? std::optional<int64_t>(d.seq) : std::nullopt, d.p2p, d.op, d.state, d.in,
                              d.out, d.timeNs});
      rep_.timelines.push_back(std::move(tl));
    }
  }
}

// Each group's last collectives, one column per seq and one row per kind of member: the columns
// end at the last op any member enqueued and show a few completed ops before the first divergent
// (or first not completed by all) seq; at most kColumns. A cell is what the member's watermarks say
// of that seq; a member whose op there differs from the others' has the column in mismatchedSeqs.
// Members alike in every column share a row, so 16,384 ranks that all wait in one op are one row.
void Judge::groupTimelines() {
  constexpr int64_t kColumns = 16, kBefore = 4;
  using report::HangCell;
  for (int g : order_) {
    const GroupData& G = st_.groups[g];
    const report::HangGroup& sum = rep_.groups[groupSummary_[g]];
    int64_t hi = -1, lo = INT64_MAX;
    for (auto [ri, ti] : G.tracks) {
      const Track& t = st_.ranks[ri].tracks[ti];
      if (t.statusKnown) hi = std::max(hi, t.enq);
      if (!t.sigs.empty()) {
        hi = std::max(hi, t.firstSeq + static_cast<int64_t>(t.sigs.size()) - 1);
        lo = std::min(lo, t.firstSeq);
      }
    }
    if (hi < 1) continue;  // nothing recorded in this group
    if (lo == INT64_MAX) lo = 1;
    const int64_t open = sum.firstDivergentSeq.value_or(sum.lastCompletedByAll.value_or(hi - 1) + 1);
    int64_t first = std::max({lo, int64_t{1}, std::min(open, hi) - kBefore});
    int64_t last = std::min(hi, first + kColumns - 1);
    if (open > last) first = std::max(int64_t{1}, open - kColumns / 2), last = std::min(hi, first + kColumns - 1);
    const auto columns = static_cast<std::size_t>(last - first + 1);
    report::HangGroupTimeline tl;
    tl.group = ref(g);
    tl.firstSeq = first;
    if (sum.firstDivergentSeq && *sum.firstDivergentSeq >= first && *sum.firstDivergentSeq <= last)
      tl.divergentSeq = sum.firstDivergentSeq;
    // The op of each column: the signature most members recorded there.
    std::vector<uint32_t> major(columns, kNoSig);
    {
      std::vector<std::unordered_map<uint32_t, int>> votes(columns);
      for (auto [ri, ti] : G.tracks) {
        const Track& t = st_.ranks[ri].tracks[ti];
        for (std::size_t c = 0; c < columns; ++c) {
          const int64_t i = first + static_cast<int64_t>(c) - t.firstSeq;
          if (i >= 0 && i < static_cast<int64_t>(t.sigs.size()) && t.sigs[i] != kNoSig) ++votes[c][t.sigs[i]];
        }
      }
      for (std::size_t c = 0; c < columns; ++c) {
        int best = 0;
        for (auto [sig, n] : votes[c])
          if (n > best || (n == best && sig < major[c])) best = n, major[c] = sig;
        tl.ops.push_back(major[c] == kNoSig ? "" : st_.sigs[major[c]].op);
      }
    }
    // One row per kind of member, keyed by its cells and mismatched columns.
    std::vector<int> members = G.members;
    for (auto [ri, ti] : G.tracks)
      if (!G.membersKnown) members.push_back(st_.ranks[ri].rank);
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    std::map<std::pair<std::vector<HangCell>, std::vector<int64_t>>, std::vector<int>> rows;
    for (int m : members) {
      std::vector<HangCell> cells(columns, HangCell::kUnknown);
      std::vector<int64_t> mismatched;
      const RankData* r = dumpOf(m);
      const Track* t = r ? trackOf(m, g) : nullptr;
      for (std::size_t c = 0; c < columns; ++c) {
        const int64_t seq = first + static_cast<int64_t>(c);
        if (!r) {
          cells[c] = HangCell::kNoDump;
          continue;
        }
        if (!t) continue;
        if (t->statusKnown) {
          cells[c] = seq <= t->done      ? HangCell::kCompleted
                     : seq <= t->started ? HangCell::kStarted
                     : seq <= t->enq     ? HangCell::kScheduled
                                         : HangCell::kNotEntered;
        }
        const int64_t i = seq - t->firstSeq;
        if (i >= 0 && i < static_cast<int64_t>(t->sigs.size()) && t->sigs[i] != kNoSig && major[c] != kNoSig &&
            t->sigs[i] != major[c])
          mismatched.push_back(seq);
      }
      rows[{std::move(cells), std::move(mismatched)}].push_back(m);
    }
    for (auto& [key, ranks] : rows) tl.rows.push_back({std::move(ranks), key.first, key.second});
    std::stable_sort(tl.rows.begin(), tl.rows.end(), [](const auto& a, const auto& b) {
      return a.ranks.size() != b.ranks.size() ? a.ranks.size() > b.ranks.size() : a.ranks < b.ranks;
    });
    rep_.groupTimelines.push_back(std::move(tl));
  }
}

void Judge::verdict() {
  if (!rep_.culprits.empty()) {
    rep_.verdict = report::HangVerdict::kCulpritFound;
    rep_.headline = rep_.culprits.front().summary;
    if (rep_.culprits.size() > 1) rep_.headline += fmt::format(" ({} more culprits below)", rep_.culprits.size() - 1);
  } else if (st_.ranks.empty()) {
    rep_.verdict = report::HangVerdict::kCannotDecide;
    rep_.headline = "cannot decide: no dump was read";
  } else if (!rep_.undecided.empty()) {
    rep_.verdict = report::HangVerdict::kCannotDecide;
    rep_.headline = "cannot decide: " + rep_.undecided.front().reason;
  } else {
    rep_.verdict = report::HangVerdict::kNoFaultFound;
    rep_.headline = fmt::format("no fault found: the {} dumps agree and every op they enqueued completed", st_.ranks.size());
  }
}

HangReport Judge::run() {
  // Only facts that name a global rank: RAS ranks of the job-wide communicator, log lines whose rank
  // is not a group's or a node's local rank.
  for (const auto& r : ev_.ras)
    if (r.worldComm && r.rank >= 0) ras_.emplace(r.rank, &r);
  for (const auto& f : ev_.logs)
    if (namesGlobalRank(f)) logs_.emplace(*f.rank, &f);
  settleGroups();
  // Oldest pending op per rank: where it is stuck.
  oldest_.assign(st_.ranks.size(), nullptr);
  oldestGroup_.assign(st_.ranks.size(), -1);
  for (size_t ri = 0; ri < st_.ranks.size(); ++ri)
    for (const auto& t : st_.ranks[ri].tracks)
      if (!t.pending.empty() && (!oldest_[ri] || t.pending.front().order < oldest_[ri]->order))
        oldest_[ri] = &t.pending.front(), oldestGroup_[ri] = t.group;
  // Groups in name order ("0", "1", ..., numbers by value): the report does not depend on file order.
  std::vector<int> order(st_.groups.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = static_cast<int>(g);
  auto key = [&](int g) {
    const std::string& n = st_.groups[g].name;
    const bool num = !n.empty() && n.size() < 18 && n.find_first_not_of("0123456789") == std::string::npos;
    return std::make_tuple(!num, num ? std::stoll(n) : 0, n);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  groupRecord_.assign(st_.groups.size(), -1);
  groupSummary_.assign(st_.groups.size(), -1);
  order_ = order;
  for (int g : order) {
    groupSummary_[g] = static_cast<int>(rep_.groups.size());
    analyseGroup(g);
  }
  oldestIsFailed_.assign(st_.ranks.size(), 0);
  adoptFailed();
  p2pRecord_.assign(st_.ranks.size(), -1);
  p2pRecords();
  blockingPoints();
  resolveChains();
  tieBreaks();
  culprits();
  contradictions();
  noDumps();
  waiting();
  timelines();
  groupTimelines();
  verdict();
  rep_.dumpsRead = static_cast<int>(st_.ranks.size());
  rep_.problems = st_.inputProblems;
  rep_.problems.insert(rep_.problems.end(), st_.problems.begin(), st_.problems.end());
  rep_.problems.insert(rep_.problems.end(), ev_.problems.begin(), ev_.problems.end());
  std::vector<const RankData*> byRank;
  for (const auto& r : st_.ranks) byRank.push_back(&r);
  std::sort(byRank.begin(), byRank.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
  for (const RankData* r : byRank) rep_.inputs.push_back(r->file);
  std::set<std::string> seen;
  auto input = [&](const Source& s) {
    if (!s.file.empty() && seen.insert(s.file).second) rep_.inputs.push_back(s.file);
  };
  for (const auto& f : ev_.logs) input(f.source);
  for (const auto& r : ev_.ras) input(r.source);
  for (const auto& f : ev_.fleet) input(f.source);
  return std::move(rep_);
}

}  // namespace

// ---- the public face ----

HangAnalysis::HangAnalysis(AnalyseOptions options) : s_(std::make_unique<State>()) { s_->opt = options; }
HangAnalysis::~HangAnalysis() = default;

void HangAnalysis::add(const RankDump& dump) { s_->addDump(dump); }

void HangAnalysis::addProblem(std::string sentence) { s_->inputProblems.push_back(std::move(sentence)); }

HangReport HangAnalysis::finish(const ExternalEvidence& evidence) {
  DS_CHECK(!s_->finished, "HangAnalysis::finish called twice");
  s_->finished = true;
  return Judge(*s_, evidence).run();
}

HangReport analyse(const std::map<int, RankDump>& dumps, const ExternalEvidence& evidence,
                   const AnalyseOptions& options, const std::vector<std::string>& loadProblems) {
  HangAnalysis a(options);
  for (const auto& p : loadProblems) a.addProblem(p);
  for (const auto& [rank, d] : dumps) a.add(d);
  return a.finish(evidence);
}

}  // namespace ds::diag::hang
