// JUnit XML, the report format every CI system reads (Jenkins, GitLab, GitHub Actions' test
// reporters): one <testsuite> per tool run, one <testcase> per check. dsdiag --junit and dsreport
// check --junit write it.
#pragma once

#include <string>
#include <vector>

namespace ds::report {

struct JunitCase {
  std::string classname;  // "dsdiag.net" (the check family) or "dsreport.check.node07"
  std::string name;       // "net.master_port_free" or the rule name
  std::string status;     // "pass", "fail", "error", "skip"
  std::string message;    // the one-line reason (failure/error/skipped message attribute)
  std::string detail;     // the body: what was found and what to do
  double seconds = 0;
};

struct JunitSuite {
  std::string name;       // "dsdiag", "dsreport check"
  std::string hostname;
  std::string timestamp;  // ISO 8601 without zone, as the schema wants
  std::vector<JunitCase> cases;
};

// <?xml ...?><testsuites tests= failures= errors= skipped=><testsuite ...>...</testsuites>; every
// string escaped for XML (attributes and text), control characters that XML 1.0 forbids dropped.
std::string junitXml(const std::vector<JunitSuite>& suites);

}  // namespace ds::report
