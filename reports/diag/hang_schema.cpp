#include "reports/diag/hang_schema.h"

#include <fmt/format.h>

#include <ctime>

#include "engine/common/error.h"
#include "reports/input_file.h"
#include "reports/json_io.h"
#include "reports/schema/schema_version.h"

namespace ds::report {

using nlohmann::json;

namespace {

constexpr const char* kVerdictNames[] = {"culprit_found", "no_fault_found", "cannot_decide"};
constexpr const char* kKindNames[] = {"never_entered",  "mismatched_op",  "mismatched_size",
                                      "mismatched_dtype", "p2p_unmatched", "stalled_host",
                                      "stalled_device", "blocked_by_other_group", "no_dump"};
constexpr const char* kCellNames[] = {"completed", "started", "scheduled", "not_entered", "no_dump", "unknown"};

std::string joined(const auto& names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace

const char* hangVerdictName(HangVerdict v) { return kVerdictNames[static_cast<int>(v)]; }

HangVerdict parseHangVerdict(const std::string& s) {
  for (int i = 0; i < 3; ++i)
    if (s == kVerdictNames[i]) return static_cast<HangVerdict>(i);
  throw ConfigError(fmt::format("'{}' is not a hang verdict; expected {}.", s, joined(kVerdictNames)));
}

int hangExitCode(HangVerdict v) {
  switch (v) {
    case HangVerdict::kNoFaultFound:
      return 0;
    case HangVerdict::kCannotDecide:
      return 1;
    case HangVerdict::kCulpritFound:
      return 2;
  }
  return kHangBadInputExit;
}

const char* faultKindName(FaultKind k) { return kKindNames[static_cast<int>(k)]; }

FaultKind parseFaultKind(const std::string& s) {
  for (int i = 0; i < static_cast<int>(std::size(kKindNames)); ++i)
    if (s == kKindNames[i]) return static_cast<FaultKind>(i);
  throw ConfigError(fmt::format("'{}' is not a fault kind; expected {}.", s, joined(kKindNames)));
}

const char* hangCellName(HangCell c) { return kCellNames[static_cast<int>(c)]; }

HangCell parseHangCell(const std::string& s) {
  for (int i = 0; i < static_cast<int>(std::size(kCellNames)); ++i)
    if (s == kCellNames[i]) return static_cast<HangCell>(i);
  throw ConfigError(fmt::format("'{}' is not a timeline cell; expected {}.", s, joined(kCellNames)));
}

std::string hangIsoTime(int64_t ns) {
  // 2000-01-01 and 2200-01-01 in seconds: outside them the value is not a wall-clock time.
  const int64_t s = ns / 1'000'000'000;
  if (s < 946'684'800 || s > 7'258'118'400) return "";
  std::time_t t = static_cast<std::time_t>(s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---- writing ----

namespace {

json groupJson(const HangGroupRef& g) { return json{{"pg_name", g.pgName}, {"pg_desc", g.pgDesc}}; }

json evidenceJson(const std::vector<HangEvidence>& ev) {
  json a = json::array();
  for (const auto& e : ev) a.push_back(json{{"claim", e.claim}, {"file", e.file}, {"detail", e.detail}});
  return a;
}

json culpritJson(const HangCulprit& c) {
  return json{{"rank", c.rank},       {"host", c.host},       {"group", groupJson(c.group)},
              {"pg_id", c.pgId},      {"seq", jsonOrNull(c.seq)},    {"p2p", c.p2p},
              {"op", c.op},           {"kind", faultKindName(c.kind)}, {"summary", c.summary},
              {"evidence", evidenceJson(c.evidence)}};
}

json waitingJson(const HangWaiting& w) {
  const std::string since = w.sinceNs ? hangIsoTime(*w.sinceNs) : "";
  return json{{"group", groupJson(w.group)},
              {"seq", jsonOrNull(w.seq)},
              {"p2p", w.p2p},
              {"op", w.op},
              {"ranks", w.ranks},
              {"since_ns", jsonOrNull(w.sinceNs)},
              // Derived from since_ns for readers (jq, dashboards); not read back.
              {"since", since.empty() ? json(nullptr) : json(since)},
              {"waits_for", w.waitsFor},
              {"blocked_by_other_group", w.blockedByOtherGroup},
              {"reason", w.reason},
              {"chain_ends_at", w.chainEndsAt}};
}

json groupTimelineJson(const HangGroupTimeline& t) {
  json rows = json::array();
  for (const auto& r : t.rows) {
    json cells = json::array();
    for (HangCell c : r.cells) cells.push_back(hangCellName(c));
    rows.push_back(json{{"ranks", r.ranks}, {"cells", std::move(cells)}, {"mismatched_seqs", r.mismatchedSeqs}});
  }
  return json{{"group", groupJson(t.group)},
              {"first_seq", t.firstSeq},
              {"ops", t.ops},
              {"divergent_seq", jsonOrNull(t.divergentSeq)},
              {"rows", std::move(rows)}};
}

json timelineJson(const HangTimeline& t) {
  json entries = json::array();
  for (const auto& e : t.entries) {
    entries.push_back(json{{"seq", jsonOrNull(e.seq)},
                           {"p2p", e.p2p},
                           {"op", e.op},
                           {"state", e.state},
                           {"input_sizes", e.inputSizes},
                           {"output_sizes", e.outputSizes},
                           {"time_created_ns", jsonOrNull(e.timeCreatedNs)}});
  }
  return json{{"rank", t.rank}, {"pg_name", t.pgName}, {"entries", std::move(entries)}};
}

}  // namespace

json toJson(const HangReport& r) {
  json culprits = json::array(), noDump = json::array(), waiting = json::array(), groups = json::array(),
       undecided = json::array(), timelines = json::array(), groupTimelines = json::array();
  for (const auto& c : r.culprits) culprits.push_back(culpritJson(c));
  for (const auto& n : r.noDump) {
    noDump.push_back(json{{"rank", n.rank},
                          {"host", n.host},
                          {"group", groupJson(n.group)},
                          {"last_seen_seq", jsonOrNull(n.lastSeenSeq)},
                          {"detail", n.detail}});
  }
  for (const auto& w : r.waiting) waiting.push_back(waitingJson(w));
  for (const auto& g : r.groups) {
    groups.push_back(json{{"group", groupJson(g.group)},
                          {"members", g.members},
                          {"dumps", g.dumps},
                          {"min_seq", jsonOrNull(g.minSeq)},
                          {"max_seq", jsonOrNull(g.maxSeq)},
                          {"last_completed_by_all", jsonOrNull(g.lastCompletedByAll)},
                          {"first_divergent_seq", jsonOrNull(g.firstDivergentSeq)}});
  }
  for (const auto& u : r.undecided) {
    undecided.push_back(
        json{{"group", groupJson(u.group)}, {"seq", jsonOrNull(u.seq)}, {"ranks", u.ranks}, {"reason", u.reason}});
  }
  for (const auto& t : r.timelines) timelines.push_back(timelineJson(t));
  for (const auto& t : r.groupTimelines) groupTimelines.push_back(groupTimelineJson(t));
  return json{{"schema", kHangSchemaName},
              {"schema_version", kHangSchemaVersion},
              {"verdict", hangVerdictName(r.verdict)},
              {"exit_code", hangExitCode(r.verdict)},  // derived from verdict; not read back
              {"headline", r.headline},
              {"world_size", r.worldSize},
              {"dumps_read", r.dumpsRead},
              {"culprits", std::move(culprits)},
              {"no_dump", std::move(noDump)},
              {"waiting", std::move(waiting)},
              {"groups", std::move(groups)},
              {"undecided", std::move(undecided)},
              {"problems", r.problems},
              {"inputs", r.inputs},
              {"timelines", std::move(timelines)},
              {"group_timelines", std::move(groupTimelines)}};
}

// ---- reading ----

namespace {

// Reads one report; every field is required (null where the record holds an optional). A json
// exception from a field carries its pointer (JSON_DIAGNOSTICS), which hangReportFromJson turns into
// a ConfigError; `bad` reports values of the right type that make no sense.
struct HangReader {
  const std::string& origin;
  int minor = 0;  // of the file's schema_version: 1.1's fields are required from 1.1 on

  [[noreturn]] void bad(const std::string& at, const std::string& problem) const {
    throw ConfigError(fmt::format("{}: at {}: {}. It is not a valid dsdiag hang report: it was changed or "
                                  "damaged after it was written; regenerate it with `dsdiag hang ... --json FILE`.",
                                  origin, at, problem));
  }

  const json& array(const json& j, const char* key) const {
    const json& a = j.at(key);
    if (!a.is_array())
      throw json::type_error::create(302, std::string("type must be array, but is ") + a.type_name(), &a);
    return a;
  }

  template <class T>
  std::optional<T> optInt(const json& j, const char* key) const {
    const json& v = j.at(key);
    if (v.is_null()) return std::nullopt;
    return readInt<T>(v);
  }

  int rank(const json& j, const char* key, const std::string& at) const {
    int r = readInt<int>(j.at(key));
    if (r < 0) bad(at + "/" + key, fmt::format("rank {} is not a rank (ranks count from 0)", r));
    return r;
  }

  std::vector<int> ranks(const json& j, const char* key, const std::string& at) const {
    std::vector<int> out;
    readTo(j.at(key), out);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (out[i] < 0) bad(fmt::format("{}/{}/{}", at, key, i), fmt::format("rank {} is not a rank", out[i]));
    return out;
  }

  template <class E>
  E parse(const json& j, const char* key, const std::string& at, E (*parseFn)(const std::string&)) const {
    try {
      return parseFn(j.at(key).get<std::string>());
    } catch (const ConfigError& e) {
      bad(at + "/" + key, e.what());
    }
  }

  HangGroupRef group(const json& j) const {
    const json& g = j.at("group");
    HangGroupRef r;
    readTo(g.at("pg_name"), r.pgName);
    readTo(g.at("pg_desc"), r.pgDesc);
    return r;
  }

  HangCulprit culprit(const json& j, const std::string& at) const {
    HangCulprit c;
    c.rank = rank(j, "rank", at);
    readTo(j.at("host"), c.host);
    c.group = group(j);
    readTo(j.at("pg_id"), c.pgId);
    c.seq = optInt<int64_t>(j, "seq");
    readTo(j.at("p2p"), c.p2p);
    readTo(j.at("op"), c.op);
    c.kind = parse(j, "kind", at, &parseFaultKind);
    readTo(j.at("summary"), c.summary);
    for (const auto& e : array(j, "evidence")) {
      HangEvidence ev;
      readTo(e.at("claim"), ev.claim);
      readTo(e.at("file"), ev.file);
      readTo(e.at("detail"), ev.detail);
      c.evidence.push_back(std::move(ev));
    }
    return c;
  }

  HangNoDump noDump(const json& j, const std::string& at) const {
    HangNoDump n;
    n.rank = rank(j, "rank", at);
    readTo(j.at("host"), n.host);
    n.group = group(j);
    n.lastSeenSeq = optInt<int64_t>(j, "last_seen_seq");
    readTo(j.at("detail"), n.detail);
    return n;
  }

  HangWaiting waiting(const json& j, const std::string& at) const {
    HangWaiting w;
    w.group = group(j);
    w.seq = optInt<int64_t>(j, "seq");
    readTo(j.at("p2p"), w.p2p);
    readTo(j.at("op"), w.op);
    w.ranks = ranks(j, "ranks", at);
    w.sinceNs = optInt<int64_t>(j, "since_ns");
    w.waitsFor = ranks(j, "waits_for", at);
    readTo(j.at("blocked_by_other_group"), w.blockedByOtherGroup);
    readTo(j.at("reason"), w.reason);
    if (minor >= 1) w.chainEndsAt = ranks(j, "chain_ends_at", at);
    return w;
  }

  HangGroup groupSummary(const json& j, const std::string& at) const {
    HangGroup g;
    g.group = group(j);
    g.members = ranks(j, "members", at);
    g.dumps = readInt<int>(j.at("dumps"));
    if (g.dumps < 0) bad(at + "/dumps", fmt::format("{} dumps cannot be", g.dumps));
    g.minSeq = optInt<int64_t>(j, "min_seq");
    g.maxSeq = optInt<int64_t>(j, "max_seq");
    g.lastCompletedByAll = optInt<int64_t>(j, "last_completed_by_all");
    g.firstDivergentSeq = optInt<int64_t>(j, "first_divergent_seq");
    return g;
  }

  HangUndecided undecided(const json& j, const std::string& at) const {
    HangUndecided u;
    u.group = group(j);
    u.seq = optInt<int64_t>(j, "seq");
    u.ranks = ranks(j, "ranks", at);
    readTo(j.at("reason"), u.reason);
    return u;
  }

  HangTimeline timeline(const json& j, const std::string& at) const {
    HangTimeline t;
    t.rank = rank(j, "rank", at);
    readTo(j.at("pg_name"), t.pgName);
    for (const auto& e : array(j, "entries")) {
      HangTimelineEntry x;
      x.seq = optInt<int64_t>(e, "seq");
      readTo(e.at("p2p"), x.p2p);
      readTo(e.at("op"), x.op);
      readTo(e.at("state"), x.state);
      for (const auto& s : array(e, "input_sizes")) readTo(s, x.inputSizes.emplace_back());
      for (const auto& s : array(e, "output_sizes")) readTo(s, x.outputSizes.emplace_back());
      x.timeCreatedNs = optInt<int64_t>(e, "time_created_ns");
      t.entries.push_back(std::move(x));
    }
    return t;
  }

  HangGroupTimeline groupTimeline(const json& j, const std::string& at) const {
    HangGroupTimeline t;
    t.group = group(j);
    t.firstSeq = readInt<int64_t>(j.at("first_seq"));
    readTo(j.at("ops"), t.ops);
    t.divergentSeq = optInt<int64_t>(j, "divergent_seq");
    const json& rows = array(j, "rows");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::string where = fmt::format("{}/rows/{}", at, i);
      HangTimelineRow r;
      r.ranks = ranks(rows[i], "ranks", where);
      const json& cells = array(rows[i], "cells");
      for (std::size_t c = 0; c < cells.size(); ++c) {
        try {
          r.cells.push_back(parseHangCell(cells[c].get<std::string>()));
        } catch (const ConfigError& e) {
          bad(fmt::format("{}/cells/{}", where, c), e.what());
        }
      }
      if (r.cells.size() != t.ops.size())
        bad(where + "/cells", fmt::format("{} cells for {} columns", r.cells.size(), t.ops.size()));
      readTo(rows[i].at("mismatched_seqs"), r.mismatchedSeqs);
      t.rows.push_back(std::move(r));
    }
    return t;
  }

  template <class T, class F>
  std::vector<T> list(const json& j, const char* key, F read) const {
    std::vector<T> out;
    const json& a = array(j, key);
    for (std::size_t i = 0; i < a.size(); ++i) out.push_back((this->*read)(a[i], fmt::format("/{}/{}", key, i)));
    return out;
  }

  HangReport report(const json& j) {
    if (!j.is_object()) bad("the top level", fmt::format("expected a hang report object, found {}", j.type_name()));
    const std::string schema = textOr(j, "schema", "");
    if (schema != kHangSchemaName)
      bad("/schema", fmt::format("the schema is '{}', expected '{}'", schema, kHangSchemaName));
    minor = checkSchemaVersion(j, kHangSchemaName, origin).minor;
    HangReport r;
    r.verdict = parse(j, "verdict", "", &parseHangVerdict);
    readTo(j.at("headline"), r.headline);
    r.worldSize = readInt<int>(j.at("world_size"));
    r.dumpsRead = readInt<int>(j.at("dumps_read"));
    if (r.worldSize < 0 || r.dumpsRead < 0)
      bad("/world_size", fmt::format("world_size {} and dumps_read {} must be >= 0", r.worldSize, r.dumpsRead));
    r.culprits = list<HangCulprit>(j, "culprits", &HangReader::culprit);
    r.noDump = list<HangNoDump>(j, "no_dump", &HangReader::noDump);
    r.waiting = list<HangWaiting>(j, "waiting", &HangReader::waiting);
    r.groups = list<HangGroup>(j, "groups", &HangReader::groupSummary);
    r.undecided = list<HangUndecided>(j, "undecided", &HangReader::undecided);
    readTo(j.at("problems"), r.problems);
    readTo(j.at("inputs"), r.inputs);
    r.timelines = list<HangTimeline>(j, "timelines", &HangReader::timeline);
    if (minor >= 1) r.groupTimelines = list<HangGroupTimeline>(j, "group_timelines", &HangReader::groupTimeline);
    if ((r.verdict == HangVerdict::kCulpritFound) != !r.culprits.empty())
      bad("/verdict", fmt::format("verdict {} with {} culprits", hangVerdictName(r.verdict), r.culprits.size()));
    return r;
  }
};

}  // namespace

std::optional<HangReport> readHangReportFile(const std::string& path) {
  const std::string text = readInputFile(path);
  // A cheap look before parsing (a run file of 100 MB is not parsed twice to learn it is not this):
  // some "schema" key whose value is "dsperf.hang".
  auto namesHang = [&text] {
    for (std::size_t at = text.find("\"schema\""); at != std::string::npos; at = text.find("\"schema\"", at + 1)) {
      std::size_t p = text.find_first_not_of(" \t\r\n", at + 8);
      if (p == std::string::npos || text[p] != ':') continue;
      p = text.find_first_not_of(" \t\r\n", p + 1);
      if (p != std::string::npos && text.compare(p, 13, "\"dsperf.hang\"") == 0) return true;
    }
    return false;
  };
  if (!namesHang()) return std::nullopt;
  const json doc = parseJsonText(text, path);
  if (!doc.is_object() || textOr(doc, "schema", "") != kHangSchemaName) return std::nullopt;
  return hangReportFromJson(doc, path);
}

HangReport hangReportFromJson(const json& j, const std::string& origin) {
  HangReader reader{origin};
  try {
    return reader.report(j);
  } catch (const json::exception& e) {
    throw jsonFieldError(e, j, origin, kHangSchemaName);
  }
}

}  // namespace ds::report
