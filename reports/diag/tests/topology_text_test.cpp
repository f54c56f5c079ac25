// gpu.topology's matrix as the text report prints it (topo -m's layout), and what it does with data
// that is not a matrix.
#include "reports/diag/topology_text.h"

#include <gtest/gtest.h>

#include "reports/diag/diag_text.h"

namespace ds::report {
namespace {

nlohmann::json twoGpusTwoNics() {
  return {{"devices", {"GPU0", "GPU1", "NIC0", "NIC1"}},
          {"matrix",
           {{"X", "NV18", "PIX", "SYS"},
            {"NV18", "X", "SYS", "PIX"},
            {"PIX", "SYS", "X", "SYS"},
            {"SYS", "PIX", "SYS", "X"}}},
          {"gpus",
           {{{"index", 0}, {"cpu_affinity", "0-55"}, {"numa_node", 0}},
            {{"index", 1}, {"cpu_affinity", ""}, {"numa_node", -1}}}},
          {"nics", {{{"name", "mlx5_0"}}, {{"name", "mlx5_1"}}}}};
}

TEST(TopologyText, LaysTheMatrixOutAsTopoM) {
  auto lines = formatTopologyMatrix(twoGpusTwoNics());
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[0], "      GPU0  GPU1  NIC0  NIC1  CPU Affinity    NUMA Affinity");
  EXPECT_EQ(lines[1], "GPU0  X     NV18  PIX   SYS   0-55            0");
  EXPECT_EQ(lines[2], "GPU1  NV18  X     SYS   PIX   N/A             N/A");
  EXPECT_EQ(lines[3], "NIC0  PIX   SYS   X     SYS");
  EXPECT_EQ(lines[5].rfind("Legend: X = self, SYS = across NUMA nodes", 0), 0u) << lines[5];
  EXPECT_EQ(lines[6], "NIC Legend: NIC0: mlx5_0, NIC1: mlx5_1");
}

TEST(TopologyText, AnythingButAMatrixPrintsNothing) {
  EXPECT_TRUE(formatTopologyMatrix(nlohmann::json::object()).empty());
  EXPECT_TRUE(formatTopologyMatrix(nlohmann::json::array()).empty());
  auto ragged = twoGpusTwoNics();
  ragged["matrix"][2] = {"PIX"};
  EXPECT_TRUE(formatTopologyMatrix(ragged).empty());
  auto wrongTypes = twoGpusTwoNics();
  wrongTypes["gpus"] = "x";
  wrongTypes["nics"] = 3;
  EXPECT_EQ(formatTopologyMatrix(wrongTypes).size(), 6u);
}

TEST(TopologyText, TheReportPrintsItUnderTheRow) {
  DiagReport r;
  r.host = "node1";
  DiagRecord rec;
  rec.id = "gpu.topology";
  rec.family = "gpu";
  rec.message = "2 GPU(s), 2 NIC(s)";
  rec.data = twoGpusTwoNics();
  r.checks.push_back(rec);
  std::string text = formatDiagText(r);
  EXPECT_NE(text.find("PASS  gpu.topology  2 GPU(s), 2 NIC(s)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n                      GPU0  X     NV18  PIX   SYS   0-55            0\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ds::report
