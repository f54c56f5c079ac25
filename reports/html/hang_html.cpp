#include "reports/html/hang_html.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "engine/common/ranges.h"
#include "reports/diag/hang_text.h"
#include "reports/html/html_escape.h"
#include "reports/html/html_page.h"
#include "reports/html/join.h"
#include "reports/json_io.h"

namespace ds::report::html {

namespace {

constexpr std::size_t kRanksText = 160;      // a rank list longer than this is cut, with its count
constexpr std::size_t kTimelineTables = 12;  // kinds of group tables drawn; more are listed in one table
constexpr std::size_t kListed = 50;          // rows of the long lists (questions, problems, groups)

std::string verdictClass(HangVerdict v) {
  switch (v) {
    case HangVerdict::kCulpritFound:
      return "fail";
    case HangVerdict::kCannotDecide:
      return "warn";
    case HangVerdict::kNoFaultFound:
      return "pass";
  }
  return "";
}

std::vector<int> sortedUnique(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// "rank 3", "ranks 0-11,13-15", "2048 ranks: 5, 13, ..., 16381 (every 8th)", or the start of a long
// list with its count: 16,384 ranks never make a cell of 100 KB.
std::string ranksLabel(const std::vector<int>& unsorted) {
  const std::vector<int> ranks = sortedUnique(unsorted);
  if (ranks.empty()) return "no rank";
  const std::string all = formatRanges(ranks);
  if (all.size() <= kRanksText) return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", all);
  const int step = ranks[1] - ranks[0];
  bool even = step > 1;
  for (std::size_t i = 2; even && i < ranks.size(); ++i) even = ranks[i] - ranks[i - 1] == step;
  if (even) {
    return fmt::format("{} ranks: {}, {}, …, {} (every {}{})", ranks.size(), ranks[0], ranks[1], ranks.back(), step,
                       step % 10 == 1 && step % 100 != 11   ? "st"
                       : step % 10 == 2 && step % 100 != 12 ? "nd"
                       : step % 10 == 3 && step % 100 != 13 ? "rd"
                                                            : "th");
  }
  const std::size_t cut = all.rfind(',', kRanksText);
  return fmt::format("{} ranks: {},… (the JSON lists them all)", ranks.size(),
                     all.substr(0, cut == std::string::npos ? kRanksText : cut));
}

std::string groupText(const HangGroupRef& g) {
  return g.pgDesc.empty() || g.pgDesc == "undefined" ? fmt::format("group {}", g.pgName)
                                                     : fmt::format("group {} ({})", g.pgName, g.pgDesc);
}

// Several groups of one kind: "group 5 (tp)", "groups 1-2048 (TENSOR_MODEL_PARALLEL_GROUP)".
std::string groupsLabel(const std::vector<HangGroupRef>& groups) {
  if (groups.size() == 1) return groupText(groups.front());
  std::vector<int> numbers;
  std::vector<std::string> names;
  std::set<std::string> descs;
  for (const auto& g : groups) {
    const bool number = !g.pgName.empty() && g.pgName.size() < 7 &&
                        g.pgName.find_first_not_of("0123456789") == std::string::npos;
    if (number) {
      numbers.push_back(std::stoi(g.pgName));
    } else {
      names.push_back(g.pgName);
    }
    if (!g.pgDesc.empty() && g.pgDesc != "undefined") descs.insert(g.pgDesc);
  }
  std::string list = formatRanges(numbers);
  if (list.size() > kRanksText)
    list = fmt::format("{}… ({} numbered)", list.substr(0, list.rfind(',', kRanksText)), numbers.size());
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) list += (list.empty() ? "" : ", ") + names[i];
  if (names.size() > 8) list += fmt::format(" and {} more", names.size() - 8);
  std::string d;
  for (const auto& x : descs) d += (d.empty() ? "" : ", ") + x;
  return fmt::format("{} groups {}{}", groups.size(), list, d.empty() ? "" : " (" + d + ")");
}

std::string sinceText(std::optional<int64_t> ns) {
  if (!ns) return "—";
  const std::string iso = hangIsoTime(*ns);
  return iso.empty() ? "—" : iso;
}

std::string seqText(std::optional<int64_t> seq) { return seq ? fmt::format("#{}", *seq) : "—"; }

// ---- the verdict, culprits, ranks without a dump, waiting ----

void verdictSection(PageBuilder& page, const HangReport& r) {
  page.section("Verdict");
  page.paragraph(r.headline, "verdict " + verdictClass(r.verdict));
  page.paragraph(fmt::format("verdict: {} (exit {}); {} of {} ranks left a dump; {} groups; {} culprit(s), {} "
                             "rank(s) without a dump, {} open question(s).",
                             hangVerdictName(r.verdict), hangExitCode(r.verdict), r.dumpsRead, r.worldSize,
                             r.groups.size(), r.culprits.size(), r.noDump.size(), r.undecided.size()));
  const std::vector<std::string> todo = hangAdvice(r);
  if (!todo.empty()) {
    page.heading("What to do");
    for (const auto& t : todo) page.paragraph(t);
  }
}

void culpritsSection(PageBuilder& page, const HangReport& r) {
  if (r.culprits.empty()) return;
  page.section("Culprits");
  for (const auto& c : r.culprits) {
    page.heading(fmt::format("rank {}{}: {}, {} {} of {}", c.rank, c.host.empty() ? "" : " on " + c.host,
                             faultKindName(c.kind), c.op, seqText(c.seq), groupText(c.group)));
    page.paragraph(c.summary, "fail");
    std::vector<Row> rows;
    for (const auto& e : c.evidence) rows.push_back({e.claim, Cell(e.file, "mono"), Cell(e.detail, "mono")});
    page.table({"claim", "file", "what it shows"}, rows);
  }
}

void noDumpSection(PageBuilder& page, const HangReport& r) {
  page.section("Ranks without a dump");
  if (r.noDump.empty()) {
    page.paragraph(fmt::format("Every one of the {} ranks the dumps name left a dump.", r.worldSize), "pass");
    return;
  }
  // One row per (group, last sighting): a host that died takes all its ranks with it.
  std::map<std::tuple<std::string, std::string, int64_t>, std::vector<const HangNoDump*>> rows;
  for (const auto& n : r.noDump) rows[{n.group.pgName, n.group.pgDesc, n.lastSeenSeq.value_or(-1)}].push_back(&n);
  std::vector<Row> out;
  for (const auto& [key, ns] : rows) {
    std::vector<int> ranks;
    std::set<std::string> hosts;
    for (const auto* n : ns) {
      ranks.push_back(n->rank);
      if (!n->host.empty()) hosts.insert(n->host);
    }
    out.push_back({ranksLabel(ranks), joinStrings({hosts.begin(), hosts.end()}), groupText(ns.front()->group),
                   Cell(seqText(ns.front()->lastSeenSeq), "num"), ns.front()->detail});
  }
  page.table({"ranks", "hosts", "group", "last seen", "what their peers saw"}, out);
}

void waitingSection(PageBuilder& page, const HangReport& r) {
  page.section("Waiting");
  if (r.waiting.empty()) {
    page.paragraph("No rank was found waiting.");
    return;
  }
  // Records alike but for their group and ranks share a row: 2,048 tensor-parallel groups whose
  // members wait for the one member stuck elsewhere are one line.
  struct Kind {
    std::vector<const HangWaiting*> records;
    std::vector<int> ranks, waitsFor;
  };
  std::map<std::tuple<std::string, std::string, int64_t, bool, bool, std::vector<int>>, Kind> kinds;
  std::vector<decltype(kinds)::key_type> order;
  for (const auto& w : r.waiting) {
    auto key = std::make_tuple(w.group.pgDesc, w.op, w.seq.value_or(-1), w.p2p, w.blockedByOtherGroup, w.chainEndsAt);
    auto [it, fresh] = kinds.try_emplace(key);
    if (fresh) order.push_back(key);
    it->second.records.push_back(&w);
    it->second.ranks.insert(it->second.ranks.end(), w.ranks.begin(), w.ranks.end());
    it->second.waitsFor.insert(it->second.waitsFor.end(), w.waitsFor.begin(), w.waitsFor.end());
  }
  std::vector<Row> rows;
  for (const auto& key : order) {
    const Kind& k = kinds.at(key);
    const HangWaiting& first = *k.records.front();
    std::vector<HangGroupRef> groups;
    std::optional<int64_t> since;
    for (const auto* w : k.records) {
      groups.push_back(w->group);
      if (w->sinceNs && (!since || *w->sinceNs < *since)) since = w->sinceNs;
    }
    const std::string reason = k.records.size() == 1
                                   ? first.reason
                                   : fmt::format("in each of {} groups alike; e.g. {}: {}", k.records.size(),
                                                 groupText(first.group), first.reason);
    rows.push_back({ranksLabel(k.ranks), groupsLabel(groups),
                    fmt::format("{} {}{}", first.op, seqText(first.seq), first.p2p ? " (p2p)" : ""),
                    Cell(first.blockedByOtherGroup ? "blocked by another group" : "waiting",
                         first.blockedByOtherGroup ? "warn" : ""),
                    sinceText(since), k.waitsFor.empty() ? "—" : ranksLabel(k.waitsFor),
                    first.chainEndsAt.empty() ? "undecided" : ranksLabel(first.chainEndsAt), reason});
  }
  page.paragraph(fmt::format("{} ranks in {} records; records alike but for their group share a row.",
                             [&] {
                               std::set<int> all;
                               for (const auto& w : r.waiting) all.insert(w.ranks.begin(), w.ranks.end());
                               return all.size();
                             }(),
                             r.waiting.size()),
                 "muted");
  page.table({"ranks", "groups", "op", "state", "since (UTC)", "wait for", "chain ends at", "why"}, rows);
}

// ---- the timelines ----

// The cells of a 1.0 report: its per-rank timelines' entry states, per group (1.0 has no watermarks).
std::vector<HangGroupTimeline> timelinesOf10(const HangReport& r) {
  std::vector<HangGroupTimeline> out;
  std::map<std::string, std::vector<const HangTimeline*>> byGroup;
  for (const auto& t : r.timelines) byGroup[t.pgName].push_back(&t);
  std::set<int> noDump;
  for (const auto& n : r.noDump) noDump.insert(n.rank);
  for (const auto& g : r.groups) {
    auto it = byGroup.find(g.group.pgName);
    if (it == byGroup.end()) continue;
    int64_t lo = INT64_MAX, hi = -1;
    for (const auto* t : it->second)
      for (const auto& e : t->entries)
        if (e.seq && !e.p2p) lo = std::min(lo, *e.seq), hi = std::max(hi, *e.seq);
    if (hi < 0) continue;
    lo = std::max(lo, hi - 15);
    const auto columns = static_cast<std::size_t>(hi - lo + 1);
    HangGroupTimeline tl;
    tl.group = g.group;
    tl.firstSeq = lo;
    tl.ops.assign(columns, "");
    if (g.firstDivergentSeq && *g.firstDivergentSeq >= lo && *g.firstDivergentSeq <= hi) tl.divergentSeq = g.firstDivergentSeq;
    std::map<int, std::vector<HangCell>> rows;
    for (const auto* t : it->second) {
      auto& cells = rows[t->rank];
      cells.assign(columns, HangCell::kUnknown);
      for (const auto& e : t->entries) {
        if (!e.seq || e.p2p || *e.seq < lo) continue;
        const auto c = static_cast<std::size_t>(*e.seq - lo);
        if (tl.ops[c].empty()) tl.ops[c] = e.op;
        cells[c] = e.state == "completed" ? HangCell::kCompleted
                   : e.state == "started" ? HangCell::kStarted
                   : e.state == "scheduled" ? HangCell::kScheduled
                                            : HangCell::kUnknown;
      }
    }
    for (int m : g.members)
      if (noDump.count(m)) rows[m].assign(columns, HangCell::kNoDump);
    std::map<std::vector<HangCell>, std::vector<int>> alike;
    for (const auto& [rank, cells] : rows) alike[cells].push_back(rank);
    for (auto& [cells, ranks] : alike) tl.rows.push_back({std::move(ranks), cells, {}});
    std::stable_sort(tl.rows.begin(), tl.rows.end(),
                     [](const auto& a, const auto& b) { return a.ranks.size() > b.ranks.size(); });
    out.push_back(std::move(tl));
  }
  return out;
}

const char* cellSymbol(HangCell c) {
  switch (c) {
    case HangCell::kCompleted:
      return "✓";
    case HangCell::kStarted:
      return "▶";
    case HangCell::kScheduled:
      return "…";
    case HangCell::kNotEntered:
      return "✗";
    case HangCell::kNoDump:
      return "—";
    case HangCell::kUnknown:
      return "?";
  }
  return "";
}

// "completed up to #20536, waiting in #20537 (started)", from one row's cells.
std::string rowState(const HangGroupTimeline& t, const HangTimelineRow& row) {
  std::optional<int64_t> done;
  std::size_t c = 0;
  for (; c < row.cells.size() && row.cells[c] == HangCell::kCompleted; ++c) done = t.firstSeq + static_cast<int64_t>(c);
  std::string s = done ? fmt::format("completed up to #{}", *done) : "";
  if (c < row.cells.size()) {
    const int64_t seq = t.firstSeq + static_cast<int64_t>(c);
    std::string next;
    switch (row.cells[c]) {
      case HangCell::kStarted:
        next = fmt::format("waiting in #{} (started)", seq);
        break;
      case HangCell::kScheduled:
        next = fmt::format("waiting in #{} (enqueued, not started)", seq);
        break;
      case HangCell::kNotEntered:
        next = fmt::format("never entered #{}", seq);
        break;
      case HangCell::kNoDump:
        next = "left no dump";
        break;
      case HangCell::kUnknown:
        next = done ? fmt::format("nothing known from #{}", seq) : "its dump says nothing of this group";
        break;
      case HangCell::kCompleted:
        break;
    }
    s += (s.empty() ? "" : ", ") + next;
  }
  if (!row.mismatchedSeqs.empty()) {
    std::vector<std::string> seqs;
    for (int64_t m : row.mismatchedSeqs) seqs.push_back(fmt::format("#{}", m));
    s += fmt::format("; a different op, size or dtype at {}", joinStrings(seqs));
  }
  return s.empty() ? "—" : s;
}

// One group's table: seq ids as columns, kinds of ranks as rows. Trusted markup with every string
// from the report escaped.
std::string timelineTable(const HangGroupTimeline& t) {
  std::string s = "<div class=\"table-wrap\"><table class=\"timeline\">\n<thead><tr><th>ranks</th><th>state</th>";
  for (std::size_t c = 0; c < t.ops.size(); ++c) {
    const int64_t seq = t.firstSeq + static_cast<int64_t>(c);
    const bool divergent = t.divergentSeq == seq;
    s += fmt::format("<th class=\"seq{}\" title=\"{}\">#{}<br><span class=\"op\">{}</span></th>",
                     divergent ? " divergent" : "",
                     divergent ? "the first seq where the members diverge" : "", seq, escapeHtml(t.ops[c]));
  }
  s += "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows) {
    s += fmt::format("<tr><td>{}</td><td>{}</td>", escapeHtml(ranksLabel(row.ranks)), escapeHtml(rowState(t, row)));
    for (std::size_t c = 0; c < row.cells.size(); ++c) {
      const int64_t seq = t.firstSeq + static_cast<int64_t>(c);
      const bool odd = std::find(row.mismatchedSeqs.begin(), row.mismatchedSeqs.end(), seq) != row.mismatchedSeqs.end();
      const char* name = hangCellName(row.cells[c]);
      s += fmt::format("<td class=\"cell {}{}{}\" title=\"#{}: {}{}\">{}{}</td>", name, odd ? " mismatch" : "",
                       t.divergentSeq == seq ? " divergent" : "", seq, name,
                       odd ? ", a different op, size or dtype" : "", odd ? "≠" : "", cellSymbol(row.cells[c]));
    }
    s += "</tr>\n";
  }
  s += "</tbody></table></div>\n";
  return s;
}

void timelinesSection(PageBuilder& page, const HangReport& r) {
  page.section("Timelines");
  const std::vector<HangGroupTimeline> all = r.groupTimelines.empty() ? timelinesOf10(r) : r.groupTimelines;
  if (all.empty()) {
    page.paragraph("The dumps recorded no collective, so there is no timeline to draw.");
    return;
  }
  page.paragraph("Each group's last collectives, from every member's watermarks: ✓ completed, ▶ started, … "
                 "enqueued but not started, ✗ never entered, — no dump, ? not known. The divergent seq is "
                 "outlined; ≠ marks a rank whose op, sizes or dtypes differ there. Ranks alike share a row, and "
                 "groups alike but for their members are drawn once.",
                 "muted");
  // Groups the verdict is about first: the culprits', then those of open questions, then any that
  // diverge, then the rest; groups alike but for their members form one kind.
  std::map<std::string, int> named;
  for (const auto& c : r.culprits) named.try_emplace(c.group.pgName, 0);
  for (const auto& u : r.undecided) named.try_emplace(u.group.pgName, 1);
  auto priority = [&](const HangGroupTimeline& t) {
    auto it = named.find(t.group.pgName);
    return it != named.end() ? it->second : t.divergentSeq ? 2 : 3;
  };
  using Shape = std::tuple<int, std::string, int64_t, std::vector<std::string>, std::optional<int64_t>,
                           std::vector<std::tuple<std::vector<HangCell>, std::vector<int64_t>, std::size_t>>>;
  std::map<Shape, std::vector<const HangGroupTimeline*>> kinds;
  for (const auto& t : all) {
    std::vector<std::tuple<std::vector<HangCell>, std::vector<int64_t>, std::size_t>> rows;
    for (const auto& row : t.rows) rows.emplace_back(row.cells, row.mismatchedSeqs, row.ranks.size());
    // A group the verdict names is a kind of its own, so that its table is the one drawn.
    const int p = priority(t);
    kinds[{p, p < 2 ? t.group.pgName : t.group.pgDesc, t.firstSeq, t.ops, t.divergentSeq, std::move(rows)}].push_back(&t);
  }
  std::size_t drawn = 0;
  std::vector<Row> rest;
  for (const auto& [shape, groups] : kinds) {
    const HangGroupTimeline& t = *groups.front();
    if (drawn == kTimelineTables) {
      std::vector<HangGroupRef> refs;
      for (const auto* g : groups) refs.push_back(g->group);
      std::string state;
      for (const auto& row : t.rows)
        state += (state.empty() ? "" : "; ") + fmt::format("{} rank(s): {}", row.ranks.size(), rowState(t, row));
      rest.push_back({groupsLabel(refs), Cell(seqText(t.divergentSeq), "num"), state});
      continue;
    }
    ++drawn;
    std::vector<HangGroupRef> others;
    for (std::size_t i = 1; i < groups.size(); ++i) others.push_back(groups[i]->group);
    page.heading(groupText(t.group) + (others.empty() ? "" : fmt::format(", and {} more like it", others.size())));
    page.rawHtml(timelineTable(t));
    if (!others.empty())
      page.paragraph(fmt::format("The same states, each group with its own members: {}.", groupsLabel(others)), "muted");
  }
  if (!rest.empty()) {
    page.foldedTable(fmt::format("{} more kinds of groups, not drawn", rest.size()), {"groups", "divergent", "state"},
                     rest);
  }
}

// The per-rank timelines the report keeps (every rank of a small job, else the ranks the verdict
// names): one folded table per rank and group, oldest entry first.
void rankTimelinesSection(PageBuilder& page, const HangReport& r) {
  if (r.timelines.empty()) return;
  page.section("Per-rank timelines");
  page.paragraph(fmt::format("The last entries of {} rank-and-group timeline(s), oldest first, as each rank's dump "
                             "recorded them.",
                             r.timelines.size()),
                 "muted");
  auto sizes = [](const std::vector<std::vector<int64_t>>& shapes) {
    std::vector<std::string> out;
    for (const auto& shape : shapes) {
      std::vector<std::string> dims;
      for (int64_t d : shape) dims.push_back(std::to_string(d));
      out.push_back("[" + fmt::format("{}", fmt::join(dims, ",")) + "]");
    }
    return out.empty() ? std::string("—") : fmt::format("{}", fmt::join(out, " "));
  };
  for (std::size_t i = 0; i < r.timelines.size() && i < kListed; ++i) {
    const auto& t = r.timelines[i];
    std::vector<Row> rows;
    for (const auto& e : t.entries) {
      rows.push_back({Cell(seqText(e.seq) + (e.p2p ? " (p2p)" : ""), "num"), e.op,
                      Cell(e.state.empty() ? "unknown" : e.state, e.state.empty() ? "unknown" : e.state),
                      Cell(sizes(e.inputSizes), "mono"), Cell(sizes(e.outputSizes), "mono"), sinceText(e.timeCreatedNs)});
    }
    page.foldedTable(fmt::format("rank {}, group {}: {} entries", t.rank, t.pgName, t.entries.size()),
                     {"seq", "op", "state", "input sizes", "output sizes", "created (UTC)"}, rows);
  }
  if (r.timelines.size() > kListed)
    page.paragraph(fmt::format("{} more in the JSON report.", r.timelines.size() - kListed), "muted");
}

// ---- questions, groups, problems, inputs ----

void undecidedSection(PageBuilder& page, const HangReport& r) {
  if (r.undecided.empty()) return;
  page.section("Open questions");
  std::vector<Row> rows;
  for (std::size_t i = 0; i < r.undecided.size() && i < kListed; ++i) {
    const auto& u = r.undecided[i];
    rows.push_back({groupText(u.group), Cell(seqText(u.seq), "num"), ranksLabel(u.ranks), u.reason});
  }
  page.table({"group", "seq", "ranks", "what the dumps cannot settle"}, rows);
  if (r.undecided.size() > kListed)
    page.paragraph(fmt::format("{} more in the JSON report.", r.undecided.size() - kListed), "muted");
}

void groupsSection(PageBuilder& page, const HangReport& r) {
  page.section("Groups");
  using Key = std::tuple<std::string, std::size_t, int, std::optional<int64_t>, std::optional<int64_t>,
                         std::optional<int64_t>, std::optional<int64_t>>;
  std::map<Key, std::vector<HangGroupRef>> kinds;
  std::vector<Key> order;
  for (const auto& g : r.groups) {
    Key k{g.group.pgDesc, g.members.size(), g.dumps, g.lastCompletedByAll, g.firstDivergentSeq, g.minSeq, g.maxSeq};
    auto [it, fresh] = kinds.try_emplace(k);
    if (fresh) order.push_back(k);
    it->second.push_back(g.group);
  }
  std::vector<Row> rows;
  for (const auto& k : order) {
    const auto& [desc, members, dumps, done, divergent, lo, hi] = k;
    rows.push_back({groupsLabel(kinds.at(k)), Cell(std::to_string(members), "num"), Cell(std::to_string(dumps), "num"),
                    Cell(seqText(done), "num"), Cell(seqText(divergent), divergent ? "num warn" : "num"),
                    Cell(lo && hi ? fmt::format("#{}–#{}", *lo, *hi) : "—", "num")});
  }
  page.table({"groups", "members each", "dumps", "last completed by all", "first divergent", "seqs in the dumps"},
             rows);
}

void problemsSection(PageBuilder& page, const HangReport& r) {
  if (r.problems.empty()) return;
  page.section("Problems");
  std::vector<Row> rows;
  for (std::size_t i = 0; i < r.problems.size() && i < kListed; ++i) rows.push_back({r.problems[i]});
  page.table({"what was wrong with the input"}, rows);
  if (r.problems.size() > kListed)
    page.paragraph(fmt::format("{} more in the JSON report.", r.problems.size() - kListed), "muted");
}

// The files read: paths alike but for a trailing rank number are one line, "dumps/rank_<0-16383>".
void inputsSection(PageBuilder& page, const HangReport& r) {
  if (r.inputs.empty()) return;
  std::map<std::pair<std::string, std::string>, std::vector<int>> numbered;
  std::vector<std::pair<std::string, std::string>> order;
  std::vector<std::string> other;
  for (const auto& path : r.inputs) {
    std::string stem = path, suffix;
    for (const char* ext : {".json", ".pickle", ".pkl"}) {
      if (stem.size() > std::string(ext).size() && stem.ends_with(ext)) {
        suffix = ext, stem.resize(stem.size() - suffix.size());
        break;
      }
    }
    const std::size_t digits = stem.size() - std::min(stem.size(), stem.find_last_not_of("0123456789") + 1);
    if (digits == 0 || digits > 7) {
      other.push_back(path);
      continue;
    }
    const std::pair key{stem.substr(0, stem.size() - digits), suffix};
    auto [it, fresh] = numbered.try_emplace(key);
    if (fresh) order.push_back(key);
    it->second.push_back(std::stoi(stem.substr(stem.size() - digits)));
  }
  std::vector<Row> rows;
  for (const auto& k : order) {
    const auto& ranks = numbered.at(k);
    std::string list = formatRanges(ranks);
    if (list.size() > kRanksText) list = list.substr(0, list.rfind(',', kRanksText)) + ",…";
    rows.push_back(
        {Cell(fmt::format("{}<{}>{}", k.first, list, k.second), "mono"), Cell(std::to_string(ranks.size()), "num")});
  }
  for (const auto& p : other) rows.push_back({Cell(p, "mono"), Cell("1", "num")});
  page.foldedTable(fmt::format("Inputs: {} files", r.inputs.size()), {"files", "count"}, rows);
}

std::string baseName(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  if (name.size() > 5 && name.ends_with(".json")) name.resize(name.size() - 5);
  return name.empty() ? path : name;
}

}  // namespace

std::string renderHangReport(const HangReport& r, const std::string& name) {
  PageBuilder page(fmt::format("dsdiag hang: {}", baseName(name)), "hang");
  verdictSection(page, r);
  culpritsSection(page, r);
  noDumpSection(page, r);
  waitingSection(page, r);
  undecidedSection(page, r);
  timelinesSection(page, r);
  rankTimelinesSection(page, r);
  groupsSection(page, r);
  problemsSection(page, r);
  inputsSection(page, r);
  return page.render();
}

void writeHangReport(const HangReport& r, const std::string& name, const std::string& path) {
  writeTextAtomic(path, renderHangReport(r, name));
}

}  // namespace ds::report::html
