// FileStore shared by several processes (fork()ed children), as ranks on one shared filesystem.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "engine/common/error.h"
#include "engine/store/barrier.h"
#include "engine/store/file_store.h"
#include "engine/store/tests/test_util.h"

namespace ds::store {
namespace {

using namespace std::chrono_literals;
using testing::Clock;

// Starts body(i) in `n` children; each must build its own FileStore (flock does not separate
// users of one inherited descriptor). The child's exit code is body's result, 1 on an exception.
template <typename F>
std::vector<pid_t> forkChildren(int n, F body) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 1;
      try {
        rc = body(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  return pids;
}

// Exit codes of the children; one that overruns `limit` is killed and reported as -1.
std::vector<int> reap(const std::vector<pid_t>& pids, Duration limit) {
  std::vector<int> codes(pids.size(), -1);
  const auto deadline = Clock::now() + limit;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    for (;;) {
      pid_t r = ::waitpid(pids[i], &status, WNOHANG);
      if (r == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        break;
      }
      if (Clock::now() > deadline) {
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], &status, 0);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  return codes;
}

TEST(FileStoreProcessTest, ChildrenAddAndWaitOnOneFile) {
  testing::TempDir dir;
  const std::string path = dir.file("rendezvous");
  constexpr int kChildren = 4;
  constexpr int kAdds = 50;
  auto pids = forkChildren(kChildren, [&](int i) {
    FileStore fs(path, 10s);
    for (int j = 0; j < kAdds; ++j) fs.add("count", 1);
    fs.set(fmt::format("done/{}", i), toBytes(std::to_string(::getpid())));
    fs.wait({"go"});
    return toString(fs.get("go")) == "now" ? 0 : 2;
  });
  FileStore parent(path, 10s);
  std::vector<std::string> done;
  for (int i = 0; i < kChildren; ++i) done.push_back(fmt::format("done/{}", i));
  parent.wait(done);
  EXPECT_EQ(parent.add("count", 0), kChildren * kAdds);
  parent.set("go", toBytes("now"));
  auto codes = reap(pids, 10s);
  for (int i = 0; i < kChildren; ++i) EXPECT_EQ(codes[i], 0) << "child " << i;
  EXPECT_EQ(toString(parent.get(done[0])), std::to_string(pids[0]));
}

TEST(FileStoreProcessTest, StoreBarrierAcrossProcesses) {
  testing::TempDir dir;
  const std::string path = dir.file("barrier");
  constexpr int kWorld = 5;
  auto pids = forkChildren(kWorld, [&](int rank) {
    FileStore fs(path, 10s);
    for (int i = 0; i < 3; ++i) storeBarrier(fs, fmt::format("b{}", i), rank, kWorld);
    return 0;
  });
  auto codes = reap(pids, 15s);
  for (int i = 0; i < kWorld; ++i) EXPECT_EQ(codes[i], 0) << "rank " << i;
  FileStore fs(path, 1s);
  EXPECT_EQ(fs.add("barrier/b2/count", 0), kWorld);
}

TEST(FileStoreProcessTest, WaitForAKeyNoProcessSetsTimesOut) {
  testing::TempDir dir;
  const std::string path = dir.file("lonely");
  auto pids = forkChildren(2, [&](int) {
    FileStore fs(path, 10s);
    try {
      fs.wait({"nobody"}, 200ms);
    } catch (const TimeoutError& e) {
      return std::string(e.what()).find("nobody") != std::string::npos ? 0 : 3;
    }
    return 4;
  });
  auto codes = reap(pids, 5s);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace ds::store
