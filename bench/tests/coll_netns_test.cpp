// Two hosts inside one machine: `dsbench coll` across two network namespaces joined by a veth pair
// (10.77.y.1 and 10.77.y.2), each with its own hostname (a UTS namespace), as a cluster runs it:
// once with `dsrun --nnodes 2` (one dsrun per "host") and once with mpirun, whose rsh agent enters
// the namespace in place of ssh. Needs root (ip netns); skips with the reason otherwise.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "engine/testing/subprocess.h"
#include "engine/testing/two_hosts.h"
#include "reports/json_io.h"
#include "reports/sweep/sweep_schema.h"

using namespace ds::testing;
using namespace std::chrono_literals;

namespace {

RunOptions quick(std::chrono::seconds t = 10s) { return cleanOptions(t); }

void expectTwoHostSweep(const std::string& jsonPath, const std::vector<std::string>& backends) {
  auto run = ds::report::sweepFromJson(ds::report::readJson(jsonPath), jsonPath);
  EXPECT_EQ(run.summary.status, "ok");
  EXPECT_EQ(run.metadata.hosts, (std::vector<std::string>{"nodeA", "nodeB"}));
  ASSERT_EQ(run.metadata.ranks.size(), 2u);
  EXPECT_EQ(run.metadata.ranks[1].nodeRank, 1);
  EXPECT_EQ(run.args.backends, backends);
  EXPECT_EQ(run.results.size(), 3u * backends.size());  // 8, 512, 32K per backend
  for (const auto& m : run.results) {
    EXPECT_EQ(m.outOfPlace.wrong, 0) << m.backend << " " << m.bytes;
    EXPECT_EQ(m.inPlace.wrong, 0) << m.backend << " " << m.bytes;
  }
}

}  // namespace

TEST(CollTwoHosts, DsrunOnePerHost) {
  TwoHosts hosts("c", 77);
  if (!hosts.ok()) GTEST_SKIP() << "netns test skipped: " << hosts.why();
  TempDir dir;
  const std::string bin = binDir();
  const int port = unusedPort();
  auto dsrun = [&](int nodeRank, const std::string& extra) {
    return fmt::format(
        "{}/dsrun --nnodes 2 --node-rank {} --nproc-per-node 1 --master-addr {} --master-port {} "
        "--rdzv-id netns-test {}/dsbench coll -b 8 -e 32K -f 64 -n 3{}",
        bin, nodeRank, hosts.addrA(), port, bin, extra);
  };
  Process a(hosts.on("nodeA", dsrun(0, " -J " + dir.file("out.json"))), quick(60s));
  Process b(hosts.on("nodeB", dsrun(1, "")), quick(60s));
  auto rb = b.wait();
  auto ra = a.wait();
  ASSERT_EQ(ra.exitCode, 0) << ra.out << ra.err;
  ASSERT_EQ(rb.exitCode, 0) << rb.out << rb.err;
  EXPECT_NE(ra.out.find("# Out of bounds values : 0 OK"), std::string::npos) << ra.out;
  EXPECT_EQ(rb.out.find("# Out of bounds values"), std::string::npos) << "only rank 0 prints the table";
  expectTwoHostSweep(dir.file("out.json"), {"gloo"});
}

TEST(CollTwoHosts, MpirunWithNamespaceRshAgent) {
  std::string mpirun = DS_MPIRUN_PATH;
  if (mpirun.empty()) GTEST_SKIP() << "built without MPI";
  TwoHosts hosts("c", 77);
  if (!hosts.ok()) GTEST_SKIP() << "netns test skipped: " << hosts.why();
  TempDir dir;
  // The rsh agent: "<agent> <host> <command words...>", as ssh would get them; it maps the host name
  // to its namespace and runs the command through a shell there, as sshd does.
  std::string agent = dir.file("ns_agent.sh");
  {
    std::ofstream f(agent);
    f << "#!/bin/sh\nhost=$1; shift\ncase \"$host\" in\n  nodeA) ns=" << hosts.nsA()
      << ";;\n  nodeB) ns=" << hosts.nsB()
      << ";;\n  *) echo \"ns_agent: unknown host $host\" >&2; exit 1;;\nesac\n"
      << "exec ip netns exec \"$ns\" unshare --uts sh -c \"hostname $host && $*\"\n";
  }
  ::chmod(agent.c_str(), 0755);
  RunOptions o = mpirunOptions(90s);
  auto r =
      run(hosts.on("nodeA", fmt::format("{} --mca plm_rsh_agent {} --host nodeA,nodeB -np 2 {}/dsbench coll "
                                        "--backend gloo,mpi -b 8 -e 32K -f 64 -n 3 -J {}",
                                        mpirun, agent, binDir(), dir.file("out.json"))),
          o);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("on      nodeB device"), std::string::npos) << r.out;
  expectTwoHostSweep(dir.file("out.json"), {"gloo", "mpi"});
}
