// Inputs of the export tests: sweeps, fleet-mode dsdiag results and check reports with hostile text,
// and the real parsers the outputs are read back with (xmllint, promtool, prometheus_client).
#pragma once

#include <string>
#include <vector>

#include "engine/testing/subprocess.h"
#include "reports/baseline/check_schema.h"
#include "reports/diag/diag_schema.h"
#include "reports/sweep/sweep_schema.h"

namespace ds::report::testfix {

// A host name no sane system has, with everything the formats must escape or drop: a double quote,
// a backslash, a line feed, a carriage return, a tab, <&>, an apostrophe, C0 controls, DEL, a byte
// that is not UTF-8, and a valid non-ASCII letter.
inline const std::string kHostileHost = "node\"7\\x\ny\r\tz<&>'\x01\x1b\x7f\xff\xc3\xa9";
// The same as a Prometheus parser reads the label back: \ " and line feed kept, other controls and
// the stray byte replaced by U+FFFD.
inline const std::string kHostileHostProm =
    "node\"7\\x\ny\xef\xbf\xbd\xef\xbf\xbdz<&>'\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9";
// As an XML parser reads it back from an attribute: tab, line feed and carriage return kept (written
// as character references), the C0 controls XML 1.0 forbids dropped, DEL kept (XML allows it), the
// stray byte U+FFFD.
inline const std::string kHostileHostXml = "node\"7\\x\ny\r\tz<&>'\x7f\xef\xbf\xbd\xc3\xa9";

// One sweep row measured out of place.
SweepMeasurement row(const std::string& collective, std::size_t bytes, double busBw, int worldSize = 2);
// A sweep on `hosts` (one: a host's run; several: a job's) started at `start`, with the given rows.
SweepRun sweep(const std::vector<std::string>& hosts, const std::string& start,
               std::vector<SweepMeasurement> rows, const std::string& label = "");
// A fleet-mode dsdiag report of hosts a, b, c... (one rank each): every pair measured at `gbps` and
// 20 us, except pairs with the last host at `slowGbps`; the last host suspect, with evidence.
DiagReport fleetDiag(const std::vector<std::string>& hosts, double gbps, double slowGbps);
// A local dsdiag report with one finding of each status, a check that threw, and hostile text.
DiagReport localDiag();
// A check report with a host in each state (healthy, unhealthy, no_baseline, no_result, cannot_judge)
// and the hostile host.
CheckReport checkReport();

// Writes `doc` to dir/name atomically and returns the path.
std::string writeDoc(const ds::testing::TempDir& dir, const std::string& name, const nlohmann::json& doc);

// The tools, or "" when not installed.
std::string xmllint();
std::string promtool();
// A python3 that can import prometheus_client (Debian's /usr/bin/python3 first), or "".
std::string prometheusPython();

// xmllint --noout --schema reports/export/junit.xsd FILE.
ds::testing::RunResult validateJunit(const std::string& file);
// The value of an XPath expression on FILE (xmllint --xpath), e.g. "count(//failure)" or
// "string(//testcase[1]/@name)".
std::string xpath(const std::string& file, const std::string& expr);

}  // namespace ds::report::testfix
