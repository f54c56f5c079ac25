// The real dsdiag binary: flags, JSON, exit codes, garbage environments, explain, tiny /dev/shm and
// low ulimits in a child.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "engine/host/tests/fake_hardware.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"
#include "reports/diag/diag_schema.h"
#include "reports/json_io.h"

using namespace ds::testing;

namespace {

std::string dsdiag() { return binDir() + "/dsdiag"; }

RunOptions clean(std::map<std::string, std::string> set = {}) {
  RunOptions o = cleanOptions(std::chrono::seconds(30), std::move(set));
  for (const char* v :
       {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_DEBUG", "OMP_NUM_THREADS", "DS_ACCELERATOR"}) {
    o.unsetEnv.emplace_back(v);
  }
  return o;
}

const nlohmann::json* check(const nlohmann::json& j, const std::string& id) {
  for (const auto& c : j["checks"]) {
    if (c["id"] == id) return &c;
  }
  return nullptr;
}

}  // namespace

TEST(DsdiagCli, ListShowsEveryFamily) {
  auto r = run({dsdiag(), "--list"}, clean());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (const char* id : {"env.rank_range", "net.master_port_free", "gpu.libcuda", "nccl.version",
                         "mpi.launcher", "system.shm_size", "world.link_matrix"}) {
    EXPECT_NE(r.out.find(id), std::string::npos) << id;
  }
}

TEST(DsdiagCli, JsonCarriesEveryCheckAndTheExitCodeMatches) {
  TempDir d;
  auto r = run({dsdiag(), "--json", d.file("r.json")}, clean());
  auto j = ds::report::readJson(d.file("r.json"));
  auto rep = ds::report::diagFromJson(j, "r.json");
  EXPECT_EQ(rep.mode, "local");
  EXPECT_GT(rep.checks.size(), 30u);
  EXPECT_EQ(r.exitCode, j["summary"]["exit_code"].get<int>()) << r.out;
  EXPECT_NE(r.out.find("Summary:"), std::string::npos);
  EXPECT_EQ(r.out.find("\033["), std::string::npos) << "not a TTY: no colour";
}

TEST(DsdiagCli, OnlyAndSkipSelectChecks) {
  TempDir d;
  auto r =
      run({dsdiag(), "--only", "net,system.shm_size", "--skip", "net.somaxconn", "--json", d.file("r.json")},
          clean());
  auto j = ds::report::readJson(d.file("r.json"));
  for (const auto& c : j["checks"]) {
    std::string id = c["id"];
    EXPECT_TRUE(id.rfind("net.", 0) == 0 || id == "system.shm_size") << id;
    EXPECT_NE(id, "net.somaxconn");
  }
  EXPECT_NE(check(j, "system.shm_size"), nullptr);
}

TEST(DsdiagCli, UsageErrorsExitThree) {
  auto r = run({dsdiag(), "--only", "nte.typo"}, clean());
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_NE(r.err.find("matches no check"), std::string::npos) << r.err;
  EXPECT_EQ(run({dsdiag(), "--timeout", "abc"}, clean()).exitCode, 3);
  EXPECT_EQ(run({dsdiag(), "--color", "purple"}, clean()).exitCode, 3);
  EXPECT_EQ(run({dsdiag(), "--json", "/nonexistent/dir/r.json", "--only", "env"}, clean()).exitCode, 3);
}

// --fail-on fail: warnings exit 0 (what a launcher needs to read advice as success), failures still
// exit 2, the JSON keeps the findings' own code, and a bad policy is a usage error.
TEST(DsdiagCli, FailOnFailLetsWarningsExitZero) {
  TempDir d;
  RunOptions o = cleanOptions(std::chrono::seconds(30), {{"OMP_NUM_THREADS", "abc"}});  // a WARN
  auto strict = run({dsdiag(), "--only", "env.omp_num_threads"}, o);
  EXPECT_EQ(strict.exitCode, 1) << strict.out << strict.err;
  auto lenient = run({dsdiag(), "--only", "env.omp_num_threads", "--fail-on", "fail", "--json", d.file("r.json")}, o);
  EXPECT_EQ(lenient.exitCode, 0) << lenient.out << lenient.err;
  EXPECT_NE(lenient.out.find("exit 0 under --fail-on fail"), std::string::npos) << lenient.out;
  EXPECT_EQ(ds::report::readJson(d.file("r.json"))["summary"]["exit_code"].get<int>(), 1);
  RunOptions viaEnv = o;
  viaEnv.setEnv["DSDIAG_FAIL_ON"] = "fail";
  EXPECT_EQ(run({dsdiag(), "--only", "env.omp_num_threads"}, viaEnv).exitCode, 0);
  auto bad = run({dsdiag(), "--fail-on", "never"}, clean());
  EXPECT_EQ(bad.exitCode, 3);
  EXPECT_NE(bad.err.find("--fail-on: 'never' is not one of warn, fail."), std::string::npos) << bad.err;
}

TEST(DsdiagCli, PortInUseFailsWithExitTwo) {
  // The test's own listener: bind a port, hand it to dsdiag as MASTER_PORT.
  TempDir d;
  Process holder(
      {"python3", "-c",
       "import "
       "socket,time,sys\ns=socket.socket()\ns.bind(('0.0.0.0',0))\ns.listen()\nprint(s.getsockname()[1],"
       "flush=True)\ntime.sleep(30)"},
      clean());
  std::string port;
  for (int i = 0; i < 100 && port.empty(); ++i) {
    port = readFile(holder.stdoutPath());
    if (port.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(port.empty());
  port.erase(port.find_last_not_of("\n") + 1);
  auto r = run({dsdiag(), "--only", "net.master_port_free", "--json", d.file("r.json")},
               clean({{"MASTER_PORT", port}, {"MASTER_ADDR", "127.0.0.1"}}));
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(r.out.find("python3"), std::string::npos) << "names the owner: " << r.out;
}

TEST(DsdiagCli, GarbageInEveryVariableNeverCrashes) {
  std::map<std::string, std::string> g;
  for (const char* n : {"RANK",
                        "WORLD_SIZE",
                        "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE",
                        "MASTER_ADDR",
                        "MASTER_PORT",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "SLURM_JOB_NODELIST",
                        "CUDA_VISIBLE_DEVICES",
                        "NCCL_SOCKET_IFNAME",
                        "GLOO_SOCKET_IFNAME",
                        "NCCL_IB_HCA",
                        "NCCL_DEBUG",
                        "NCCL_CONF_FILE",
                        "DS_ACCELERATOR",
                        "DEEPSPEED_TIMEOUT",
                        "OMP_NUM_THREADS",
                        "TORCHELASTIC_RUN_ID"}) {
    g[n] = "\x7f garbage ^=,,:-1 $(x)";
  }
  TempDir d;
  auto r = run({dsdiag(), "--json", d.file("r.json"), "--connect-timeout", "0.5"}, clean(g));
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  auto j = ds::report::readJson(d.file("r.json"));
  EXPECT_EQ(check(j, "env.world_info")->at("status"), "FAIL");
  EXPECT_EQ(check(j, "net.gloo_socket_ifname")->at("status"), "FAIL");
  EXPECT_EQ(r.out.find("The check itself failed"), std::string::npos) << r.out;
}

TEST(DsdiagCli, MissingLibrariesAreFindingsNotCrashes) {
  TempDir d;
  auto r = run({dsdiag(), "--only", "gpu,nccl", "--backend", "nccl", "--json", d.file("r.json")},
               clean({{"DSDIAG_LIBCUDA", "/nonexistent/libcuda.so.1"},
                      {"DSDIAG_LIBNCCL", "/nonexistent/libnccl.so.2"}}));
  EXPECT_EQ(r.exitCode, 2);
  auto j = ds::report::readJson(d.file("r.json"));
  EXPECT_EQ(check(j, "gpu.libcuda")->at("status"), "FAIL");
  EXPECT_EQ(check(j, "nccl.version")->at("status"), "FAIL");
  EXPECT_NE(check(j, "gpu.libcuda")->at("message").get<std::string>().find("No GPU visible"),
            std::string::npos);
}

// Issue 18: an empty libnccl.so.2 first on LD_LIBRARY_PATH passed nccl.version (a later name
// loaded) while every tool linked against it could not start.
TEST(DsdiagCli, AnEmptyLibncclFirstOnTheLibraryPathFails) {
  TempDir d;
  { std::ofstream(d.file("libnccl.so.2")); }
  auto r = run({dsdiag(), "--only", "nccl.version", "--json", d.file("r.json")},
               clean({{"LD_LIBRARY_PATH", d.path()}, {"DS_ACCELERATOR", "cpu"}}));
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  auto j = ds::report::readJson(d.file("r.json"));
  ASSERT_NE(check(j, "nccl.version"), nullptr);
  EXPECT_EQ(check(j, "nccl.version")->at("status"), "FAIL");
  EXPECT_NE(check(j, "nccl.version")->at("message").get<std::string>().find(d.file("libnccl.so.2")),
            std::string::npos)
      << r.out;
}

// Issue 18: 'dsdiag frobnicate' ran the checks and exited 1 (an unrecognised-argument warning);
// --backend bogus passed.
TEST(DsdiagCli, UnknownCommandsAndValuesAreUsageErrors) {
  auto r = run({dsdiag(), "frobnicate"}, clean());
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_NE(r.err.find("'frobnicate' is not a dsdiag command"), std::string::npos) << r.err;
  r = run({dsdiag(), "--backend", "bogus"}, clean());
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_NE(r.err.find("--backend: 'bogus' is not one of nccl, gloo, mpi, shm."), std::string::npos) << r.err;
  r = run({dsdiag(), "--timeout", "nan"}, clean());
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_NE(r.err.find("--timeout: 'nan' is not a finite number"), std::string::npos) << r.err;
}

TEST(DsdiagCli, TinyShmInAPrivateMountNamespace) {
  auto probe = run({"unshare", "-m", "true"}, clean());
  if (probe.exitCode != 0) GTEST_SKIP() << "cannot create a mount namespace here: " << probe.err;
  auto tiny =
      run({"unshare", "-m", "sh", "-c",
           "mount -t tmpfs -o size=32m tmpfs /dev/shm && exec " + dsdiag() + " --only system.shm_size"},
          clean());
  EXPECT_EQ(tiny.exitCode, 2) << tiny.out << tiny.err;
  EXPECT_NE(tiny.out.find("32 MiB"), std::string::npos) << tiny.out;
  auto small =
      run({"unshare", "-m", "sh", "-c",
           "mount -t tmpfs -o size=256m tmpfs /dev/shm && exec " + dsdiag() + " --only system.shm_size"},
          clean());
  EXPECT_EQ(small.exitCode, 1) << small.out << small.err;
}

TEST(DsdiagCli, LowNofileFails) {
  auto r = run({"sh", "-c", "ulimit -n 64 && exec " + dsdiag() + " --only system.ulimits"}, clean());
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("nofile=64"), std::string::npos) << r.out;
}

TEST(DsdiagCli, ExplainExitCodes) {
  auto r = run({dsdiag(), "explain", "Timed out after 600 seconds waiting for clients. 1/2 clients joined."},
               clean());
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("env.world_size_product"), std::string::npos) << r.out;
  EXPECT_EQ(run({dsdiag(), "explain", "all good"}, clean()).exitCode, 1);
}

// NVML health checks against the fake libnvidia-ml.so.1 (fake_nvml.cpp), loaded through
// LD_LIBRARY_PATH like the driver's. libcuda is pointed at a missing file, so only NVML speaks.
namespace {

const char* const kHealthChecks[] = {"gpu.ecc",         "gpu.pcie_link",        "gpu.clocks",
                                     "gpu.foreign_processes", "gpu.persistence_mode", "gpu.mig_mode",
                                     "gpu.compute_mode", "gpu.nvlink"};
const char* const kGpu0 = "GPU 0 (00000000:19:00.0, GPU-8c4f2a51-0d3e-4b7a-9f21-6a1c0e5b7d10)";
const char* const kGpu1 = "GPU 1 (00000000:3B:00.0, GPU-3e9b7c02-51aa-4d86-b0e4-92f7d1c3a8e5)";

nlohmann::json withFakeNvml(const std::string& scenario, std::vector<std::string> extraArgs = {},
                            std::map<std::string, std::string> vars = {}, RunResult* result = nullptr) {
  TempDir d;
  vars["LD_LIBRARY_PATH"] = DS_FAKE_NVML_DIR;
  vars["DS_FAKE_NVML_SCENARIO"] = scenario;
  vars["DSDIAG_LIBCUDA"] = "/nonexistent/libcuda.so.1";
  std::vector<std::string> argv{dsdiag(), "--only", "gpu", "--json", d.file("r.json")};
  argv.insert(argv.end(), extraArgs.begin(), extraArgs.end());
  auto r = run(argv, clean(vars));
  if (result != nullptr) *result = r;
  return ds::report::readJson(d.file("r.json"));
}

std::string status(const nlohmann::json& j, const std::string& id) {
  auto* c = check(j, id);
  return c == nullptr ? "missing" : c->at("status").get<std::string>();
}
std::string message(const nlohmann::json& j, const std::string& id) {
  auto* c = check(j, id);
  return c == nullptr ? "" : c->at("message").get<std::string>() + " | " + c->at("remedy").get<std::string>();
}

struct Scenario {
  const char* name;
  const char* checkId;
  const char* status;
  std::vector<std::string> says;
};

// The scenario's name in test output, not gtest's byte dump.
void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

class FakeNvml : public ::testing::TestWithParam<Scenario> {};

}  // namespace

TEST(DsdiagNvml, HealthyH200PassesEveryHealthCheck) {
  auto j = withFakeNvml("healthy");
  EXPECT_EQ(status(j, "gpu.nvml"), "PASS") << message(j, "gpu.nvml");
  EXPECT_NE(message(j, "gpu.nvml").find("580.95.05"), std::string::npos);
  for (const char* id : kHealthChecks) EXPECT_EQ(status(j, id), "PASS") << id << ": " << message(j, id);
  // Idle GPUs sit at Gen1: not a degraded link.
  EXPECT_NE(message(j, "gpu.pcie_link").find("idle GPUs lower the generation"), std::string::npos);
  EXPECT_NE(message(j, "gpu.nvlink").find("18 NVLink links active"), std::string::npos);
}

TEST_P(FakeNvml, NamesTheGpuAndTheFix) {
  const auto& s = GetParam();
  auto j = withFakeNvml(s.name);
  EXPECT_EQ(status(j, s.checkId), s.status) << message(j, s.checkId);
  for (const auto& text : s.says) {
    EXPECT_NE(message(j, s.checkId).find(text), std::string::npos) << text << " in " << message(j, s.checkId);
  }
  for (const char* id : kHealthChecks) {
    if (std::string(id) == s.checkId) continue;
    EXPECT_EQ(status(j, id), "PASS") << id << ": " << message(j, id);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, FakeNvml,
    ::testing::Values(
        Scenario{"ecc", "gpu.ecc", "FAIL", {kGpu1, "3 uncorrectable ECC error(s)", "row remap", "nvidia-smi -r -i 1"}},
        Scenario{"ecc_history", "gpu.ecc", "WARN", {kGpu0, "2 uncorrectable ECC error(s) over the GPU's lifetime"}},
        Scenario{"x8", "gpu.pcie_link", "WARN", {kGpu0, "x8 of x16", "lspci -vv -s 00000000:19:00.0"}},
        Scenario{"foreign_process", "gpu.foreign_processes", "WARN", {kGpu1, "pid 4242 (python3, 10", "kill 4242"}},
        Scenario{"mig", "gpu.mig_mode", "WARN", {kGpu0, "MIG is on", "nvidia-smi -i 0 -mig 0"}},
        Scenario{"slowdown", "gpu.clocks", "FAIL", {kGpu1, "HW thermal slowdown"}},
        Scenario{"nvlink_down", "gpu.nvlink", "WARN", {kGpu0, "(links 5)", "nvidia-smi nvlink -s -i 0"}},
        Scenario{"persistence_off", "gpu.persistence_mode", "WARN", {kGpu0, kGpu1, "nvidia-persistenced"}}),
    [](const ::testing::TestParamInfo<Scenario>& i) { return std::string(i.param.name); });

TEST(DsdiagNvml, MigFailsWhenTheJobWantsNccl) {
  auto j = withFakeNvml("mig", {"--backend", "nccl"});
  EXPECT_EQ(status(j, "gpu.mig_mode"), "FAIL") << message(j, "gpu.mig_mode");
}

TEST(DsdiagNvml, ExclusiveProcessFailsOnlyWithMoreRanksThanGpus) {
  std::map<std::string, std::string> fourRanks{{"RANK", "0"},          {"WORLD_SIZE", "4"},
                                               {"LOCAL_RANK", "0"},    {"LOCAL_WORLD_SIZE", "4"},
                                               {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto crowded = withFakeNvml("exclusive", {}, fourRanks);
  EXPECT_EQ(status(crowded, "gpu.compute_mode"), "FAIL") << message(crowded, "gpu.compute_mode");
  EXPECT_NE(message(crowded, "gpu.compute_mode").find("4 ranks on this node share 2 visible GPU(s)"), std::string::npos)
      << message(crowded, "gpu.compute_mode");
  auto alone = withFakeNvml("exclusive");
  EXPECT_EQ(status(alone, "gpu.compute_mode"), "PASS") << message(alone, "gpu.compute_mode");
}

TEST(DsdiagNvml, ACrashingLibraryIsAFindingAndTheOtherChecksRun) {
  RunResult r;
  auto j = withFakeNvml("crash", {}, {}, &r);
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_EQ(status(j, "gpu.nvml"), "FAIL");
  EXPECT_NE(message(j, "gpu.nvml").find("probing libnvidia-ml.so.1"), std::string::npos) << message(j, "gpu.nvml");
  EXPECT_EQ(status(j, "gpu.dcgm_env"), "PASS");
  EXPECT_EQ(status(j, "gpu.ecc"), "SKIP");
}

TEST(DsdiagNvml, AHangingLibraryIsBoundedByTheProbeTimeout) {
  RunResult r;
  auto j = withFakeNvml("hang", {}, {}, &r);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(status(j, "gpu.nvml"), "FAIL");
  EXPECT_NE(message(j, "gpu.nvml").find("did not finish within"), std::string::npos) << message(j, "gpu.nvml");
}

// gpu.topology against the fake NVML and a fake sysfs of the same host: the matrix nvidia-smi topo -m
// prints, in the JSON and in the text report, and its findings. NVML names GPU 1 "00000000:3B:00.0";
// sysfs knows it as 0000:3b:00.0.
namespace {

// GPU 0 (0000:19:00.0) and mlx5_0 under one PCIe switch of host bridge pci0000:15 on NUMA node 0;
// GPU 1 (0000:3b:00.0) on pci0000:97, NUMA node 1, with mlx5_1 under its switch unless `nicOnSocket1`
// is false (then no NIC sits on GPU 1's socket). Besides: mlx5_0's IPoIB face, a veth, docker0 and lo.
// mlx5_0's link trained at `mlx5_0Width` lanes of its 16.
std::unique_ptr<ds::hw::fake::FakeTree> topologySysfs(bool nicOnSocket1, const std::string& mlx5_0Width = "16") {
  auto t = std::make_unique<ds::hw::fake::FakeTree>();
  auto device = [&](const std::string& parent, const std::string& addr, const std::string& cls, int numa,
                    const std::string& cpus) {
    const bool gpu = cls == "gpu";
    std::string dev = t->pci(parent, addr, gpu ? "0x10de" : "0x15b3", gpu ? "0x2335" : "0x1021",
                             gpu ? "0x030200" : "0x020700", "32.0 GT/s PCIe", "32.0 GT/s PCIe",
                             addr == "0000:1a:00.0" ? mlx5_0Width : "16");
    t->file(dev + "/numa_node", std::to_string(numa));
    t->file(dev + "/local_cpulist", cpus);
    return dev;
  };
  const std::string sw0 = "pci0000:15/0000:15:01.0/0000:16:00.0", sw1 = "pci0000:97/0000:97:01.0/0000:98:00.0";
  device(sw0 + "/0000:17:00.0", "0000:19:00.0", "gpu", 0, "0-55");
  std::string hca0 = device(sw0 + "/0000:17:01.0", "0000:1a:00.0", "nic", 0, "0-55");
  t->ibPort("mlx5_0", 1, "400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand", hca0);
  t->netdev("ibp26s0", "400000", "up", "32", hca0);
  device(sw1 + "/0000:99:00.0", "0000:3b:00.0", "gpu", 1, "56-111");
  if (nicOnSocket1) {
    std::string hca1 = device(sw1 + "/0000:99:01.0", "0000:3c:00.0", "nic", 1, "56-111");
    t->ibPort("mlx5_1", 1, "400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand", hca1);
  }
  t->netdev("veth1a2b", "10000", "up", "1", "");
  t->netdev("docker0", "", "up", "1", "");
  t->netdev("lo", "", "unknown", "772", "");
  return t;
}

struct TopoRun {
  nlohmann::json report;
  RunResult result;
  const nlohmann::json& finding() const {
    static const nlohmann::json none = nlohmann::json::object();
    auto* c = check(report, "gpu.topology");
    return c != nullptr ? *c : none;
  }
};

TopoRun runTopology(const std::string& scenario, const std::string& sysfs,
                    std::map<std::string, std::string> vars = {}, const std::string& nvmlDir = DS_FAKE_NVML_DIR) {
  TempDir d;
  vars["LD_LIBRARY_PATH"] = nvmlDir;
  vars["DS_FAKE_NVML_SCENARIO"] = scenario;
  vars["DSDIAG_LIBCUDA"] = "/nonexistent/libcuda.so.1";
  vars["DSDIAG_SYSFS"] = sysfs;
  TopoRun out;
  out.result = run({dsdiag(), "--only", "gpu.topology", "--color", "never", "--json", d.file("r.json")}, clean(vars));
  out.report = ds::report::readJson(d.file("r.json"));
  return out;
}

}  // namespace

TEST(DsdiagTopology, TwoH200sWithANicEachPassAndPrintTheMatrix) {
  auto sysfs = topologySysfs(true);
  auto r = runTopology("healthy", sysfs->roots().sysfs);
  const auto& f = r.finding();
  ASSERT_EQ(f.value("status", ""), "PASS") << f.dump();
  EXPECT_EQ(r.result.exitCode, 0) << r.result.out << r.result.err;
  EXPECT_EQ(f["message"], "2 GPU(s), 2 NIC(s); GPU pairs NV18; each GPU's nearest NIC PIX");
  const auto& data = f["data"];
  EXPECT_EQ(data["devices"], nlohmann::json({"GPU0", "GPU1", "NIC0", "NIC1"}));
  EXPECT_EQ(data["matrix"], nlohmann::json({{"X", "NV18", "PIX", "SYS"},
                                            {"NV18", "X", "SYS", "PIX"},
                                            {"PIX", "SYS", "X", "SYS"},
                                            {"SYS", "PIX", "SYS", "X"}}));
  // The veth, docker0, lo and mlx5_0's IPoIB netdev are no NICs of their own.
  EXPECT_EQ(data["nics"][0]["name"], "mlx5_0");
  EXPECT_EQ(data["nics"][1]["name"], "mlx5_1");
  EXPECT_EQ(data["nics"].size(), 2u);
  EXPECT_EQ(data["nics"][1]["nearest_gpus"], nlohmann::json({1}));
  EXPECT_EQ(data["gpus"][1]["bus_id"], "00000000:3B:00.0");
  EXPECT_EQ(data["gpus"][1]["numa_node"], 1);
  EXPECT_EQ(data["gpus"][1]["nvlinks_to_switch"], 18);
  EXPECT_EQ(data["nvml_topology_missing"], nlohmann::json::array());
  // The text report lays it out as nvidia-smi topo -m.
  const std::string& text = r.result.out;
  EXPECT_NE(text.find("GPU0  GPU1  NIC0  NIC1  CPU Affinity    NUMA Affinity"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU1  NV18  X     SYS   PIX   56-111          1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("NIC1  SYS   PIX   SYS   X\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Legend: X = self, SYS = across NUMA nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("NIC Legend: NIC0: mlx5_0, NIC1: mlx5_1"), std::string::npos) << text;
}

TEST(DsdiagTopology, AGpuWithoutANicOnItsSocketWarns) {
  auto sysfs = topologySysfs(false);
  auto r = runTopology("healthy", sysfs->roots().sysfs);
  const auto& f = r.finding();
  ASSERT_EQ(f.value("status", ""), "WARN") << f.dump();
  EXPECT_EQ(r.result.exitCode, 1);
  const std::string msg = f["message"], remedy = f["remedy"];
  EXPECT_NE(msg.find("GPU 1 (00000000:3B:00.0), NUMA node 1: its nearest NIC mlx5_0 (0000:1a:00.0, NUMA node 0) "
                     "is across sockets (SYS)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("GPU 0"), std::string::npos) << msg;
  EXPECT_NE(remedy.find("No NIC of this host sits on NUMA node 1 (GPU 1 (00000000:3B:00.0)'s)"), std::string::npos)
      << remedy;
  EXPECT_NE(remedy.find("NCCL_IB_HCA"), std::string::npos) << remedy;
  EXPECT_NE(remedy.find("numactl --cpunodebind=1"), std::string::npos) << remedy;
}

TEST(DsdiagTopology, NcclIbHcaThatLeavesOutTheNearNicWarnsWithIt) {
  auto sysfs = topologySysfs(true);
  auto r = runTopology("healthy", sysfs->roots().sysfs, {{"NCCL_IB_HCA", "=mlx5_0"}});
  const auto& f = r.finding();
  ASSERT_EQ(f.value("status", ""), "WARN") << f.dump();
  EXPECT_NE(f["message"].get<std::string>().find("GPU 1 (00000000:3B:00.0), NUMA node 1: its nearest NIC that "
                                                 "NCCL_IB_HCA allows, mlx5_0"),
            std::string::npos)
      << f["message"];
  EXPECT_NE(f["remedy"].get<std::string>().find("NCCL_IB_HCA leaves out mlx5_1, which is PIX to GPU 1"),
            std::string::npos)
      << f["remedy"];
  EXPECT_EQ(runTopology("healthy", sysfs->roots().sysfs, {{"NCCL_IB_HCA", "mlx5"}}).finding()["status"], "PASS");
}

TEST(DsdiagTopology, EightGpusOnNvSwitchAreNv18Everywhere) {
  TempDir emptySysfs;  // a container without /sys/bus/pci: the GPU pairs from NVML alone
  auto r = runTopology("topo_nvswitch", emptySysfs.path());
  const auto& f = r.finding();
  ASSERT_EQ(f.value("status", ""), "PASS") << f.dump();
  EXPECT_NE(f["message"].get<std::string>().find("8 GPU(s), 0 NIC(s); GPU pairs NV18 (GPU 0, GPU 1, GPU 2, GPU 3, "
                                                  "GPU 4, GPU 5, GPU 6, GPU 7 not under"),
            std::string::npos)
      << f["message"];
  const auto& m = f["data"]["matrix"];
  ASSERT_EQ(m.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 8; ++j) EXPECT_EQ(m[i][j], i == j ? "X" : "NV18") << i << "," << j;
}

TEST(DsdiagTopology, TwoLinksDownOnOneGpuWarnNamingIt) {
  TempDir emptySysfs;
  auto r = runTopology("topo_link_down", emptySysfs.path());
  const auto& f = r.finding();
  ASSERT_EQ(f.value("status", ""), "WARN") << f.dump();
  const std::string msg = f["message"];
  EXPECT_NE(msg.find("NVLink counts between GPU pairs are uneven: GPU 3 (00000000:5D:00.0) has NV16 to each of the "
                     "other 7 GPUs, where the other pairs have NV18 (2 link(s) down or missing)"),
            std::string::npos)
      << msg;
  EXPECT_NE(f["remedy"].get<std::string>().find("nvidia-fabricmanager"), std::string::npos) << f["remedy"];
  EXPECT_EQ(f["data"]["matrix"][3][0], "NV16");
}

TEST(DsdiagTopology, AGpuOffTheFabricWarnsWithItsPcieDistance) {
  TempDir emptySysfs;
  auto r = runTopology("topo_gpu_off_fabric", emptySysfs.path());
  const auto& f = r.finding();
  ASSERT_EQ(f.value("status", ""), "WARN") << f.dump();
  EXPECT_NE(f["message"].get<std::string>().find("GPU 5 (00000000:BB:00.0) has no NVLink to each of the other 7 GPUs, "
                                                  "where the other pairs have NV18 (18 link(s) down or missing)"),
            std::string::npos)
      << f["message"];
  // Its pairs from NVML's common ancestors: NODE on its socket, SYS across.
  EXPECT_EQ(f["data"]["matrix"][5][4], "NODE");
  EXPECT_EQ(f["data"]["matrix"][5][0], "SYS");
}

// Direct links count for the GPU they lead to (NVML's upper-case bus id matched), and GPU pairs of PCIe
// cards bridged two by two are no finding.
TEST(DsdiagTopology, BridgedPairsPassWithTheirDirectLinks) {
  TempDir emptySysfs;
  auto r = runTopology("topo_bridged", emptySysfs.path());
  const auto& f = r.finding();
  ASSERT_EQ(f.value("status", ""), "PASS") << f.dump();
  EXPECT_EQ(f["data"]["matrix"], nlohmann::json({{"X", "NV4", "NODE", "NODE"},
                                                 {"NV4", "X", "NODE", "NODE"},
                                                 {"NODE", "NODE", "X", "NV4"},
                                                 {"NODE", "NODE", "NV4", "X"}}));
  EXPECT_NE(f["message"].get<std::string>().find("4 GPU(s), 0 NIC(s); GPU pairs NODE/NV4"), std::string::npos)
      << f["message"];
  EXPECT_EQ(f["data"]["gpus"][0]["nvlinks_to_switch"], 0);
}

TEST(DsdiagTopology, ADriverWithoutTheTopologyCallsSaysSoAndFallsBackToSysfs) {
  auto sysfs = topologySysfs(true);
  auto r = runTopology("healthy", sysfs->roots().sysfs, {}, DS_FAKE_NVML_OLD_DIR);
  const auto& f = r.finding();
  ASSERT_EQ(f.value("status", ""), "PASS") << f.dump();
  EXPECT_NE(f["message"].get<std::string>().find("this driver lacks nvmlDeviceGetTopologyCommonAncestor, "
                                                 "nvmlDeviceGetNvLinkRemotePciInfo_v2, "
                                                 "nvmlDeviceGetNvLinkRemoteDeviceType"),
            std::string::npos)
      << f["message"];
  // No far ends known: the GPU pair from the PCI tree, across sockets.
  EXPECT_EQ(f["data"]["matrix"][0][1], "SYS");
}

// gpu.pcie_link judges the NICs' own links too (sysfs): NVML does not see them.
TEST(DsdiagTopology, ANicLinkBelowItsWidthWarnsInPcieLink) {
  auto narrow = topologySysfs(true, "8");
  TempDir d;
  std::map<std::string, std::string> vars{{"LD_LIBRARY_PATH", DS_FAKE_NVML_DIR},
                                          {"DSDIAG_LIBCUDA", "/nonexistent/libcuda.so.1"},
                                          {"DSDIAG_SYSFS", narrow->roots().sysfs}};
  auto r = run({dsdiag(), "--only", "gpu.pcie_link", "--json", d.file("r.json")}, clean(vars));
  auto j = ds::report::readJson(d.file("r.json"));
  EXPECT_EQ(status(j, "gpu.pcie_link"), "WARN") << message(j, "gpu.pcie_link");
  EXPECT_NE(message(j, "gpu.pcie_link").find("NIC mlx5_0 (0000:1a:00.0): the PCIe link runs at x8 of x16, Gen5 of Gen5"),
            std::string::npos)
      << message(j, "gpu.pcie_link");
  EXPECT_NE(message(j, "gpu.pcie_link").find("lspci -vv -s 0000:1a:00.0"), std::string::npos);
  EXPECT_EQ(message(j, "gpu.pcie_link").find("mlx5_1"), std::string::npos);
  auto full = topologySysfs(true);
  vars["DSDIAG_SYSFS"] = full->roots().sysfs;
  run({dsdiag(), "--only", "gpu.pcie_link", "--json", d.file("r2.json")}, clean(vars));
  auto ok = ds::report::readJson(d.file("r2.json"));
  EXPECT_EQ(status(ok, "gpu.pcie_link"), "PASS") << message(ok, "gpu.pcie_link");
  EXPECT_NE(message(ok, "gpu.pcie_link").find("; 2 NIC link(s) at their full width and generation"), std::string::npos)
      << message(ok, "gpu.pcie_link");
}

TEST(DsdiagTopology, SkipsWithoutNvml) {
  auto sysfs = topologySysfs(true);
  auto r = runTopology("healthy", sysfs->roots().sysfs, {{"DSDIAG_LIBNVML", "/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(r.finding().value("status", ""), "SKIP") << r.finding().dump();
  EXPECT_NE(r.finding()["message"].get<std::string>().find("NVML is not usable"), std::string::npos);
}

// DeepSpeed's runner flags, with DeepSpeed's spellings, drive the runner.* checks.
TEST(DsdiagCli, RunnerFlagsCheckTheHostfileAsDeepSpeedDoes) {
  TempDir d;
  std::ofstream(d.file("hosts")) << "# two nodes\nnode-a slots=2\nnode-b slots=2\nnode-a slots=4\n";
  auto r = run({dsdiag(), "--only", "runner", "-H", d.file("hosts"), "--json", d.file("r.json")}, clean());
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  auto j = ds::report::readJson(d.file("r.json"));
  ASSERT_NE(check(j, "runner.hostfile"), nullptr) << r.out;
  EXPECT_EQ((*check(j, "runner.hostfile"))["status"], "FAIL");
  EXPECT_NE(r.out.find(d.file("hosts") + ":4: DeepSpeed's runner stops with ValueError: Hostfile contains "
                                         "multiple entries for node-a"),
            std::string::npos)
      << r.out;
  std::ofstream(d.file("hosts")) << "node-a slots=2\nnode-b slots=2\n";
  // DeepSpeed's backend_exists(): without pdsh on PATH, the default launcher is not installed.
  r = run({dsdiag(), "--only", "runner.resources", "--hostfile", d.file("hosts")}, clean({{"PATH", d.sub("empty")}}));
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(r.out.find("launcher 'pdsh' not installed."), std::string::npos) << r.out;
  const std::string bin = d.sub("bin");
  for (const char* tool : {"pdsh", "ompi_info"}) {
    std::ofstream(bin + "/" + tool) << "#!/bin/sh\nexit 0\n";
    ::chmod((bin + "/" + tool).c_str(), 0755);
  }
  const auto withTools = clean({{"PATH", bin + ":/usr/bin:/bin"}});
  r = run({dsdiag(), "--only", "runner.resources", "--hostfile", d.file("hosts"), "--include",
           "node-a:1@node-b", "--json", d.file("r.json")},
          withTools);
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  // --launcher openmpi refuses the filter, and drops --master_port (its ranks go through MPI discovery).
  r = run({dsdiag(), "--only", "runner.resources", "--hostfile", d.file("hosts"), "--launcher", "openmpi",
           "--include", "node-a@node-b"},
          withTools);
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(r.out.find("openmpi backend does not support worker include/exclusion"), std::string::npos) << r.out;
  r = run({dsdiag(), "--only", "runner.resources", "--hostfile", d.file("hosts"), "--launcher", "openmpi",
           "--master_port", "1234", "--json", d.file("o.json")},
          withTools);
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("does not pass --master_addr/--master_port"), std::string::npos) << r.out;
  EXPECT_EQ((*check(ds::report::readJson(d.file("o.json")), "runner.resources"))["data"]["launcher"], "openmpi")
      << r.out;
  j = ds::report::readJson(d.file("r.json"));
  EXPECT_EQ((*check(j, "runner.resources"))["data"]["world_size"], 3) << r.out;
  r = run(
      {dsdiag(), "--only", "runner.resources", "--hostfile", d.file("hosts"), "-i", "node-a", "-e", "node-b"},
      clean());
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(r.out.find("include_str and exclude_str are mutually exclusive."), std::string::npos) << r.out;
  r = run({dsdiag(), "--list"}, clean());
  for (const char* id :
       {"runner.hostfile", "runner.resources", "runner.ssh", "runner.exports", "runner.gpus_fit"})
    EXPECT_NE(r.out.find(id), std::string::npos) << id;
}
