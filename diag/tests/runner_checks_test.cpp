// The runner.* checks (DeepSpeed's runner inputs). Network cases talk only to loopback: a listener
// this test opens on a free port, and a port bound without listening (refused).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "diag/tests/test_util.h"
#include "engine/testing/subprocess.h"

namespace ds::diag {
namespace {

using testing::runCheck;

// A TCP socket on 127.0.0.1, listening or only bound (connects to it are then refused).
class LoopbackPort {
 public:
  explicit LoopbackPort(bool listening) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    if (listening) {
      EXPECT_EQ(::listen(fd_, 16), 0);
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~LoopbackPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class RunnerChecks : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    std::string p = tmp_.file(name);
    std::ofstream(p) << text;
    return p;
  }
  DiagOptions options(const std::string& hostfile, std::optional<int> sshPort = std::nullopt) {
    DiagOptions o;
    env::RunnerFlags f;
    f.hostfile = hostfile;
    f.sshPort = sshPort;
    o.runner = f;
    o.connectTimeout = std::chrono::seconds(2);
    return o;
  }
  std::map<std::string, std::string, std::less<>> vars(
      std::map<std::string, std::string, std::less<>> v = {}) {
    v.emplace("HOME", tmp_.sub("home"));
    v.emplace("DS_ACCELERATOR", "cpu");
    v.emplace("PATH", tools());
    return v;
  }
  // A PATH folder with every launcher's program, as backend_exists() looks for them.
  std::string tools() {
    const std::string bin = tmp_.sub("bin");
    for (const char* tool : {"pdsh", "ompi_info", "mpirun", "sinfo", "mpiname"}) {
      std::ofstream(bin + "/" + tool) << "#!/bin/sh\nexit 0\n";
      ::chmod((bin + "/" + tool).c_str(), 0755);
    }
    return bin;
  }
  ds::testing::TempDir tmp_{"ds_runner_checks"};
};

TEST_F(RunnerChecks, SkipWithoutRunnerInputs) {
  for (const char* id :
       {"runner.hostfile", "runner.resources", "runner.ssh", "runner.exports", "runner.gpus_fit"}) {
    auto f = runCheck(id, vars());
    EXPECT_STATUS(f, SKIP);
    EXPECT_NE(f.message.find("--hostfile"), std::string::npos) << id << ": " << f.message;
  }
}

TEST_F(RunnerChecks, SshPortAnswersOnEveryHost) {
  LoopbackPort open(true);
  auto o = options(write("hosts", "127.0.0.1 slots=2\nlocalhost slots=2\n"), open.port());
  auto f = runCheck("runner.ssh", vars(), o);
  EXPECT_STATUS(f, PASS);
  EXPECT_NE(f.message.find("answers on all 2 host(s)"), std::string::npos) << f.message;
  EXPECT_EQ(f.data["port"], open.port());
}

TEST_F(RunnerChecks, ClosedSshPortAndUnknownHostFailByName) {
  LoopbackPort closed(false);
  auto o = options(write("hosts", "127.0.0.1 slots=1\nno-such-host.invalid slots=1\n"), closed.port());
  auto f = runCheck("runner.ssh", vars(), o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("127.0.0.1 (127.0.0.1: connection refused"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("no-such-host.invalid (does not resolve"), std::string::npos) << f.message;
  EXPECT_NE(f.remedy.find("--ssh_port"), std::string::npos) << f.remedy;
}

TEST_F(RunnerChecks, BadHostfileLineIsDeepSpeedsErrorWithTheLine) {
  std::string path = write("hosts", "a slots=2\nb slots = 2\n");
  auto f = runCheck("runner.hostfile", vars(), options(path));
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(
      f.message.find(path + ":2: DeepSpeed's runner stops with ValueError: Hostfile contains a bad entry: "
                            "b slots = 2, unable to proceed with launching"),
      std::string::npos)
      << f.message;
  EXPECT_NE(f.remedy.find("HOST slots=N"), std::string::npos);
  EXPECT_STATUS(runCheck("runner.resources", vars(), options(path)), FAIL);
  EXPECT_STATUS(runCheck("runner.ssh", vars(), options(path)), SKIP);
}

TEST_F(RunnerChecks, ResourcesGiveDeepSpeedsLayout) {
  auto o = options(write("hosts", "w0 slots=4\nw1 slots=4\nw2 slots=2\n"));
  o.runner->include = "w0:0,2@w2";
  auto f = runCheck("runner.resources", vars(), o);
  EXPECT_STATUS(f, PASS);
  EXPECT_EQ(f.data["world_size"], 4);
  EXPECT_NE(f.message.find("w0 slots 0,2 -> ranks 0-1; w2 slots 0,1 -> ranks 2-3"), std::string::npos)
      << f.message;
  o.runner->include = "w9";
  f = runCheck("runner.resources", vars(), o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("Hostname 'w9' not found in hostfile"), std::string::npos) << f.message;
  EXPECT_NE(f.remedy.find("w0, w1, w2"), std::string::npos) << f.remedy;
}

TEST_F(RunnerChecks, OneRemoteHostLeftLaunchesHere) {
  // .invalid names never resolve, so neither can be this machine.
  auto o = options(write("hosts", "w0.invalid slots=2\nw1.invalid slots=2\n"));
  o.runner->include = "w1.invalid";
  auto f = runCheck("runner.resources", vars(), o);
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("starts its 2 rank(s) here"), std::string::npos) << f.message;
  EXPECT_NE(f.remedy.find("--force_multi"), std::string::npos);
}

TEST_F(RunnerChecks, NumGpusAboveTheHostfilesSlotsWarns) {
  auto o = options(write("hosts", "w0 slots=8\nw1 slots=2\n"));
  o.runner->numGpus = 4;
  auto f = runCheck("runner.resources", vars(), o);
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("w1 (slots=2, line 2)"), std::string::npos) << f.message;
}

TEST_F(RunnerChecks, ExportsNameTheirSourceAndTheShellTrap) {
  auto o = options(write("hosts", "w0 slots=1\nw1 slots=1\n"));
  auto v = vars({{"NCCL_DEBUG", "INFO"}, {"DS_ACCELERATOR", "cuda"}, {"UNRELATED", "1"}});
  std::ofstream(v["HOME"] + "/.deepspeed_env") << "UCX_TLS=rc\nGREETING=hi $USER\n";
  auto f = runCheck("runner.exports", v, o);
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("GREETING carry $"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("NCCL_DEBUG='INFO' (the environment (prefix NCCL))"), std::string::npos)
      << f.message;
  EXPECT_NE(f.message.find("UCX_TLS='rc' (" + v["HOME"] + "/.deepspeed_env:1)"), std::string::npos)
      << f.message;
  EXPECT_EQ(f.message.find("UNRELATED"), std::string::npos);
  EXPECT_EQ(f.data["ranks"].size(), 2u);
  EXPECT_EQ(f.data["ranks"][1]["env"]["CROSS_RANK"], "1");
  std::ofstream(v["HOME"] + "/.deepspeed_env") << "A=1\n\nB=2\n";
  f = runCheck("runner.exports", v, o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(
      f.message.find(v["HOME"] + "/.deepspeed_env:2: DeepSpeed's runner stops with ValueError: not enough "
                                 "values to unpack (expected 2, got 1)"),
      std::string::npos)
      << f.message;
}

TEST_F(RunnerChecks, EnvFileIgnoredOnALocalLaunch) {
  auto o = options(write("hosts", "w0 slots=1\nw1 slots=1\n"));
  o.runner->include = "w0";
  auto v = vars();
  std::ofstream(v["HOME"] + "/.deepspeed_env") << "NCCL_DEBUG=INFO\n";
  auto f = runCheck("runner.exports", v, o);
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("is ignored"), std::string::npos) << f.message;
}

TEST_F(RunnerChecks, SlotsBeyondTheVisibleGpusFail) {
  auto o = options(write("hosts", "localhost slots=64\n"));
  auto f = runCheck("runner.gpus_fit", vars({{"DS_ACCELERATOR", "cuda"}}), o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("localhost gets slots 0-63"), std::string::npos) << f.message;
  EXPECT_STATUS(runCheck("runner.gpus_fit", vars(), o), SKIP);  // DS_ACCELERATOR=cpu: not GPUs
}

TEST_F(RunnerChecks, LauncherWithoutItsProgramFails) {
  auto o = options(write("hosts", "w0 slots=2\nw1 slots=2\n"));
  o.runner->launcher = "slurm";
  auto f = runCheck("runner.resources", vars({{"PATH", tmp_.sub("empty")}}), o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("launcher 'slurm' not installed."), std::string::npos) << f.message;
  EXPECT_NE(f.remedy.find("sinfo"), std::string::npos) << f.remedy;
  f = runCheck("runner.resources", vars(), o);
  EXPECT_EQ(f.data["launcher"], "slurm");
  EXPECT_NE(f.message.find("srun -n 4"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("mpi4py"), std::string::npos) << f.message;
}

TEST_F(RunnerChecks, MpiLaunchersRefuseUnevenHostsAndDropTheMasterPort) {
  auto o = options(write("hosts", "w0 slots=2\nw1 slots=3\n"));
  o.runner->launcher = "mpich";
  auto f = runCheck("runner.resources", vars(), o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("MPICH requires same number of devices per node"), std::string::npos) << f.message;
  o.runner->launcher = "openmpi";
  o.runner->masterPort = 1234;
  f = runCheck("runner.resources", vars(), o);
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("does not pass --master_addr/--master_port"), std::string::npos) << f.message;
}

TEST_F(RunnerChecks, ExportsShowTheCommandAndQuotesAnMpirunKeeps) {
  auto o = options(write("hosts", "w0 slots=2\nw1 slots=2\n"));
  o.runner->launcher = "mvapich";
  o.runner->masterAddr = "10.0.0.1";
  auto f = runCheck("runner.exports", vars({{"MV2_IBA_HCA", "mlx5_0 mlx5_1"}}), o);
  EXPECT_STATUS(f, WARN);
  EXPECT_NE(f.message.find("MV2_IBA_HCA"), std::string::npos) << f.message;
  EXPECT_EQ(f.data["command"][0], "mpirun");
  EXPECT_EQ(f.data["launcher_file"]["text"], "w0\nw1\n");
  o.runner->launcher = "pdsh";
  f = runCheck("runner.exports", vars({{"MV2_IBA_HCA", "mlx5_0 mlx5_1"}}), o);
  EXPECT_STATUS(f, PASS);  // pdsh's remote shell removes the quotes
  EXPECT_EQ(f.data["command"][0], "pdsh");
}

TEST_F(RunnerChecks, NoSshWithMasterAddrReachesNoHost) {
  auto o = options(write("hosts", "w0.invalid slots=2\nw1.invalid slots=2\n"));
  o.runner->noSsh = true;
  o.runner->nodeRank = 1;
  o.runner->masterAddr = "10.0.0.1";
  EXPECT_STATUS(runCheck("runner.ssh", vars(), o), SKIP);
  auto f = runCheck("runner.resources", vars(), o);
  EXPECT_NE(f.message.find("--no_ssh"), std::string::npos) << f.message;
  o.runner->nodeRank = 2;
  f = runCheck("runner.resources", vars(), o);
  EXPECT_STATUS(f, FAIL);
  EXPECT_NE(f.message.find("AssertionError"), std::string::npos) << f.message;
}

}  // namespace
}  // namespace ds::diag
