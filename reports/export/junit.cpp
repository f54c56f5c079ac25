#include "reports/export/junit.h"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <map>

#include "engine/common/iso_time.h"
#include "reports/export/utf8.h"
#include "reports/html/dashboard_html.h"
#include "reports/json_io.h"

namespace ds::report {

namespace {

// XML 1.0's Char production: tab, line feed, carriage return, U+0020-U+D7FF, U+E000-U+FFFD,
// U+10000-U+10FFFF (surrogates never come out of the decoder).
bool xmlAllowed(char32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c != 0xFFFE && c != 0xFFFF);
}

// Escaped for element text (attribute = false) or a double-quoted attribute value. In attributes,
// tab, line feed and carriage return are written as character references, since a parser turns them
// into spaces otherwise; in text, carriage return is (a parser turns a raw one into a line feed).
std::string xmlEscape(std::string_view text, bool attribute) {
  std::string out;
  out.reserve(text.size());
  detail::forEachCodePoint(text, [&](char32_t c) {
    if (!xmlAllowed(c)) return;
    switch (c) {
      case '&':
        out += "&amp;";
        return;
      case '<':
        out += "&lt;";
        return;
      case '>':
        out += "&gt;";
        return;
      case '\r':
        out += "&#13;";
        return;
      default:
        break;
    }
    if (attribute) {
      switch (c) {
        case '"':
          out += "&quot;";
          return;
        case '\'':
          out += "&apos;";
          return;
        case '\n':
          out += "&#10;";
          return;
        case '\t':
          out += "&#9;";
          return;
        default:
          break;
      }
    }
    detail::appendUtf8(out, c);
  });
  return out;
}

std::string attr(std::string_view text) { return xmlEscape(text, true); }
std::string text(std::string_view t) { return xmlEscape(t, false); }
std::string nonEmpty(const std::string& s) { return s.empty() ? "(unnamed)" : s; }

std::string seconds(double s) { return fmt::format("{:.3f}", std::isfinite(s) && s > 0 ? s : 0.0); }

// "2026-12-02T10:38:06" (UTC, no zone, no fraction) or "" when `iso` is not a time.
std::string normalizedTimestamp(const std::string& iso) {
  double ms = 0;
  if (iso.empty() || !parseIsoTimeMs(iso, ms)) return "";
  std::time_t t = static_cast<std::time_t>(std::floor(ms / 1000));
  std::tm tm{};
  if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999) return "";
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm) == 0) return "";
  return buf;
}

enum class Outcome { kPass, kFailure, kError, kSkipped };
Outcome outcomeOf(const std::string& status) {
  if (status == "pass") return Outcome::kPass;
  if (status == "fail") return Outcome::kFailure;
  if (status == "skip") return Outcome::kSkipped;
  return Outcome::kError;  // "error", and any status a caller got wrong: shown, not hidden
}

std::string shortNum(double v) { return fmt::format("{:.4g}", v); }

}  // namespace

std::string junitXml(const std::vector<JunitSuite>& suites) {
  std::size_t tests = 0, failures = 0, errors = 0;
  double total = 0;
  std::string body;
  for (const auto& s : suites) {
    std::size_t f = 0, e = 0, sk = 0;
    double time = 0;
    std::string cases;
    for (const auto& c : s.cases) {
      const Outcome o = outcomeOf(c.status);
      f += o == Outcome::kFailure;
      e += o == Outcome::kError;
      sk += o == Outcome::kSkipped;
      if (std::isfinite(c.seconds) && c.seconds > 0) time += c.seconds;
      cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
                           attr(nonEmpty(c.classname)), attr(nonEmpty(c.name)), seconds(c.seconds));
      std::string inner;
      std::string typeText = c.type;
      if (o == Outcome::kError && c.status != "error" && typeText.empty())
        typeText = "unknown status " + c.status;
      const std::string type = typeText.empty() ? "" : fmt::format(" type=\"{}\"", attr(typeText));
      auto element = [&](const char* tag) {
        inner += fmt::format("      <{} message=\"{}\"{}", tag, attr(c.message), type);
        inner += c.detail.empty() ? std::string("/>\n") : fmt::format(">{}</{}>\n", text(c.detail), tag);
      };
      switch (o) {
        case Outcome::kFailure:
          element("failure");
          break;
        case Outcome::kError:
          element("error");
          break;
        case Outcome::kSkipped:
          element("skipped");
          break;
        case Outcome::kPass: {
          std::string out = c.message;
          if (!c.detail.empty()) out += (out.empty() ? "" : "\n") + c.detail;
          if (!out.empty()) inner += fmt::format("      <system-out>{}</system-out>\n", text(out));
          break;
        }
      }
      cases += inner.empty() ? std::string("/>\n") : ">\n" + inner + "    </testcase>\n";
    }
    std::string extra;
    if (const std::string ts = normalizedTimestamp(s.timestamp); !ts.empty())
      extra += fmt::format(" timestamp=\"{}\"", ts);
    if (!s.hostname.empty()) extra += fmt::format(" hostname=\"{}\"", attr(s.hostname));
    body += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\"{}",
        attr(nonEmpty(s.name)), s.cases.size(), f, e, sk, seconds(time), extra);
    body += cases.empty() ? std::string("/>\n") : ">\n" + cases + "  </testsuite>\n";
    tests += s.cases.size();
    failures += f;
    errors += e;
    total += time;
  }
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const std::string name = suites.empty() ? std::string("dsperf") : suites.front().name;
  out += fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{}\"",
                     attr(nonEmpty(name)), tests, failures, errors, seconds(total));
  out += body.empty() ? std::string("/>\n") : ">\n" + body + "</testsuites>\n";
  return out;
}

