// The ground floor's shared vocabulary: range lists, the median, ISO times, the backend names and
// the collective table, each written once for every floor.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/common/backends.h"
#include "engine/common/collectives.h"
#include "engine/common/error.h"
#include "engine/common/iso_time.h"
#include "engine/common/median.h"
#include "engine/common/ranges.h"

namespace ds {
namespace {

TEST(Vocabulary, RangeListsRoundTrip) {
  EXPECT_EQ(formatRanges({}), "");
  EXPECT_EQ(formatRanges({5, 0, 1, 2, 2, 7, 6}), "0-2,5-7");
  EXPECT_EQ(parseRanges("0-2,5", "cpu list"), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(parseRanges(formatRanges({9, 3, 4, 11}), "x"), (std::vector<int>{3, 4, 9, 11}));
  try {
    parseRanges("3-1", "DSBENCH_CPUS");
    FAIL() << "a backwards range was accepted";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "DSBENCH_CPUS '3-1' is not a cpu list; expected CPU numbers and ranges such as 0-3,8");
  }
  for (const char* bad : {"", ",", "1,", "a", "-1", "1--2", "1234567"}) {
    EXPECT_THROW(parseRanges(bad, "list", "rank list", "rank"), ConfigError) << bad;
  }
}

TEST(Vocabulary, MedianOfOddEvenAndEmpty) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({7}), 7);
}

TEST(Vocabulary, IsoTimesAreUtcAndParseBack) {
  EXPECT_EQ(isoUtc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(isoUtc(86400 + 3661), "1970-01-02T01:01:01Z");
  double ms = -1;
  ASSERT_TRUE(parseIsoTimeMs(isoUtc(1764892800), ms));
  EXPECT_EQ(ms, 1764892800000.0);
  const std::string now = isoUtcNowMs();
  ASSERT_EQ(now.size(), 24u) << now;  // 2026-12-04T23:45:12.345Z
  EXPECT_EQ(now[19], '.');
  EXPECT_EQ(now.back(), 'Z');
  ASSERT_TRUE(parseIsoTimeMs("1970-01-01T01:00:00+01:00", ms));
  EXPECT_EQ(ms, 0);
  ms = 5;
  EXPECT_FALSE(parseIsoTimeMs("2026-13-01T00:00:00Z", ms));
  EXPECT_EQ(ms, 5);
}

TEST(Vocabulary, BackendNamesAndEachAcceleratorsOwn) {
  EXPECT_EQ(backendNames(), (std::vector<std::string>{"nccl", "gloo", "mpi", "shm"}));
  EXPECT_EQ(backendNamesText(), "nccl, gloo, mpi and shm");
  EXPECT_EQ(backendNamesText("or"), "nccl, gloo, mpi or shm");
  EXPECT_TRUE(isBackendName("shm"));
  EXPECT_FALSE(isBackendName("ucc"));
  EXPECT_STREQ(defaultBackendFor("cuda"), "nccl");
  EXPECT_STREQ(defaultBackendFor("cpu"), "gloo");
}

// REFERENCE.md §5's bus factors, and every collective has every fact.
TEST(Vocabulary, EveryCollectiveHasItsFacts) {
  for (const CollectiveFacts* c : kCollectives) {
    ASSERT_NE(c->busFactor, nullptr) << c->name;
    ASSERT_NE(c->copyTraffic, nullptr) << c->name;
    EXPECT_GT(c->busFactor(2), 0) << c->name;
    EXPECT_GT(c->copyTraffic(2), 0) << c->name;
    EXPECT_EQ(collectiveFacts(c->name), c);
  }
  EXPECT_DOUBLE_EQ(kAllreduceFacts.busFactor(8), 1.75);
  EXPECT_DOUBLE_EQ(kAllgatherFacts.busFactor(4), 0.75);
  EXPECT_DOUBLE_EQ(kReduceScatterFacts.busFactor(4), 0.75);
  EXPECT_DOUBLE_EQ(kAlltoallFacts.busFactor(4), 0.75);
  EXPECT_DOUBLE_EQ(kBroadcastFacts.busFactor(4), 1);
  EXPECT_DOUBLE_EQ(kReduceFacts.busFactor(4), 1);
  EXPECT_DOUBLE_EQ(kSendrecvFacts.busFactor(4), 1);
  EXPECT_STREQ(kAllreduceFacts.ncclTestsName, "all_reduce");
  EXPECT_EQ(collectiveFacts("all_reduce"), nullptr);  // our names only; nccl-tests' are the importer's
}

}  // namespace
}  // namespace ds
