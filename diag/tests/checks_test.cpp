// One test (at least) per local check, each crafting its environment: variables, a listener on the
// port, a fake sysfs/procfs/nccl.conf, a library that is missing or garbage.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "diag/checks/affinity.h"
#include "diag/probes.h"
#include "diag/tests/test_util.h"
#include "diag/util.h"
#include "engine/comm/backends/nccl/nccl_version.h"
#include "engine/common/error.h"
#include "engine/env/launcher_args.h"
#include "engine/host/resources.h"
#include "engine/testing/subprocess.h"

using namespace ds::diag;
using namespace ds::diag::testing;
using ds::testing::TempDir;
using Vars = std::map<std::string, std::string, std::less<>>;

namespace {

Vars launched(int rank, int size, int port = 29500) {
  return {{"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(size)}, {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(size)}, {"MASTER_ADDR", "127.0.0.1"},   {"MASTER_PORT", std::to_string(port)},
          {"OMP_NUM_THREADS", "1"}};
}

// A TCP listener on a free loopback port, closed by the destructor.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd, 4);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
};

void writeFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

// ---------------- env ----------------

TEST(EnvChecks, WorldInfoCarriesProvenance) {
  auto f = runCheck("env.world_info", launched(1, 2));
  EXPECT_STATUS(f, PASS);
  EXPECT_EQ(f.data["rank"], 1);
  EXPECT_EQ(f.data["provenance"][0], "RANK=1 (from RANK)");
}

TEST(EnvChecks, WorldInfoFailsOnGarbageNamingTheVariable) {
  auto f = runCheck("env.world_info", {{"RANK", "abc"}, {"WORLD_SIZE", "2"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("RANK"), std::string::npos);
  EXPECT_NE(f.message.find("abc"), std::string::npos);
}

TEST(EnvChecks, RankWithoutWorldSizeFails) {
  auto f = runCheck("env.launcher_vars", {{"RANK", "0"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("WORLD_SIZE expected, but not set"), std::string::npos);
}

TEST(EnvChecks, WorldSizeWithoutRankUnderMpiWarnsAboutMixedSources) {
  auto f = runCheck("env.launcher_vars", {{"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("RANK expected"), std::string::npos);
}

TEST(EnvChecks, MissingMasterAddrFails) {
  auto f = runCheck("env.launcher_vars", {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("MASTER_ADDR"), std::string::npos);
}

TEST(EnvChecks, FullLauncherSetPasses) { EXPECT_STATUS(runCheck("env.launcher_vars", launched(0, 2)), PASS); }

TEST(EnvChecks, EnvAgainstOpenMpiContradictionFails) {
  auto v = launched(1, 2);
  v["OMPI_COMM_WORLD_RANK"] = "0";
  v["OMPI_COMM_WORLD_SIZE"] = "2";
  auto f = runCheck("env.launcher_agreement", v);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("RANK='1' but OMPI_COMM_WORLD_RANK='0'"), std::string::npos) << f.message;
}

TEST(EnvChecks, EnvAgainstSlurmAgreementPasses) {
  auto v = launched(1, 2);
  v["SLURM_PROCID"] = "1";
  v["SLURM_NTASKS"] = "2";
  EXPECT_STATUS(runCheck("env.launcher_agreement", v), PASS);
}

TEST(EnvChecks, RankNotBelowWorldSizeFails) {
  auto f = runCheck("env.rank_range", {{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("RANK=4 is not below WORLD_SIZE=4"), std::string::npos) << f.message;
}

TEST(EnvChecks, LocalRankNotBelowLocalSizeFails) {
  auto f = runCheck("env.rank_range", {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"},
                                       {"MASTER_ADDR", "h"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"), std::string::npos) << f.message;
}

TEST(EnvChecks, WorldSizeProductMismatchFails) {
  auto v = launched(0, 8);
  v["LOCAL_WORLD_SIZE"] = "2";
  v["CROSS_SIZE"] = "2";
  auto f = runCheck("env.world_size_product", v);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("2 node(s)"), std::string::npos) << f.message;
  v["CROSS_SIZE"] = "4";
  EXPECT_STATUS(runCheck("env.world_size_product", v), PASS);
}

TEST(EnvChecks, OmpNumThreadsUnsetWithSeveralRanksWarns) {
  auto v = launched(0, 2);
  v.erase("OMP_NUM_THREADS");
  EXPECT_STATUS(runCheck("env.omp_num_threads", v), WARN);
  v["OMP_NUM_THREADS"] = "zero";
  EXPECT_STATUS(runCheck("env.omp_num_threads", v), WARN);
  v["OMP_NUM_THREADS"] = "1";
  EXPECT_STATUS(runCheck("env.omp_num_threads", v), PASS);
}

TEST(EnvChecks, LauncherFlagAfterProgramFails) {
  DiagOptions o;
  o.extraArgs = {"--master_port", "1234"};
  auto f = runCheck("env.launcher_flags", {}, o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("--master_port"), std::string::npos);
  o.extraArgs = {};
  ds::env::rememberLocalRankArg(ds::env::LocalRankArg{0, "--local_rank=0"});  // as main() took it
  auto lr = runCheck("env.launcher_flags", {}, o);
  ds::env::rememberLocalRankArg(std::nullopt);
  EXPECT_STATUS(lr, PASS);
  EXPECT_NE(lr.message.find("--local_rank=0 passed by the launcher"), std::string::npos) << lr.message;
}

// ---------------- net ----------------

TEST(NetChecks, UnresolvableMasterFails) {
  auto v = launched(1, 2);
  v["MASTER_ADDR"] = "no-such-host.invalid";
  auto f = runCheck("net.master_addr_resolves", v);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("does not resolve"), std::string::npos);
}

TEST(NetChecks, LoopbackMasterInMultiNodeJobFails) {
  auto v = launched(0, 4);
  v["LOCAL_WORLD_SIZE"] = "2";
  v["GROUP_RANK"] = "0";
  auto f = runCheck("net.master_addr_resolves", v);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("loopback"), std::string::npos);
  EXPECT_STATUS(runCheck("net.master_addr_resolves", launched(0, 2)), PASS);
}

TEST(NetChecks, ConnectToListeningMasterPasses) {
  Listener l;
  EXPECT_STATUS(runCheck("net.master_reachable", launched(1, 2, l.port)), PASS);
}

TEST(NetChecks, ConnectRefusedWarnsThatNothingListens) {
  int port = ds::testing::unusedPort();
  auto f = runCheck("net.master_reachable", launched(1, 2, port));
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("refused"), std::string::npos);
}

TEST(NetChecks, UnreachableMasterFailsWithinTheConnectTimeout) {
  auto v = launched(1, 2);
  v["MASTER_ADDR"] = "192.0.2.123";  // TEST-NET-1: never answers
  DiagOptions o;
  o.connectTimeout = std::chrono::milliseconds(300);
  auto t0 = std::chrono::steady_clock::now();
  auto f = runCheck("net.master_reachable", v, o);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.remedy.find("MASTER_ADDR"), std::string::npos);
}

TEST(NetChecks, RankZeroSkipsTheConnectTest) { EXPECT_STATUS(runCheck("net.master_reachable", launched(0, 2)), SKIP); }

TEST(NetChecks, PortInUseNamesTheOwnerProcess) {
  Listener l;
  auto f = runCheck("net.master_port_free", launched(0, 2, l.port));
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("errno: 98"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find(fmt::format("pid {}", getpid())), std::string::npos) << f.message;
  EXPECT_STATUS(runCheck("net.master_port_free", launched(0, 2, ds::testing::unusedPort())), PASS);
}

TEST(NetChecks, InterfacesListLoopbackAndTheRouteToMaster) {
  auto f = runCheck("net.interfaces", launched(0, 2));
  EXPECT_STATUS(f, PASS);
  EXPECT_EQ(f.data["route_to_master"]["iface"], "lo");
}

TEST(NetChecks, NcclSocketIfnameSyntaxAndMatches) {
  EXPECT_STATUS(runCheck("net.nccl_socket_ifname", {{"NCCL_SOCKET_IFNAME", "=^lo"}}), FAIL);
  auto f = runCheck("net.nccl_socket_ifname", {{"NCCL_SOCKET_IFNAME", "nosuchif0"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.remedy.find("lo"), std::string::npos);
  EXPECT_STATUS(runCheck("net.nccl_socket_ifname", {{"NCCL_SOCKET_IFNAME", "lo"}}), PASS);
  EXPECT_STATUS(runCheck("net.nccl_socket_ifname", {{"NCCL_SOCKET_IFNAME", "=lo:0"}}), PASS);
  EXPECT_STATUS(runCheck("net.nccl_socket_ifname", {{"NCCL_SOCKET_IFNAME", "lo,nosuchif0"}}), WARN);
  // ^ excludes by prefix: excluding everything that is up selects nothing.
  std::string all = "^";
  for (const auto& i : listInterfaces()) all += i.name + ",";
  all.pop_back();
  EXPECT_STATUS(runCheck("net.nccl_socket_ifname", {{"NCCL_SOCKET_IFNAME", all}}), FAIL);
  EXPECT_STATUS(runCheck("net.nccl_socket_ifname", {}), SKIP);
}

TEST(NetChecks, IfnameSpecParser) {
  auto s = parseIfnameSpec("^=eth0:1,ib");
  EXPECT_TRUE(s.exclude);
  EXPECT_TRUE(s.exact);
  ASSERT_EQ(s.entries.size(), 2u);
  EXPECT_EQ(s.entries[0].port, 1);
  EXPECT_TRUE(ifnameEntryMatches(s, s.entries[1], "ib") && !ifnameEntryMatches(s, s.entries[1], "ib0"));
  EXPECT_FALSE(parseIfnameSpec("=^x").error.empty());
  EXPECT_FALSE(parseIfnameSpec("eth0,,eth1").error.empty());
  EXPECT_FALSE(parseIfnameSpec("eth0:abc").error.empty());
}

TEST(NetChecks, NcclIbHcaAgainstAFakeSysfs) {
  TempDir d;
  writeFile(d.file("class/infiniband/mlx5_0/ports/1/state"), "4: ACTIVE\n");
  writeFile(d.file("class/infiniband/mlx5_1/ports/1/state"), "1: DOWN\n");
  EXPECT_STATUS(runCheck("net.nccl_ib_hca", {{"NCCL_IB_HCA", "mlx5_0:1"}, {"DSDIAG_SYSFS", d.path()}}), PASS);
  auto f = runCheck("net.nccl_ib_hca", {{"NCCL_IB_HCA", "=mlx5_1"}, {"DSDIAG_SYSFS", d.path()}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.remedy.find("mlx5_0"), std::string::npos);
}

TEST(NetChecks, GlooSocketIfnameRejectsNcclSyntaxAndMissingNames) {
  auto f = runCheck("net.gloo_socket_ifname", {{"GLOO_SOCKET_IFNAME", "^lo"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("Unable to find address for: ^lo"), std::string::npos);
  EXPECT_STATUS(runCheck("net.gloo_socket_ifname", {{"GLOO_SOCKET_IFNAME", "nosuchif0"}}), FAIL);
  EXPECT_STATUS(runCheck("net.gloo_socket_ifname", {{"GLOO_SOCKET_IFNAME", "lo"}}), PASS);
}

TEST(NetChecks, SomaxconnBelowWorldSizeWarns) {
  TempDir d;
  writeFile(d.file("sys/net/core/somaxconn"), "16\n");
  auto v = launched(0, 64);
  v["DSDIAG_PROCFS"] = d.path();
  EXPECT_STATUS(runCheck("net.somaxconn", v), WARN);
  v = launched(0, 8);
  v["DSDIAG_PROCFS"] = d.path();
  EXPECT_STATUS(runCheck("net.somaxconn", v), PASS);
}

// ---------------- gpu ----------------

TEST(GpuChecks, MissingLibcudaIsSkippedOnCpuAndFailsWhenCudaIsAsked) {
  Vars v{{"DSDIAG_LIBCUDA", "/nonexistent/libcuda.so.1"}};
  auto f = runCheck("gpu.libcuda", v);
  EXPECT_STATUS(f, SKIP);
  EXPECT_NE(f.message.find("No GPU visible"), std::string::npos);
  v["DS_ACCELERATOR"] = "cuda";
  f = runCheck("gpu.libcuda", v);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("/nonexistent/libcuda.so.1"), std::string::npos);
  DiagOptions o;
  o.backend = "nccl";
  EXPECT_STATUS(runCheck("gpu.devices", {{"DSDIAG_LIBCUDA", "/nonexistent/libcuda.so.1"}}, o), FAIL);
}

TEST(GpuChecks, GarbageLibraryIsReportedNotLoaded) {
  TempDir d;
  writeFile(d.file("libcuda.so.1"), "this is not an ELF file");
  auto f = runCheck("gpu.libcuda", {{"DSDIAG_LIBCUDA", d.file("libcuda.so.1")}, {"DS_ACCELERATOR", "cuda"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("libcuda"), std::string::npos);
  // A real library that is not libcuda: loads, has no cuInit.
  f = runCheck("gpu.libcuda", {{"DSDIAG_LIBCUDA", "libz.so.1"}, {"DS_ACCELERATOR", "cuda"}});
  EXPECT_STATUS(f, FAIL);
}

TEST(GpuChecks, NvmlMissingIsReported) {
  auto f = runCheck("gpu.nvml", {{"DSDIAG_LIBNVML", "/nonexistent/libnvidia-ml.so.1"}, {"DS_ACCELERATOR", "cuda"},
                                 {"DSDIAG_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("libnvidia-ml"), std::string::npos);
}

TEST(GpuChecks, VisibleDevicesParsing) {
  Vars base{{"DSDIAG_LIBCUDA", "/nonexistent/libcuda.so.1"}};
  auto v = base;
  v["CUDA_VISIBLE_DEVICES"] = "0,1,0";
  EXPECT_STATUS(runCheck("gpu.visible_devices", v), FAIL);
  v["CUDA_VISIBLE_DEVICES"] = "0,abc,1";
  auto f = runCheck("gpu.visible_devices", v);
  EXPECT_STATUS(f, WARN);
  EXPECT_EQ(f.data["entries"].size(), 1u);
  EXPECT_EQ(f.data["ignored"].size(), 2u);
  v["CUDA_VISIBLE_DEVICES"] = "GPU-8c3e,MIG-1234";
  f = runCheck("gpu.visible_devices", v);
  EXPECT_EQ(f.data["kind"], "mixed") << f.data.dump();
  v["CUDA_VISIBLE_DEVICES"] = "GPU-8c3e-aa,GPU-77";
  f = runCheck("gpu.visible_devices", v);
  EXPECT_STATUS(f, SKIP);  // no GPU here, job on cpu
  EXPECT_EQ(f.data["kind"], "uuids");
}

TEST(GpuChecks, LocalRankDeviceAndDriverSayNoGpu) {
  auto v = launched(1, 2);
  v["DSDIAG_LIBCUDA"] = "/nonexistent/libcuda.so.1";
  EXPECT_STATUS(runCheck("gpu.local_rank_device", v), SKIP);
  v["DS_ACCELERATOR"] = "cuda";
  EXPECT_STATUS(runCheck("gpu.local_rank_device", v), FAIL);
  EXPECT_STATUS(runCheck("gpu.driver_version", v), FAIL);
}

TEST(GpuChecks, DcgmFlaggedVariablesWarn) {
  auto f = runCheck("gpu.dcgm_env", {{"CUDA_INJECTION64_PATH", "/x.so"}, {"CUDA_PROFILE", "1"}});
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.remedy.find("CUDA_INJECTION64_PATH"), std::string::npos);
  EXPECT_STATUS(runCheck("gpu.dcgm_env", {}), PASS);
}

// ---------------- nccl ----------------

TEST(NcclChecks, MissingLibncclSkipsOnGlooAndFailsOnNccl) {
  Vars v{{"DSDIAG_LIBNCCL", "/nonexistent/libnccl.so.2"}, {"DS_ACCELERATOR", "cpu"}};
  EXPECT_STATUS(runCheck("nccl.version", v), SKIP);
  DiagOptions o;
  o.backend = "nccl";
  auto f = runCheck("nccl.version", v, o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("/nonexistent/libnccl.so.2"), std::string::npos);
}

// A file under libnccl's name that does not load (empty, not ELF) or is not NCCL fails whatever the
// backend, naming the file: the tools would load it and not start (issue 18).
TEST(NcclChecks, BrokenLibncclFailsNamingItsPath) {
  TempDir d;
  writeFile(d.file("libnccl.so.2"), "");
  writeFile(d.file("text.so"), "not an ELF file\n");
  for (const std::string& lib : {d.file("libnccl.so.2"), d.file("text.so")}) {
    auto f = runCheck("nccl.version", {{"DSDIAG_LIBNCCL", lib}, {"DS_ACCELERATOR", "cpu"}});
    EXPECT_STATUS(f, FAIL);
    EXPECT_NE(f.message.find(lib + " is found but broken"), std::string::npos) << f.message;
    EXPECT_NE(f.remedy.find(lib), std::string::npos) << f.remedy;
  }
  // A real library that is not NCCL (no ncclGetVersion).
  for (const char* other : {"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"}) {
    if (::access(other, R_OK) != 0) continue;
    auto f = runCheck("nccl.version", {{"DSDIAG_LIBNCCL", other}, {"DS_ACCELERATOR", "cpu"}});
    EXPECT_STATUS(f, FAIL);
    EXPECT_NE(f.message.find("not an NCCL library"), std::string::npos) << f.message;
    break;
  }
}

TEST(MpiChecks, BrokenLibmpiFailsNamingItsPath) {
  TempDir d;
  writeFile(d.file("libmpi.so.40"), "");
  auto f = runCheck("mpi.version", {{"DSDIAG_LIBMPI", d.file("libmpi.so.40")}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find(d.file("libmpi.so.40")), std::string::npos) << f.message;
}

TEST(NcclChecks, InstalledLibncclReportsBothVersions) {
  auto p = probeNccl(LibraryNames{});
  if (!p.loaded) GTEST_SKIP() << "no libnccl here: " << p.error;
  auto f = runCheck("nccl.version", {{"DS_ACCELERATOR", "cpu"}});
  EXPECT_TRUE(f.status == DiagStatus::kPass || f.status == DiagStatus::kWarn) << f.message;
  EXPECT_EQ(f.data["runtime"], ds::comm::decodeNcclVersion(p.runtimeCode).str());
  EXPECT_NE(f.message.find("NCCL 2."), std::string::npos);
}

TEST(NcclChecks, DebugOnlyVariablesWarnFromEnvAndConfFile) {
  TempDir d;
  writeFile(d.file("nccl.conf"), "# comment\nNCCL_ALGO=Ring\nNCCL_SOCKET_NTHREADS=4\n");
  auto f = runCheck("nccl.debug_vars", {{"NCCL_P2P_DISABLE", "1"}});
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("NCCL_P2P_DISABLE"), std::string::npos);
  f = runCheck("nccl.debug_vars", {{"NCCL_CONF_FILE", d.file("nccl.conf")}});
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("NCCL_ALGO='Ring' (" + d.file("nccl.conf") + ")"), std::string::npos) << f.message;
  EXPECT_STATUS(runCheck("nccl.debug_vars", {{"NCCL_SOCKET_NTHREADS", "4"}, {"DSDIAG_NCCL_CONF", "/nonexistent"}}), PASS);
}

TEST(NcclChecks, EnvEchoMergesConfAndFlagsBadDebugLevels) {
  TempDir d;
  writeFile(d.file("nccl.conf"), "NCCL_IB_TIMEOUT=22\nNCCL_DEBUG=WARN\n");
  auto f = runCheck("nccl.env", {{"DSDIAG_NCCL_CONF", d.file("nccl.conf")}, {"NCCL_DEBUG", "INFO"}, {"HOME", "/nonexistent"}});
  EXPECT_STATUS(f, PASS);
  EXPECT_EQ(f.data["settings"]["NCCL_IB_TIMEOUT"], "22");
  EXPECT_EQ(f.data["settings"]["NCCL_DEBUG"], "INFO");  // the environment wins
  EXPECT_STATUS(runCheck("nccl.env", {{"NCCL_DEBUG", "loud"}}), WARN);
}

TEST(NcclChecks, ConfFiles) {
  TempDir d;
  writeFile(d.file("bad.conf"), "NCCL_IB_TIMEOUT 22\n");
  EXPECT_STATUS(runCheck("nccl.conf_files", {{"NCCL_CONF_FILE", d.file("missing.conf")}}), WARN);
  EXPECT_STATUS(runCheck("nccl.conf_files", {{"NCCL_CONF_FILE", d.file("bad.conf")}}), WARN);
  writeFile(d.file("good.conf"), "NCCL_IB_TIMEOUT=22\n");
  auto f = runCheck("nccl.conf_files", {{"NCCL_CONF_FILE", d.file("good.conf")}});
  EXPECT_STATUS(f, PASS);
  EXPECT_NE(f.message.find("1 setting"), std::string::npos);
}

// ---------------- mpi ----------------

TEST(MpiChecks, LauncherIsNamed) {
  auto f = runCheck("mpi.launcher", {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_STATUS(f, PASS);
  EXPECT_NE(f.message.find("Open MPI"), std::string::npos);
  auto v = launched(0, 2);
  v["SLURM_JOB_ID"] = "42";
  EXPECT_STATUS(runCheck("mpi.launcher", v), WARN);  // inside an allocation, outside srun
}

TEST(MpiChecks, MissingMpiLibraryFailsUnderMpirun) {
  Vars v{{"DSDIAG_LIBMPI", "/nonexistent/libmpi.so.40"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}};
  EXPECT_STATUS(runCheck("mpi.version", v), FAIL);
  EXPECT_STATUS(runCheck("mpi.version", {{"DSDIAG_LIBMPI", "/nonexistent/libmpi.so.40"}, {"DS_ACCELERATOR", "cpu"}}), SKIP);
}

TEST(MpiChecks, StartIsProvedInAChildAndAMissingOrtedIsNamed) {
  // A rank started without mpirun is an Open MPI singleton: it needs orted, which the library alone
  // does not bring (issue 42: mpi.version PASSed on a node where --backend mpi could not start).
  const char* path = std::getenv("PATH");
  auto ok = runCheck("mpi.start", {{"PATH", path != nullptr ? path : "/usr/bin:/bin"}, {"DS_ACCELERATOR", "cpu"}});
  if (ok.status == DiagStatus::kSkip) GTEST_SKIP() << ok.message;
  EXPECT_STATUS(ok, PASS);
  EXPECT_NE(ok.message.find("singleton"), std::string::npos) << ok.message;
  DiagOptions o;
  o.backend = "mpi";
  auto bad = runCheck("mpi.start", {{"PATH", "/nonexistent"}, {"DS_ACCELERATOR", "cpu"}}, o);
  EXPECT_STATUS(bad, FAIL);
  EXPECT_NE(bad.message.find("orted is not on PATH"), std::string::npos) << bad.message;
  EXPECT_NE(bad.remedy.find("openmpi-bin"), std::string::npos) << bad.remedy;
  // Not the job's backend: a warning that --backend mpi would not start.
  EXPECT_STATUS(runCheck("mpi.start", {{"PATH", "/nonexistent"}, {"DS_ACCELERATOR", "cpu"}}), WARN);
  // Under mpirun it is not tried: a second MPI_Init would join the job's world.
  auto under = runCheck("mpi.start", {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_STATUS(under, SKIP);
  EXPECT_NE(under.message.find("Not tried"), std::string::npos);
}

TEST(MpiChecks, WorldMismatchAgainstEnvFails) {
  auto v = launched(0, 2);
  v["OMPI_COMM_WORLD_SIZE"] = "4";
  v["OMPI_COMM_WORLD_RANK"] = "0";
  auto f = runCheck("mpi.world_match", v);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("OMPI_COMM_WORLD_SIZE=4"), std::string::npos);
  DiagOptions o;
  o.backend = "mpi";
  EXPECT_STATUS(runCheck("mpi.world_match", launched(0, 2), o), FAIL);  // backend mpi without mpirun
}

// ---------------- system ----------------

TEST(SystemChecks, MissingShmFails) {
  auto f = runCheck("system.shm_size", {{"DSDIAG_SHM_PATH", "/nonexistent/shm"}});
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("unhandled system error"), std::string::npos);
}

TEST(SystemChecks, CpuAffinityWarnsWhenRanksOutnumberCpus) {
  int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  auto v = launched(0, cpus + 2);
  auto f = runCheck("system.cpu_affinity", v);
  EXPECT_STATUS(f, WARN);
  EXPECT_STATUS(runCheck("system.cpu_affinity", launched(0, 1)), PASS);
}

// Fake /proc and /sys trees: cgroup v1 (a limit on an ancestor binds) and v2 (a Kubernetes pod).
TEST(SystemChecks, CpuQuotaJudgesTheCgroupLimitPerRank) {
  TempDir proc, sys;
  writeFile(proc.file("self/cgroup"), "4:memory:/job\n3:cpu,cpuacct:/job/rank0\n0::/\n");
  const std::string v1 = sys.path() + "/fs/cgroup/cpu,cpuacct";
  writeFile(v1 + "/cpu.cfs_quota_us", "-1\n");
  writeFile(v1 + "/cpu.cfs_period_us", "100000\n");
  writeFile(v1 + "/job/cpu.cfs_quota_us", "50000\n");
  writeFile(v1 + "/job/cpu.cfs_period_us", "100000\n");
  writeFile(v1 + "/job/cpu.stat", "nr_periods 400\nnr_throttled 300\nthrottled_time 25000000000\n");
  writeFile(v1 + "/job/rank0/cpu.cfs_quota_us", "-1\n");
  writeFile(v1 + "/job/rank0/cpu.cfs_period_us", "100000\n");
  // `ranks` on the node, /proc and /sys read from the fake roots.
  auto on = [](int ranks, const TempDir& procRoot, const TempDir& sysRoot) {
    Vars v = launched(0, ranks);
    v["DSDIAG_PROCFS"] = procRoot.path();
    v["DSDIAG_SYSFS"] = sysRoot.path();
    return v;
  };
  auto f = runCheck("system.cpu_quota", on(4, proc, sys));
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(
      f.message.find("cgroup CPU limit 0.5 CPU (" + v1 +
                     "/job/cpu.cfs_quota_us: 50000 per 100000 us), "
                     "throttled in 300 of 400 periods (25.0 s stopped); 4 rank(s) on this node share it: "
                     "0.12 CPU per rank"),
      std::string::npos)
      << f.message;
  EXPECT_NE(f.remedy.find(v1 + "/job/cpu.cfs_quota_us"), std::string::npos) << f.remedy;
  EXPECT_DOUBLE_EQ(f.data["quota_cpus"].get<double>(), 0.5);
  EXPECT_STATUS(runCheck("system.cpu_quota", on(1, proc, sys)), WARN);  // 0.5 CPU for one rank

  TempDir proc2, sys2;
  writeFile(proc2.file("self/cgroup"), "0::/kubepods/pod1\n");
  const std::string v2 = sys2.path() + "/fs/cgroup";
  writeFile(v2 + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  writeFile(v2 + "/kubepods/cpu.max", "max 100000\n");
  writeFile(v2 + "/kubepods/pod1/cpu.max", "150000 100000\n");
  writeFile(v2 + "/kubepods/pod1/cpu.stat",
            "usage_usec 1\nnr_periods 1000\nnr_throttled 200\nthrottled_usec 5000000\n");
  Vars v = on(1, proc2, sys2);
  f = runCheck("system.cpu_quota", v);
  // 1.5 CPU for one rank, but throttled in 20 % of the periods: a warning where the limit is below the
  // affinity mask (2 CPUs or more), a pass where it is not.
  if (ds::sys::affinityCpus().size() >= 2) {
    EXPECT_STATUS(f, WARN);
    EXPECT_NE(f.message.find("the limit is already being hit"), std::string::npos) << f.message;
  }
  EXPECT_NE(f.message.find(v2 + "/kubepods/pod1/cpu.max: 150000 100000"), std::string::npos) << f.message;
  writeFile(v2 + "/kubepods/pod1/cpu.stat", "nr_periods 1000\nnr_throttled 0\nthrottled_usec 0\n");
  EXPECT_STATUS(runCheck("system.cpu_quota", v), PASS);
  for (const char* garbage : {"max 100000\n", "abc 100000\n", "", "100000 0\n", "-5 100000\n"}) {
    writeFile(v2 + "/kubepods/pod1/cpu.max", garbage);
    f = runCheck("system.cpu_quota", v);
    EXPECT_STATUS(f, PASS) << "cpu.max '" << garbage << "'";
    EXPECT_TRUE(f.data["quota_cpus"].is_null());
  }
  // No cgroup files at all (a fake tree that is empty): no limit known.
  TempDir empty;
  EXPECT_STATUS(runCheck("system.cpu_quota", on(1, empty, empty)), PASS);
}

TEST(SystemChecks, TopologyAndIdentity) {
  auto f = runCheck("system.topology", {});
  EXPECT_STATUS(f, PASS);
  EXPECT_GE(f.data["numa_nodes"].get<int>(), 1);
  EXPECT_GE(f.data["pus"].get<int>(), 1);
  auto h = runCheck("system.host_identity", {});
  EXPECT_FALSE(h.data["boot_id"].get<std::string>().empty());
}

TEST(SystemChecks, UlimitsJudgeNofileAgainstWorldSize) {
  rlimit old{};
  getrlimit(RLIMIT_NOFILE, &old);
  rlimit low{200, old.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  auto big = runCheck("system.ulimits", launched(0, 1000));
  auto small = runCheck("system.ulimits", launched(0, 2));
  setrlimit(RLIMIT_NOFILE, &old);
  EXPECT_STATUS(big, FAIL);
  EXPECT_NE(big.message.find("nofile=200"), std::string::npos);
  EXPECT_STATUS(small, WARN);  // below 4096: low, not fatal
}

// ---------------- robustness ----------------

TEST(Robustness, EveryCheckSurvivesGarbageInEveryVariable) {
  Vars garbage;
  for (const char* n : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "GROUP_RANK", "NODE_RANK",
                        "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                        "SLURM_NTASKS", "SLURM_NNODES", "SLURM_JOB_NODELIST", "CROSS_SIZE", "CUDA_VISIBLE_DEVICES",
                        "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "GLOO_SOCKET_IFNAME", "NCCL_DEBUG", "NCCL_CONF_FILE",
                        "OMP_NUM_THREADS", "DS_ACCELERATOR", "DSDIAG_LIBCUDA", "DSDIAG_LIBNCCL", "DSDIAG_LIBMPI",
                        "DSDIAG_SHM_PATH", "DSDIAG_SYSFS", "DSDIAG_PROCFS", "NCCL_P2P_DISABLE"}) {
    garbage[n] = std::string("\x01\xff;rm -rf /;$(x)^=,,:-1\n", 22);
  }
  std::vector<std::string> names;
  for (const auto& [k, _] : garbage) names.push_back(k);
  ds::env::MapEnv env(garbage);
  DiagOptions o;
  o.connectTimeout = std::chrono::milliseconds(300);
  Context ctx(env, o, names);
  auto records = runLocalChecks(ctx, {}, -1, "h");
  EXPECT_EQ(records.size(), localChecks().size());
  for (const auto& r : records) {
    EXPECT_EQ(r.message.find("The check itself failed"), std::string::npos) << r.id << ": " << r.message;
    EXPECT_FALSE(r.message.empty()) << r.id;
    if (r.status == DiagStatus::kFail || r.status == DiagStatus::kWarn) {
      EXPECT_FALSE(r.remedy.empty()) << r.id;
    }
  }
}

TEST(Robustness, CrashingProbeBecomesAnErrorText) {
  auto r = runIsolated([]() -> nlohmann::json {
    signal(SIGSEGV, SIG_DFL);  // a sanitizer's own handler would turn the crash into an exit code
    raise(SIGSEGV);
    return {};
  }, std::chrono::seconds(5));
  EXPECT_NE(r.error.find("SIGSEGV"), std::string::npos) << r.error;
  auto slow = runIsolated([]() -> nlohmann::json {
    sleep(10);
    return {};
  }, std::chrono::milliseconds(200));
  EXPECT_NE(slow.error.find("killed"), std::string::npos) << slow.error;
  EXPECT_EQ(runIsolated([] { return nlohmann::json{{"x", 1}}; }, std::chrono::seconds(5)).value["x"], 1);
}

TEST(Registry, IdsAreUniqueAndFamiliesPrefixThem) {
  std::set<std::string> ids;
  for (const auto& c : localChecks()) {
    EXPECT_TRUE(ids.insert(c.id).second) << c.id;
    EXPECT_EQ(c.id.rfind(c.family + ".", 0), 0u) << c.id;
  }
  for (const auto& w : worldChecks()) EXPECT_TRUE(ids.insert(w.id).second) << w.id;
  Selection s{{"net"}, {"net.somaxconn"}};
  EXPECT_TRUE(s.selected("net.interfaces"));
  EXPECT_FALSE(s.selected("net.somaxconn"));
  EXPECT_FALSE(s.selected("env.world_info"));
  EXPECT_TRUE((Selection{{"gpu.*"}, {}}).selected("gpu.nvml"));
  EXPECT_THROW(validateSelection({{"nte.typo"}, {}}), ds::ConfigError);
}

// system.thread_affinity on fake masks (judgeThreadAffinity), not this machine's.
TEST(SystemChecks, ThreadAffinityWarnsWhenTheMaskIsNarrowerThanTheThreads) {
  AffinityFacts one{{0}, 2, 1, "", "mpirun"};
  auto f = judgeThreadAffinity(one);  // caller + worker on one core: mpirun's default binding
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("cpus 0 (1 of 2 online)"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("2 busy thread(s)"), std::string::npos) << f.message;
  EXPECT_NE(f.remedy.find("--bind-to none"), std::string::npos) << f.remedy;
  EXPECT_NE(f.remedy.find("--map-by slot:PE=2"), std::string::npos) << f.remedy;
  EXPECT_EQ(f.data["busy_threads"], 2);

  AffinityFacts srun{{2, 3}, 8, 4, "OMP_NUM_THREADS=4", "srun"};  // 4 BLAS threads + worker on 2 CPUs
  f = judgeThreadAffinity(srun);
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("OMP_NUM_THREADS=4"), std::string::npos) << f.message;
  EXPECT_NE(f.remedy.find("--cpus-per-task=5"), std::string::npos) << f.remedy;

  AffinityFacts other{{0}, 1, 1, "", ""};
  f = judgeThreadAffinity(other);
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.remedy.find("taskset"), std::string::npos) << f.remedy;

  EXPECT_STATUS(judgeThreadAffinity({{0, 1}, 2, 1, "", "mpirun"}), PASS);  // --bind-to none on 2 CPUs
  EXPECT_STATUS(judgeThreadAffinity({{0, 1, 2, 3}, 4, 3, "OMP_NUM_THREADS=3", ""}), PASS);
  EXPECT_STATUS(judgeThreadAffinity({{}, 4, 1, "", ""}), SKIP);  // mask unreadable
}

// DeepSpeed's rules beside dsperf's (issue 27).
TEST(EnvChecks, DeepSpeedsLauncherInsideASlurmStepIsAccepted) {
  auto v = launched(1, 2);
  for (auto [k, val] : {std::pair{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"},
                        {"SLURM_NTASKS", "1"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_LOCALID", "0"},
                        {"CROSS_RANK", "0"}, {"CROSS_SIZE", "1"}, {"LOCAL_SIZE", "2"}}) {
    v[k] = val;
  }
  EXPECT_STATUS(runCheck("env.world_info", v), PASS);
  auto f = runCheck("env.launcher_agreement", v);
  EXPECT_STATUS(f, SKIP);
  EXPECT_NE(f.message.find("DeepSpeed's launcher"), std::string::npos) << f.message;
  EXPECT_STATUS(runCheck("env.deepspeed", v), PASS);
}

TEST(EnvChecks, BatchScriptSlurmVariablesAreNotCalledMissing) {
  auto f = runCheck("env.launcher_vars", {{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}});
  EXPECT_STATUS(f, PASS);
  EXPECT_EQ(f.message.find("No launcher variables"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("SLURM_NTASKS=4 describe the Slurm allocation"), std::string::npos) << f.message;
}

TEST(EnvChecks, DeepSpeedSplittingTheJobIntoSingletonsFails) {
  auto v = launched(1, 2, 1234);
  v.erase("LOCAL_RANK");
  auto f = runCheck("env.deepspeed", v);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("rank 0 of 1"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("DeepSpeed will replace MASTER_PORT=1234 with 29500, because LOCAL_RANK is not set"),
            std::string::npos)
      << f.message;
  EXPECT_STATUS(runCheck("env.deepspeed", launched(1, 2, 1234)), PASS);
}

// Without the env:// variables DeepSpeed runs MPI discovery, which imports mpi4py: the job's Python
// (python3 on the job's PATH) is asked whether it can, without importing mpi4py.MPI (that would call
// MPI_Init inside the launcher's job). Under mpirun with 2 ranks a missing mpi4py is a FAIL.
TEST(EnvChecks, DeepSpeedsMpiDiscoveryWithoutMpi4pyFails) {
  const std::string real = findOnPath(std::getenv("PATH") ? std::getenv("PATH") : "", "python3");
  if (real.empty()) GTEST_SKIP() << "no python3 here";
  TempDir d;
  // bin/python3 runs the real one with PYTHONPATH=lib, where each case puts (or not) an mpi4py.
  const std::string bin = d.sub("bin"), lib = d.sub("lib");
  std::ofstream(bin + "/python3") << "#!/bin/sh\nPYTHONPATH=" << lib << " PYTHONNOUSERSITE=1 exec " << real
                                  << " -S \"$@\"\n";
  ::chmod((bin + "/python3").c_str(), 0755);
  Vars mpirun{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"PATH", bin}};

  // A Python without deepspeed runs no DeepSpeed job: a plain mpirun job needs no mpi4py (a note only).
  auto f = runCheck("env.deepspeed", mpirun);
  EXPECT_NE(f.status, DiagStatus::kFail) << f.message;
  EXPECT_NE(f.message.find("cannot import it (ModuleNotFoundError: No module named 'mpi4py'); it has no deepspeed "
                           "either"),
            std::string::npos)
      << f.message;
  EXPECT_EQ(f.data["mpi4py"]["deepspeed"], false);

  // With deepspeed there (found, never imported: importing it would raise), the job can be DeepSpeed's.
  std::filesystem::create_directories(lib + "/deepspeed");
  std::ofstream(lib + "/deepspeed/__init__.py") << "raise SystemExit('imported deepspeed')\n";
  f = runCheck("env.deepspeed", mpirun);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("imports mpi4py, which " + bin + "/python3 cannot import (ModuleNotFoundError: No module "
                           "named 'mpi4py')"),
            std::string::npos)
      << f.message;
  EXPECT_NE(f.remedy.find("Install mpi4py"), std::string::npos) << f.remedy;
  EXPECT_EQ(f.data["mpi4py"]["imports"], false);

  // A package without its MPI extension is no better.
  std::filesystem::create_directories(lib + "/mpi4py");
  std::ofstream(lib + "/mpi4py/__init__.py") << "__version__ = '9.9.9'\n";
  f = runCheck("env.deepspeed", mpirun);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("No module named 'mpi4py.MPI'"), std::string::npos) << f.message;

  // With it, the check goes on to compare the conclusions; mpi4py.MPI is found, never imported.
  std::ofstream(lib + "/mpi4py/MPI.py") << "raise SystemExit('imported mpi4py.MPI: MPI_Init would run')\n";
  f = runCheck("env.deepspeed", mpirun);
  EXPECT_NE(f.status, DiagStatus::kFail) << f.message;
  EXPECT_EQ(f.data["mpi4py"]["imports"], true);
  EXPECT_NE(f.data["mpi4py"]["answer"].get<std::string>().find("mpi4py 9.9.9 at " + lib), std::string::npos)
      << f.data.dump();

  // One process outside any launcher: DeepSpeed run here would stop too, but dsdiag alone is no job.
  std::filesystem::remove_all(lib + "/mpi4py");
  f = runCheck("env.deepspeed", mpirun);
  EXPECT_STATUS(f, FAIL);
  f = runCheck("env.deepspeed", {{"PATH", bin}});
  EXPECT_STATUS(f, PASS);
  EXPECT_NE(f.message.find("Here " + bin + "/python3 cannot import it"), std::string::npos) << f.message;

  // No Python to ask on the job's PATH: not known, said so (a note: no Python, no DeepSpeed job).
  mpirun["PATH"] = d.sub("empty");
  f = runCheck("env.deepspeed", mpirun);
  EXPECT_NE(f.status, DiagStatus::kFail) << f.message;
  EXPECT_NE(f.message.find("can import mpi4py, which DeepSpeed's MPI discovery needs, is not known: no python3 or "
                           "python on PATH"),
            std::string::npos)
      << f.message;
  // With the five variables set, DeepSpeed never asks for mpi4py, and neither does dsdiag.
  EXPECT_FALSE(runCheck("env.deepspeed", launched(0, 2)).data.contains("mpi4py"));
}

// The probe's runner: the output, the exit status, a program that cannot start, and a time limit that
// also holds a program that closed its output and went on running.
TEST(Util, RunProgramBoundsTheChild) {
  auto r = runProgram({"/bin/sh", "-c", "echo out; echo err >&2; exit 7"}, std::chrono::seconds(10));
  EXPECT_EQ(r.exitCode, 7);
  EXPECT_EQ(r.output, "out\nerr\n");
  EXPECT_FALSE(r.timedOut);
  r = runProgram({"/nonexistent/python3", "-c", ""}, std::chrono::seconds(10));
  EXPECT_EQ(r.error, "cannot start /nonexistent/python3: No such file or directory");
  for (const char* script : {"sleep 30", "exec >&- 2>&-; sleep 30", "sleep 30 & wait"}) {
    auto t0 = std::chrono::steady_clock::now();
    r = runProgram({"/bin/sh", "-c", script}, std::chrono::milliseconds(300));
    EXPECT_TRUE(r.timedOut) << script;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10)) << script;
  }
}

TEST(EnvChecks, DeepSpeedTimeoutIsReadAsPythonsInt) {
  EXPECT_STATUS(runCheck("env.deepspeed_timeout", {}), PASS);
  auto u = runCheck("env.deepspeed_timeout", {{"DEEPSPEED_TIMEOUT", "1_0"}});
  EXPECT_STATUS(u, PASS);
  EXPECT_NE(u.message.find("reads '1_0' as 10"), std::string::npos) << u.message;
  EXPECT_STATUS(runCheck("env.deepspeed_timeout", {{"DEEPSPEED_TIMEOUT", " 10 "}}), PASS);
  auto zero = runCheck("env.deepspeed_timeout", {{"DEEPSPEED_TIMEOUT", "0"}});
  EXPECT_STATUS(zero, WARN);
  EXPECT_NE(zero.message.find("0-second timeout"), std::string::npos) << zero.message;
  auto bad = runCheck("env.deepspeed_timeout", {{"DEEPSPEED_TIMEOUT", "abc"}});
  EXPECT_STATUS(bad, FAIL);
  EXPECT_NE(bad.message.find("invalid literal for int() with base 10: 'abc'"), std::string::npos) << bad.message;
}

TEST(EnvChecks, DsAcceleratorIsCheckedAsDeepSpeedReadsIt) {
  EXPECT_STATUS(runCheck("env.ds_accelerator", {{"DS_ACCELERATOR", "cpu"}}), PASS);
  auto xpu = runCheck("env.ds_accelerator", {{"DS_ACCELERATOR", "xpu"}});
  EXPECT_STATUS(xpu, FAIL);
  EXPECT_NE(xpu.message.find("xpu is a DeepSpeed accelerator that dsperf does not support"), std::string::npos)
      << xpu.message;
  auto bogus = runCheck("env.ds_accelerator", {{"DS_ACCELERATOR", "bogus"}});
  EXPECT_STATUS(bogus, FAIL);
  EXPECT_NE(bogus.message.find("not an accelerator DeepSpeed knows"), std::string::npos) << bogus.message;
  EXPECT_NE(bogus.message.find("klxpu"), std::string::npos) << bogus.message;
}