JunitSuite junitSuiteOfCheck(const CheckReport& report) {
  JunitSuite suite;
  suite.name = "dsreport check";
  suite.timestamp = report.time;
  for (const auto& h : report.hosts) {
    const std::string cls = "dsreport.check." + nonEmpty(h.host);
    bool anyFailed = false, anyBlind = false;
    for (const auto& f : h.findings) {
      JunitCase c;
      c.classname = cls;
      c.name = f.pattern.empty() ? nonEmpty(f.rule) : fmt::format("{} ({})", nonEmpty(f.rule), f.pattern);
      // A rule that could not tell the figure from noise neither passed nor failed: skipped, as JUnit
      // has no "inconclusive"; the check's exit code (4) still fails a gate.
      c.status = f.passed ? "pass" : f.cannotJudge ? "skip" : "fail";
      c.type = f.cannotJudge ? checkStateName(CheckState::kCannotJudge) : f.kind;
      c.message = f.text;
      c.detail =
          fmt::format("measured {} {}, expected {} {}, limit {} {} (rule {}, kind {})", shortNum(f.measured),
                      f.unit, shortNum(f.expected), f.unit, shortNum(f.threshold), f.unit, f.rule, f.kind);
      if (f.pooledRuns > 0) c.detail += fmt::format("\nmeasured is the mean of {} runs", f.pooledRuns);
      if (f.runs > 0)
        c.detail +=
            fmt::format("\nbroke the rule in {} of {} run(s); a host is unhealthy at {} of its last {}",
                        f.failedRuns, f.runs, report.k, report.n);
      if (f.cannotJudge)
        c.detail += fmt::format(
            "\ncannot judge: the baseline's run-to-run spread {} {} is too wide to tell the figure from a "
            "halved "
            "one; {}",
            shortNum(f.spread), f.unit,
            f.runsNeeded > 0
                ? fmt::format("the mean of {} runs of the host would (--n {})", f.runsNeeded, f.runsNeeded)
                : std::string("no number of the host's runs would"));
      anyFailed = anyFailed || broke(f);
      anyBlind = anyBlind || f.cannotJudge;
      suite.cases.push_back(std::move(c));
    }
    JunitCase state;
    state.classname = cls;
    state.message = h.summary;
    state.detail = fmt::format("host {} (SKU {}): {}", h.host, h.sku.empty() ? "unknown" : h.sku,
                               checkStateName(h.state));
    state.type = checkStateName(h.state);
    switch (h.state) {
      case CheckState::kNoResult:
        state.name = "results";
        state.status = "error";
        if (state.message.empty()) state.message = "No results reported";
        break;
      case CheckState::kNoBaseline:
        state.name = "baseline";
        state.status = "skip";
        if (state.message.empty()) state.message = "No baseline yet for this host's SKU and pattern";
        break;
      case CheckState::kUnhealthy:
        state.name = "state";
        state.status = "fail";
        if (anyFailed) continue;  // the failed findings show it
        break;
      case CheckState::kCannotJudge:
        state.name = "state";
        state.status = "skip";
        if (anyBlind) continue;  // the skipped findings show it
        break;
      case CheckState::kHealthy:
        state.name = "state";
        state.status = "pass";
        if (!h.findings.empty()) continue;
        break;
    }
    suite.cases.push_back(std::move(state));
  }
  return suite;
}

std::string junitOfCheck(const CheckReport& report) { return junitXml({junitSuiteOfCheck(report)}); }

namespace {

std::string evidenceText(const std::vector<Evidence>& evidence) {
  std::string out;
  for (const auto& e : evidence)
    out += fmt::format("{}[{}, stage {}] {}", out.empty() ? "" : "\n", e.kind, e.stage, e.text);
  return out;
}

std::string evidenceKinds(const std::vector<Evidence>& evidence) {
  std::string out;
  for (const auto& e : evidence)
    if (out.find(e.kind) == std::string::npos) out += (out.empty() ? "" : ",") + e.kind;
  return out;
}

}  // namespace

