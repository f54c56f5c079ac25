// The shm segment: header checks on attach, stale-name removal, and the "/dev/shm too small" error.
#include "engine/comm/backends/shm/shm_segment.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/common/error.h"
#include "engine/testing/subprocess.h"

namespace ds::comm::shm {
namespace {

SegmentSpec specIn(const std::string& dir) {
  SegmentSpec s;
  s.dir = dir;
  s.jobId = "job-a";
  s.group = "g";
  s.host = "h";
  s.generation = 3;
  s.nranks = 2;
  s.slotBytes = 8192;
  return s;
}

TEST(ShmSegment, AttachChecksJobGroupGenerationNonceAndLayout) {
  ds::testing::TempDir dir;
  auto spec = specIn(dir.path());
  auto seg = Segment::create(spec);
  const auto name = seg->name();
  const auto nonce = seg->nonce();
  EXPECT_NO_THROW(Segment::attach(spec, name, nonce));
  auto expectRefused = [&](SegmentSpec s, std::uint64_t n, const std::string& why) {
    try {
      Segment::attach(s, name, n);
      ADD_FAILURE() << "attach accepted a segment that " << why;
    } catch (const ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  auto other = spec;
  other.jobId = "job-b";
  expectRefused(other, nonce, "belongs to job 'job-a', not 'job-b'");
  other = spec;
  other.group = "g2";
  expectRefused(other, nonce, "belongs to group 'g'");
  other = spec;
  other.generation = 4;
  expectRefused(other, nonce, "generation 3");
  expectRefused(spec, nonce + 1, "nonce");
  other = spec;
  other.slotBytes = 4096;
  expectRefused(other, nonce, "DS_SHM_BUFFER_BYTES");
}

TEST(ShmSegment, TheLastRankToAttachRemovesTheName) {
  ds::testing::TempDir dir;
  auto spec = specIn(dir.path());
  auto a = Segment::create(spec);
  const std::string path = a->path();
  auto b = Segment::attach(spec, a->name(), a->nonce());
  a->markAttached(0);
  EXPECT_TRUE(std::filesystem::exists(path));
  b->markAttached(1);
  EXPECT_FALSE(std::filesystem::exists(path)) << "the name must be gone once every rank attached";
  // Both mappings still work after the unlink.
  a->ctl(1).step.store(5);
  EXPECT_EQ(b->ctl(1).step.load(), 5u);
}

TEST(ShmSegment, EachRankPublishesItsMaskAndItsCpu) {
  // Waiters yield only to a peer that last ran on their own CPU: markAttached must publish where the
  // rank runs (a thread pinned to one CPU here) before its pid, like the mask.
  cpu_set_t old;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(old), &old), 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &old)) last = c;
  }
  ASSERT_GE(last, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
  ds::testing::TempDir dir;
  auto spec = specIn(dir.path());
  auto seg = Segment::create(spec);
  seg->ctl(0).cpu.store(-7);
  seg->markAttached(0);
  ::sched_setaffinity(0, sizeof(old), &old);
  EXPECT_EQ(seg->ctl(0).cpu.load(), last);
  EXPECT_EQ(seg->ctl(0).cpuMask[last / 64], std::uint64_t{1} << (last % 64));
  EXPECT_EQ(seg->ctl(0).pid.load(), ::getpid());
}

TEST(ShmSegment, NamesLeftByADeadCreatorAreRemoved) {
  ds::testing::TempDir dir;
  // A pid that surely exited: a child we reaped.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  const std::string stale =
      fmt::format("{}/{}{}-{}-00000000deadbeef", dir.path(), kNamePrefix, pidNamespaceInode(), dead);
  const std::string live =
      fmt::format("{}/{}{}-{}-00000000cafef00d", dir.path(), kNamePrefix, pidNamespaceInode(), ::getpid());
  const std::string foreign = fmt::format("{}/{}1-{}-00000000cafef00d", dir.path(), kNamePrefix, dead);
  for (const auto& p : {stale, live, foreign}) std::ofstream(p) << "x";
  auto spec = specIn(dir.path());
  auto seg = Segment::create(spec);  // create() sweeps first
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live)) << "a live creator's segment must stay";
  EXPECT_TRUE(std::filesystem::exists(foreign)) << "another pid namespace's segment must stay";
}

TEST(ShmSegment, TooLittleSpaceSaysHowMuchIsNeeded) {
  ds::testing::TempDir dir;
  auto spec = specIn(dir.path());
  spec.slotBytes = std::size_t{1} << 46;  // 64 TiB a slot: more than any disk here
  try {
    Segment::create(spec);
    FAIL() << "a segment larger than the file system was accepted";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("needs 268435456"), std::string::npos) << m;  // 2 ranks x 2 slots x 64 TiB, in MiB
    EXPECT_NE(m.find("are free"), std::string::npos) << m;
    EXPECT_NE(m.find("DS_SHM_BUFFER_BYTES"), std::string::npos) << m;
    EXPECT_NE(m.find("--shm-size"), std::string::npos) << m;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "nothing may be left behind";
}

TEST(ShmSegment, AFullTmpfsIsAClearErrorNotASigbus) {
  // A 1 MiB tmpfs (needs root and mount); the statvfs check or posix_fallocate must refuse 2 MiB.
  ds::testing::TempDir dir;
  if (::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  }
  auto spec = specIn(dir.path());
  spec.slotBytes = 512 << 10;
  std::string m;
  try {
    Segment::create(spec);
  } catch (const ConfigError& e) {
    m = e.what();
  }
  ::umount2(dir.path().c_str(), MNT_DETACH);
  EXPECT_NE(m.find("the shm backend needs 2.0 MiB in " + dir.path()), std::string::npos) << m;
}

}  // namespace
}  // namespace ds::comm::shm
