// NCCL version codes (REFERENCE.md §6) and the nccl factory's checks that need no GPU.
#include <gtest/gtest.h>
#include <nccl.h>

#include <memory>

#include "engine/comm/backends/nccl/nccl_process_group.h"
#include "engine/comm/backends/nccl/nccl_version.h"
#include "engine/common/error.h"
#include "engine/store/hash_store.h"

namespace ds::comm {
namespace {

TEST(NcclVersion, EncodesOldAndNewSchemes) {
  EXPECT_EQ(encodeNcclVersion(2, 8, 4), 2804);
  EXPECT_EQ(encodeNcclVersion(2, 23, 4), 22304);
  EXPECT_EQ(encodeNcclVersion(2, 9, 0), 20900);  // the first code of the new scheme
  EXPECT_EQ(encodeNcclVersion(2, 4, 8), 2408);
}

TEST(NcclVersion, DecodesOldAndNewSchemes) {
  EXPECT_EQ(decodeNcclVersion(2804), (NcclVersion{2, 8, 4, 2804}));
  EXPECT_EQ(decodeNcclVersion(22304), (NcclVersion{2, 23, 4, 22304}));
  EXPECT_EQ(decodeNcclVersion(20900), (NcclVersion{2, 9, 0, 20900}));
  EXPECT_EQ(decodeNcclVersion(2804).str(), "2.8.4");
  EXPECT_EQ(decodeNcclVersion(22304).str(), "2.23.4");
}

TEST(NcclVersion, RoundTrips) {
  for (int major : {2, 3}) {
    for (int minor = 0; minor < 40; ++minor) {
      for (int patch : {0, 1, 9, 42}) {
        NcclVersion v = decodeNcclVersion(encodeNcclVersion(major, minor, patch));
        EXPECT_EQ(v.major, major);
        EXPECT_EQ(v.minor, minor);
        EXPECT_EQ(v.patch, patch);
      }
    }
  }
}

TEST(NcclVersion, HeaderMatchesNcclMacros) {
  NcclVersions v = ncclVersions();
  EXPECT_EQ(v.header.code, NCCL_VERSION_CODE);
  EXPECT_EQ(v.header.major, NCCL_MAJOR);
  EXPECT_EQ(v.header.minor, NCCL_MINOR);
  EXPECT_EQ(v.header.patch, NCCL_PATCH);
  EXPECT_NE(v.describe().find("NCCL_VERSION_CODE"), std::string::npos);
}

// ncclGetVersion needs no GPU, so the runtime library's version is known on this machine too.
TEST(NcclVersion, RuntimeVersionIsReadable) {
  NcclVersions v = ncclVersions();
  ASSERT_TRUE(v.runtimeError.empty()) << v.runtimeError;
  EXPECT_GE(v.runtime.major, 2);
  EXPECT_EQ(encodeNcclVersion(v.runtime.major, v.runtime.minor, v.runtime.patch), v.runtime.code);
  EXPECT_EQ(v.mismatch(), v.runtime.code != v.header.code);
}

TEST(NcclFactory, RejectsCpuDevice) {
  ProcessGroupOptions o;
  o.store = std::make_shared<store::HashStore>();
  o.device = Device{DeviceType::kCpu, 0};
  try {
    makeNcclProcessGroup(o);
    FAIL() << "a cpu device was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gloo"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds::comm