std::vector<JunitSuite> junitSuitesOfDiag(const DiagReport& report, JunitWarn warn,
                                          const std::string& timestamp) {
  std::vector<JunitSuite> suites;
  JunitSuite s;
  s.name = "dsdiag";
  s.hostname = report.host;
  s.timestamp = timestamp;
  const bool world = report.mode == "world";
  for (const auto& r : report.checks) {
    JunitCase c;
    c.classname = r.family.empty() ? "dsdiag" : "dsdiag." + r.family;
    c.name = nonEmpty(r.id);
    if (world && r.rank >= 0) c.name += fmt::format(" [rank {} on {}]", r.rank, r.host);
    c.message = r.message;
    std::string detail = r.message;
    if (!r.remedy.empty()) detail += "\nWhat to do: " + r.remedy;
    if (r.data.is_object() && !r.data.empty()) detail += "\ndata: " + dumpJson(r.data);
    const bool threw = r.data.is_object() && r.data.contains("check_error") &&
                       r.data["check_error"].is_boolean() && r.data["check_error"].get<bool>();
    switch (r.status) {
      case DiagStatus::kPass:
        c.status = "pass";
        c.message.clear();
        c.detail = detail;
        break;
      case DiagStatus::kSkip:
        c.status = "skip";
        c.detail = detail;
        break;
      case DiagStatus::kWarn:
        if (warn == JunitWarn::kFailure) {
          c.status = "fail";
          c.type = "WARN";
          c.detail = detail;
        } else {
          c.status = "pass";
          c.message.clear();
          c.detail = "WARN: " + detail;
        }
        break;
      case DiagStatus::kFail:
        c.status = threw ? "error" : "fail";
        c.type = threw ? "check_error" : "FAIL";
        c.detail = detail;
        break;
    }
    s.cases.push_back(std::move(c));
  }
  for (int rank : report.missingRanks) {
    JunitCase c;
    c.classname = "dsdiag.world";
    c.name = fmt::format("world.report [rank {}]", rank);
    c.status = "error";
    c.type = "no_result";
    c.message = fmt::format("rank {} never reported its checks", rank);
    s.cases.push_back(std::move(c));
  }
  suites.push_back(std::move(s));
  if (report.fleet) {
    const FleetJudgement& j = report.fleet->judgement;
    JunitSuite f;
    f.name = "dsdiag fleet";
    f.hostname = report.host;
    f.timestamp = timestamp;
    for (const auto& h : j.hosts) {
      JunitCase c;
      c.classname = "dsdiag.fleet";
      c.name = nonEmpty(h.host);
      std::string ranks;
      for (int r : h.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      c.detail = evidenceText(h.evidence);
      if (!h.ncclSocketIfname.empty())
        c.detail += (c.detail.empty() ? "" : "\n") + std::string("recommended NCCL_SOCKET_IFNAME=") +
                    h.ncclSocketIfname;
      c.detail += (c.detail.empty() ? "" : "\n") + fmt::format("ranks {}", ranks.empty() ? "none" : ranks);
      c.message = h.evidence.empty() ? std::string(hostStateName(h.state)) : h.evidence.front().text;
      c.type = evidenceKinds(h.evidence);
      switch (h.state) {
        case HostState::kHealthy:
          c.status = "pass";
          c.message.clear();
          break;
        case HostState::kSuspect:
          c.status = "fail";
          break;
        case HostState::kNoResult:
          c.status = "error";
          if (c.type.empty()) c.type = "no_result";
          break;
      }
      f.cases.push_back(std::move(c));
    }
    for (const auto& l : j.links) {
      JunitCase c;
      c.classname = "dsdiag.fleet.link";
      c.name = fmt::format("{} - {}", l.hostA, l.hostB);
      c.status = "fail";
      c.type = evidenceKinds(l.evidence);
      c.message = l.evidence.empty() ? std::string("suspect link") : l.evidence.front().text;
      c.detail = evidenceText(l.evidence) + fmt::format("\nranks {} and {}", l.rankA, l.rankB);
      f.cases.push_back(std::move(c));
    }
    suites.push_back(std::move(f));
  }
  return suites;
}

std::string junitOfDiag(const DiagReport& report, JunitWarn warn, const std::string& timestamp) {
  return junitXml(junitSuitesOfDiag(report, warn, timestamp));
}

std::string junitOfToolError(const std::string& suite, const std::string& hostname,
                             const std::string& timestamp, const std::string& what) {
  JunitSuite s;
  s.name = suite;
  s.hostname = hostname;
  s.timestamp = timestamp;
  JunitCase c;
  c.classname = suite;
  c.name = suite + " run";
  c.status = "error";
  c.type = "tool_error";
  c.message = what;
  c.detail = suite + " could not run its checks: " + what;
  s.cases.push_back(std::move(c));
  return junitXml({s});
}

std::string junitTimestampNow() {
  std::string t = isoUtcNow();  // JUnit's timestamp has no zone: drop the 'Z'
  if (!t.empty() && t.back() == 'Z') t.pop_back();
  return t;
}

}  // namespace ds::report
