#include "engine/accelerator/accelerator.h"

#include <gtest/gtest.h>

#include "engine/common/error.h"

using ds::accel::selectAccelerator;
using ds::env::MapEnv;

TEST(Accelerator, OverrideCpu) {
  MapEnv env({{"DS_ACCELERATOR", "cpu"}});
  auto s = selectAccelerator(env);
  EXPECT_TRUE(s.overridden);
  EXPECT_EQ(s.accelerator->name(), "cpu");
  EXPECT_EQ(s.accelerator->communicationBackendName(), "gloo");
  ASSERT_EQ(s.accelerator->deviceCount(), 1);
  auto devs = s.accelerator->devices();
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_GT(devs[0].totalMemoryBytes, 0u);
  EXPECT_FALSE(devs[0].name.empty());
}

TEST(Accelerator, UnknownNameListsTheValidOnes) {
  MapEnv env({{"DS_ACCELERATOR", "tpu"}});
  try {
    selectAccelerator(env);
    FAIL() << "accepted tpu";
  } catch (const ds::ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("DS_ACCELERATOR='tpu'"), std::string::npos) << msg;
    // DeepSpeed's ten names, and the two dsperf runs on.
    EXPECT_NE(msg.find("cuda, cpu, xpu, npu, mps, hpu, mlu, sdaa, supa, klxpu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dsperf runs on cpu and cuda"), std::string::npos) << msg;
  }
}

TEST(Accelerator, DeepSpeedsOtherAcceleratorsAreNamedAsUnsupported) {
  MapEnv env({{"DS_ACCELERATOR", "xpu"}});
  try {
    selectAccelerator(env);
    FAIL() << "accepted xpu";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("xpu is a DeepSpeed accelerator that dsperf does not support"),
              std::string::npos)
        << e.what();
  }
}

TEST(Accelerator, AutoDetectFallsBackToCpuWithAReasonWhenNoGpu) {
  MapEnv env;
  auto s = selectAccelerator(env);
  EXPECT_FALSE(s.overridden);
  std::string why;
  if (ds::accel::tryMakeCudaAccelerator(why)) {
    EXPECT_EQ(s.accelerator->name(), "cuda");
    EXPECT_EQ(s.accelerator->communicationBackendName(), "nccl");
  } else {
    EXPECT_EQ(s.accelerator->name(), "cpu");
    EXPECT_FALSE(s.reason.empty());
  }
}

TEST(Accelerator, RequestingCudaWithoutADeviceIsAClearError) {
  std::string why;
  if (ds::accel::tryMakeCudaAccelerator(why)) GTEST_SKIP() << "a CUDA device is present";
  MapEnv env({{"DS_ACCELERATOR", "cuda"}});
  try {
    selectAccelerator(env);
    FAIL() << "cuda accepted without a device";
  } catch (const ds::ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("DS_ACCELERATOR=cuda"), std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  }
}
