// The wait loop's tuning knob (DS_MPI_WAIT) is parsed strictly; YieldWhileIdle switches Open MPI's
// yield-when-idle setting on for its lifetime and restores it. And a plain MPI is never handed device
// buffers (MpiDevice).
#include "engine/comm/backends/mpi/mpi_wait.h"
#include "engine/comm/backends/mpi/mpi_process_group.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/common/error.h"

using ds::comm::mpidetail::pollPolicyFromEnv;
using ds::comm::mpidetail::YieldWhileIdle;

TEST(MpiWaitPolicy, DefaultsWhenUnset) {
  auto p = pollPolicyFromEnv(nullptr);
  EXPECT_EQ(p.spin, std::chrono::microseconds(5));
  EXPECT_EQ(p.yield, std::chrono::microseconds(100));
  EXPECT_EQ(p.maxSleep, std::chrono::milliseconds(1));
  EXPECT_EQ(pollPolicyFromEnv("").yield, p.yield);
}

TEST(MpiWaitPolicy, ParsesFourNumbers) {
  auto p = pollPolicyFromEnv("0,50,3,500");
  EXPECT_EQ(p.spin, std::chrono::microseconds(0));
  EXPECT_EQ(p.yield, std::chrono::microseconds(50));
  EXPECT_EQ(p.firstSleep, std::chrono::microseconds(3));
  EXPECT_EQ(p.maxSleep, std::chrono::microseconds(500));
}

TEST(MpiWaitPolicy, RejectsMalformedValues) {
  for (const char* bad : {"1,2,3", "a,b,c,d", "1,2,0,5", "1,2,10,5", "1,2,3,4,5", "-1,2,3,4"}) {
    try {
      pollPolicyFromEnv(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ds::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("DS_MPI_WAIT"), std::string::npos) << e.what();
    }
  }
}

// Open MPI's flag is a plain global of libopen-pal (loaded with libmpi), set without MPI_Init.
TEST(MpiYieldWhileIdle, OnWhileAGuardLivesAndRestoredAfterTheLast) {
  const auto* flag = static_cast<const bool*>(dlsym(RTLD_DEFAULT, "opal_progress_yield_when_idle"));
  if (flag == nullptr) GTEST_SKIP() << "not Open MPI: no opal_progress_yield_when_idle in this process";
  // Where the setting is on already (the user's OMPI_MCA_mpi_yield_when_idle, or Open MPI's own on
  // an oversubscribed node), YieldWhileIdle leaves it alone by design: there is nothing to switch.
  const char* env = std::getenv("OMPI_MCA_mpi_yield_when_idle");
  const std::string asked = env == nullptr ? "" : env;
  if (*flag || !(asked.empty() || asked == "0" || asked == "false" || asked == "no")) {
    GTEST_SKIP() << "Open MPI's yield setting is already on here (OMPI_MCA_mpi_yield_when_idle='" << asked
                 << "', flag " << (*flag ? "on" : "off")
                 << "); YieldWhileIdle does nothing then. Unset the variable to run this test.";
  }
  ASSERT_TRUE(YieldWhileIdle::available());
  {
    YieldWhileIdle outer;
    EXPECT_TRUE(*flag);
    {
      YieldWhileIdle inner;
      EXPECT_TRUE(*flag);
    }
    EXPECT_TRUE(*flag) << "the inner guard turned it off while the outer one lives";
  }
  EXPECT_FALSE(*flag);
}

// issue 38: on a GPU node a plain MPI must never be handed device pointers. Debian's Open MPI is built
// without CUDA support, so the mpi backend works on host memory and refuses a cuda device by name.
TEST(MpiDevice, APlainMpiWorksOnHostMemoryAndRefusesDeviceBuffers) {
  std::string why;
  EXPECT_FALSE(ds::comm::mpiCudaAware(&why));
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  EXPECT_TRUE(ds::comm::backendTakesDeviceBuffers("nccl"));
  EXPECT_FALSE(ds::comm::backendTakesDeviceBuffers("mpi"));
  EXPECT_FALSE(ds::comm::backendTakesDeviceBuffers("gloo"));
  EXPECT_FALSE(ds::comm::backendTakesDeviceBuffers("shm"));
  ds::comm::ProcessGroupOptions o;
  o.device = ds::comm::Device{ds::comm::DeviceType::kCuda, 0};
  try {
    ds::comm::makeMpiProcessGroup(o);
    ADD_FAILURE() << "a cuda device was accepted by a plain MPI";
  } catch (const ds::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read device memory"), std::string::npos) << e.what();
  }
}
