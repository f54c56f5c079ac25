// JUnit XML, the report format every CI system reads (Jenkins, GitLab, GitHub Actions' test
// reporters): one <testsuite> per tool run, one <testcase> per check. dsdiag --junit and dsreport
// check --junit write it.
//
// The dialect is the one of the Jenkins xUnit plugin's junit-10.xsd, which pytest --junitxml also
// writes and Jenkins, GitLab and the GitHub reporters read: <testsuites tests failures errors time>
// around <testsuite name tests failures errors skipped time [timestamp] [hostname]>, each
// <testcase classname name time> holding at most one of <failure>, <error>, <skipped> (with
// message and type attributes, the detail as text) and then <system-out>. reports/export/junit.xsd
// is the schema the tests validate against.
#pragma once

#include <string>
#include <vector>

#include "reports/baseline/check_schema.h"
#include "reports/diag/diag_schema.h"

namespace ds::report {

struct JunitCase {
  std::string classname;  // "dsdiag.net" (the check family) or "dsreport.check.node07"
  std::string name;       // "net.master_port_free" or the rule name
  std::string status;     // "pass", "fail", "error", "skip"
  std::string message;    // the one-line reason (failure/error/skipped message attribute)
  std::string detail;     // the body: what was found and what to do (a pass: its <system-out>)
  double seconds = 0;
  std::string type;  // the failure/error type attribute ("WARN", "FAIL", the rule kind); "" none
};

struct JunitSuite {
  std::string name;      // "dsdiag", "dsreport check"
  std::string hostname;  // "" left out
  std::string
      timestamp;  // ISO 8601; written in UTC without zone, as the schema wants ("" or not a time: left out)
  std::vector<JunitCase> cases;
};

// <?xml ...?><testsuites tests= failures= errors= time=><testsuite ... skipped=>...</testsuites>;
// every string escaped for XML (attributes and text), bytes that are not UTF-8 written as U+FFFD and
// characters that XML 1.0 forbids (control characters but tab, line feed and carriage return;
// U+FFFE, U+FFFF) dropped. An empty name or classname is written as "(unnamed)"; a status other than
// the four above is written as an error, so that it is seen. Throws nothing.
std::string junitXml(const std::vector<JunitSuite>& suites);

// dsreport check as JUnit (suite "dsreport check", timestamp the check's time): one test case per
// finding of each host (classname "dsreport.check.<host>", name "<rule> (<pattern>)"): a rule the host
// broke in k of n runs is a failure (type: the rule's kind), one it kept passes (a break in fewer than
// k runs is noted in its system-out), one that could not tell the figure from noise is skipped (type
// "cannot_judge"). A host's state is a case of its own ("results", "baseline" or "state") where the
// findings do not show it: no_result is an error, no_baseline and cannot_judge are skipped, a healthy
// or unhealthy host without findings passes or fails.
JunitSuite junitSuiteOfCheck(const CheckReport& report);
// junitXml of that one suite: what `dsreport check --junit FILE` writes.
std::string junitOfCheck(const CheckReport& report);

// How dsdiag's WARN findings show in JUnit. JUnit has no "warning" outcome: a warning is either a
// failure or a pass. It follows dsdiag's exit code (--fail-on), so that the CI's test view and the
// job's status agree: with --fail-on warn (the default, warnings exit 1) a warning is a <failure
// type="WARN">; with --fail-on fail (warnings exit 0) it passes, its message in <system-out>.
enum class JunitWarn { kFailure, kPass };

// dsdiag as JUnit (suite "dsdiag", hostname the report's host): one test case per finding
// (classname "dsdiag.<family>", name the check id, in world mode "<id> [rank R on HOST]"): PASS
// passes, FAIL is a <failure type="FAIL">, SKIP is <skipped>, WARN as `warn` says; a check that
// threw (its data has "check_error": true) is an <error>. In fleet mode a second suite, "dsdiag
// fleet", has a case per host (classname "dsdiag.fleet"): healthy passes, suspect fails with the
// evidence, no_result is an error; and a failed case per suspect link.
std::vector<JunitSuite> junitSuitesOfDiag(const DiagReport& report, JunitWarn warn,
                                          const std::string& timestamp);
std::string junitOfDiag(const DiagReport& report, JunitWarn warn, const std::string& timestamp);

// A tool run that could not produce results at all (dsdiag's exit 3): one suite with one error case,
// so that the CI shows why instead of "no test results found".
std::string junitOfToolError(const std::string& suite, const std::string& hostname,
                             const std::string& timestamp, const std::string& what);

// The current time as junit wants it: UTC, "2026-12-02T10:38:06".
std::string junitTimestampNow();

}  // namespace ds::report
