// The fleet dashboard page as text (its drawing is the browser test's): every string from the history
// (host names, SKUs, pattern titles, check summaries and rules, the database path) is escaped, the
// page data is script-safe, and the cells travel as base64.
#include <gtest/gtest.h>

#include "reports/history/fleet_data.h"
#include "reports/html/fleet_dashboard_html.h"

namespace ds::report::html {
namespace {

const char* kXss =
    "<img src=x onerror=\"document.body.dataset.pwned='1'\"><script>document.body.dataset.pwned='2'</script>";

history::FleetData hostileFleet() {
  history::FleetData d;
  d.dbPath = "<script>db</script>.sqlite";
  d.hosts = {kXss, "gpu002"};
  std::sort(d.hosts.begin(), d.hosts.end());
  d.skus = {"cpu=<b>bold</b>"};
  d.hostSku = {0, 0};
  d.columns = {{1.7e12, 1.7e12, 2}, {1.7e12 + 864e5, 1.7e12 + 864e5, 2}};
  d.columnWidthMs = 864e5;
  d.runs = 4;
  history::FleetPattern p;
  p.key = "busbw allreduce nccl f32 sum 1073741824 out w8";
  p.title = "<i>title</i>";
  p.unit = "GB/s";
  p.cells = {100, 50, 255, 100};
  p.medians = {{10, 10}};
  p.fleetMedian = {10, 10};
  p.hosts = 2;
  p.drift = {{0, 4, 10, 5, -50, -50, 50}};
  d.patterns = {p};
  history::HostCheckRecord bad;
  bad.host = kXss;
  bad.state = "unhealthy";
  bad.time = "2026-01-01T00:00:00Z";
  bad.rule = "<u>rule</u>";
  bad.summary = "ERROR: <img src=y onerror=alert(1)>";
  d.hostChecks.resize(2);
  d.hostChecks[0] = {"uu", 2, bad, bad};
  d.quarantine = {{kXss, 2, 2, bad, bad}};
  d.checks = 2;
  return d;
}

TEST(FleetDashboardHtml, EveryStringFromTheHistoryIsEscaped) {
  const std::string page = renderFleetDashboard(hostileFleet());
  for (const char* raw : {"<img", "<script>db", "<script>document", "<b>bold", "<i>title", "<u>rule"})
    EXPECT_EQ(page.find(raw), std::string::npos) << raw << " reached the page unescaped";
  EXPECT_NE(page.find("&lt;i&gt;title&lt;/i&gt;"), std::string::npos) << "the pattern's title in the picker";
  EXPECT_NE(page.find("&lt;u&gt;rule&lt;/u&gt;"), std::string::npos) << "the rule in the quarantine table";
  EXPECT_NE(page.find("&lt;script&gt;db&lt;/script&gt;.sqlite"), std::string::npos);
  // A name with spaces and quotes cannot be in a Slurm hostlist: the page says so (escaped).
  EXPECT_NE(page.find("cannot stand in a Slurm hostlist"), std::string::npos);
  EXPECT_NE(page.find("<pre id=\"fl-exclude\" class=\"mono exclude\"></pre>"), std::string::npos);
  // The data block: \u003c for '<', the cells as base64 (100, 50, 255, 100).
  EXPECT_NE(page.find("\\u003cimg src=x"), std::string::npos);
  EXPECT_NE(page.find("\"cells\":\"ZDL/ZA==\""), std::string::npos);
  EXPECT_NE(page.find("data-page=\"fleet-dashboard\""), std::string::npos);
}

// Each host's last verdicts are spelled out in the page's data, cannot_judge ('j') among them.
TEST(FleetDashboardHtml, CheckStatesAreSpelledOutCannotJudgeToo) {
  history::FleetData d = hostileFleet();
  d.hostChecks[1] = {"hjb", 0, {}, {}};
  const std::string page = renderFleetDashboard(d);
  EXPECT_NE(page.find("\"healthy, cannot judge, no baseline\""), std::string::npos);
  EXPECT_NE(page.find("\"unhealthy, unhealthy\""), std::string::npos);
  EXPECT_NE(page.find("cannot judge (too noisy to tell) are not failures"), std::string::npos);
}

TEST(FleetDashboardHtml, AnEmptyHistorySaysWhatToIngest) {
  history::FleetData d;
  d.dbPath = "h.sqlite";
  const std::string page = renderFleetDashboard(d);
  EXPECT_NE(page.find("No per-host samples in the history"), std::string::npos);
  EXPECT_NE(page.find("No checks in the history"), std::string::npos);
}

TEST(FleetDashboardHtml, Base64IsRfc4648) {
  auto b = [](const std::string& s) {
    return base64(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  };
  EXPECT_EQ(b(""), "");
  EXPECT_EQ(b("f"), "Zg==");
  EXPECT_EQ(b("fo"), "Zm8=");
  EXPECT_EQ(b("foo"), "Zm9v");
  EXPECT_EQ(b("foobar"), "Zm9vYmFy");
  const std::uint8_t high[] = {0xff, 0xfe, 0xfd};
  EXPECT_EQ(base64(high, 3), "//79");
}

}  // namespace
}  // namespace ds::report::html
