// dsbench coll, pure parts: bus factors against REFERENCE.md §5, nccl-tests' size rounding, size
// parsing with K/M/G suffixes, the sweep's sizes, flag checks, and the data check's references.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/coll/coll_options.h"
#include "bench/coll/collective.h"
#include "bench/coll/data_check.h"
#include "bench/coll/harness.h"
#include "engine/comm/memory.h"
#include "engine/common/error.h"

using namespace ds::bench::coll;
using ds::comm::DeviceBuffer;
using ds::comm::makeMemory;

namespace {

// REFERENCE.md §5, "Bandwidth": S and the busbw factor per collective.
struct FactorRow {
  const char* coll;
  double (*factor)(int n);
  bool sTimesN;  // S = count·eltsize·n
};
const FactorRow kTable[] = {
    {"allreduce", [](int n) { return 2.0 * (n - 1) / n; }, false},
    {"reduce_scatter", [](int n) { return (n - 1.0) / n; }, true},
    {"allgather", [](int n) { return (n - 1.0) / n; }, true},
    {"alltoall", [](int n) { return (n - 1.0) / n; }, true},
    {"broadcast", [](int) { return 1.0; }, false},
    {"reduce", [](int) { return 1.0; }, false},
    {"sendrecv", [](int) { return 1.0; }, false},
};

}  // namespace

TEST(CollBusFactor, MatchesReferenceTable) {
  for (const auto& row : kTable) {
    const CollSpec& spec = findCollective(row.coll);
    for (int n : {1, 2, 3, 4, 8, 16, 1024}) {
      EXPECT_DOUBLE_EQ(spec.facts->busFactor(n), row.factor(n)) << row.coll << " n=" << n;
      CollCounts c = spec.counts(4096, n);
      double s = algBytes(spec, c, 4, n);
      EXPECT_DOUBLE_EQ(s, static_cast<double>(c.paramCount) * 4 * (row.sTimesN ? n : 1))
          << row.coll << " n=" << n;
    }
  }
  EXPECT_DOUBLE_EQ(findCollective("allreduce").facts->busFactor(8), 1.75);
  EXPECT_EQ(allCollectives().size(), std::size(kTable));
  // One table of facts: every spec is one of the ground floor's collectives, in its order.
  ASSERT_EQ(allCollectives().size(), std::size(ds::kCollectives));
  for (std::size_t i = 0; i < std::size(ds::kCollectives); ++i) {
    EXPECT_EQ(allCollectives()[i]->facts, ds::kCollectives[i]) << i;
    EXPECT_EQ(ds::collectiveFacts(ds::kCollectives[i]->name), ds::kCollectives[i]);
  }
  EXPECT_EQ(ds::collectiveFacts("allscatter"), nullptr);
}

TEST(CollBusFactor, AlgbwAndBusbwOfAKnownTime) {
  // 2 ranks, 1 MiB f32 allreduce in 1000 us: algbw = 1048576 / 1e9 / 1e-3 = 1.048576 GB/s, busbw x1.
  const CollSpec& spec = findCollective("allreduce");
  CollCounts c = spec.counts(262144, 2);
  double s = algBytes(spec, c, 4, 2);
  double algbw = s / 1e9 / 1e-3;
  EXPECT_DOUBLE_EQ(algbw, 1.048576);
  EXPECT_DOUBLE_EQ(algbw * spec.facts->busFactor(2), 1.048576);
  // allgather over 4 ranks: S is the whole output.
  const CollSpec& ag = findCollective("allgather");
  CollCounts g = ag.counts(1000, 4);
  EXPECT_EQ(g.paramCount, 250u);
  EXPECT_DOUBLE_EQ(algBytes(ag, g, 4, 4), 4000.0);
}

TEST(CollSizeRounding, AsNcclTests) {
  // count = size / eltsize, then per collective (nccl-tests' getCollByteCount).
  auto ar = findCollective("allreduce").counts(10 / 4, 3);  // 10 B of f32 -> 2 elements
  EXPECT_EQ(ar.sendCount, 2u);
  EXPECT_EQ(ar.paramCount, 2u);
  auto ag = findCollective("allgather").counts(1001, 4);
  EXPECT_EQ(ag.sendCount, 250u);
  EXPECT_EQ(ag.recvCount, 1000u);
  EXPECT_EQ(ag.sendInplaceOffset, 250u);
  auto rs = findCollective("reduce_scatter").counts(1001, 4);
  EXPECT_EQ(rs.sendCount, 1000u);
  EXPECT_EQ(rs.recvCount, 250u);
  EXPECT_EQ(rs.recvInplaceOffset, 250u);
  auto a2a = findCollective("alltoall").counts(7, 3);
  EXPECT_EQ(a2a.sendCount, 6u);
  EXPECT_EQ(a2a.paramCount, 2u);
  auto bc = findCollective("broadcast").counts(7, 3);
  EXPECT_EQ(bc.sendCount, 7u);
  EXPECT_EQ(findCollective("all_reduce_perf").facts->name, std::string("allreduce"));
  EXPECT_EQ(findCollective("AllGather").facts->name, std::string("allgather"));
  EXPECT_THROW(findCollective("allscatter"), ds::ConfigError);
}

TEST(CollParseSize, SuffixesAreBinary) {
  EXPECT_EQ(parseSize("8", "-b"), 8u);
  EXPECT_EQ(parseSize("1K", "-b"), 1024u);
  EXPECT_EQ(parseSize("64k", "-b"), 65536u);
  EXPECT_EQ(parseSize("32M", "-b"), 33554432u);
  EXPECT_EQ(parseSize("1G", "-b"), 1073741824u);
  EXPECT_EQ(parseSize("256MB", "-b"), 268435456u);
  EXPECT_EQ(parseSize("4KiB", "-b"), 4096u);
  EXPECT_EQ(parseSize("1.5K", "-b"), 1536u);
  for (const char* bad : {"", "abc", "-5", "12X", "1.2.3", "M"}) {
    EXPECT_THROW(parseSize(bad, "-b"), ds::ConfigError) << bad;
  }
  try {
    parseSize("12X", "-e/--maxbytes");
    FAIL();
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("-e/--maxbytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("K, M or G"), std::string::npos) << e.what();
  }
}

TEST(CollSweepSizes, FactorAndStep) {
  CollFlags f;
  f.minBytes = "8";
  f.maxBytes = "256M";
  f.stepFactor = 4;
  f.stepFactorGiven = true;
  auto sizes = sweepSizes(resolveOptions(f));
  ASSERT_EQ(sizes.size(), 13u);  // 8 B .. 128 MiB (8·4^12 = 128 MiB; 512 MiB > 256 MiB)
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), 134217728u);
  CollFlags g;
  g.minBytes = "1K";
  g.maxBytes = "4K";
  g.stepBytes = "1K";
  EXPECT_EQ(sweepSizes(resolveOptions(g)), (std::vector<std::size_t>{1024, 2048, 3072, 4096}));
  CollFlags d;  // nccl-tests' defaults: one size, 32M
  EXPECT_EQ(sweepSizes(resolveOptions(d)), (std::vector<std::size_t>{33554432}));
}

TEST(CollRepeat, EachPassStartsFurtherAlongSoEverySizeTakesEveryPlace) {
  EXPECT_EQ(repeatOrder(4, 0, 1), (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_EQ(repeatOrder(4, 0, 4), (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_EQ(repeatOrder(4, 1, 4), (std::vector<std::size_t>{1, 2, 3, 0}));
  EXPECT_EQ(repeatOrder(4, 3, 4), (std::vector<std::size_t>{3, 0, 1, 2}));
  EXPECT_EQ(repeatOrder(8, 1, 2), (std::vector<std::size_t>{4, 5, 6, 7, 0, 1, 2, 3}));
  // Every pass is a permutation, and over the passes each size is first exactly once (n = R).
  std::vector<int> first(5, 0);
  for (int rep = 0; rep < 5; ++rep) {
    auto o = repeatOrder(5, rep, 5);
    std::vector<std::size_t> sorted = o;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
    ++first[o[0]];
  }
  EXPECT_EQ(first, (std::vector<int>{1, 1, 1, 1, 1}));
  EXPECT_TRUE(repeatOrder(0, 0, 3).empty());
}

namespace {
std::string configError(const CollFlags& f) {
  try {
    resolveOptions(f);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(CollFlags, BadValuesAreClearErrors) {
  CollFlags f;
  f.minBytes = "2M";
  f.maxBytes = "1M";
  EXPECT_NE(configError(f).find("larger than -e/--maxbytes"), std::string::npos) << configError(f);
  f = {};
  f.stepFactor = 1;
  f.stepFactorGiven = true;
  EXPECT_NE(configError(f).find("-f/--stepfactor 1 is not valid"), std::string::npos) << configError(f);
  f.stepFactor = 0;
  EXPECT_NE(configError(f).find("-f/--stepfactor 0"), std::string::npos);
  f = {};
  f.op = "median";
  EXPECT_NE(configError(f).find("unknown reduction op 'median'"), std::string::npos) << configError(f);
  f = {};
  f.datatype = "float128";
  EXPECT_NE(configError(f).find("unknown datatype 'float128'"), std::string::npos) << configError(f);
  f = {};
  f.collectives = "allreduce,gather";
  EXPECT_NE(configError(f).find("unknown collective 'gather'"), std::string::npos) << configError(f);
  f = {};
  f.average = 4;
  EXPECT_NE(configError(f).find("-a/--average 4"), std::string::npos);
  f = {};
  f.iters = 0;
  EXPECT_NE(configError(f).find("-n/--iters 0"), std::string::npos);
  f = {};
  f.minBytes = "0";
  f.maxBytes = "1K";
  f.stepFactor = 2;
  f.stepFactorGiven = true;
  EXPECT_NE(configError(f).find("never grows"), std::string::npos);
  f = {};
  f.repeat = 0;
  EXPECT_NE(configError(f).find("--repeat 0 is not valid"), std::string::npos) << configError(f);
  // -I: 0, 1 or 2, each said; -K below -n.
  f = {};
  f.perIterTiming = 3;
  EXPECT_NE(
      configError(f).find("-I/--per_iter_timing 3 is not valid: give 0 (no per-iteration columns, the "
                          "default), 1 (nccl-tests' columns i_min i_max i_p99 i_cv% after each #wrong) or "
                          "2 (the tail columns i_p50 i_p90 i_p99 i_p99.9 i_max)."),
      std::string::npos)
      << configError(f);
  f = {};
  f.perIterSkip = 20;
  EXPECT_NE(
      configError(f).find("-K/--per_iter_skip 20 is not valid with -n/--iters 20: the per-iteration "
                          "statistics need at least one iteration that is not skipped. Give -K from 0 to "
                          "19, or raise -n."),
      std::string::npos)
      << configError(f);
  f.iters = 21;
  EXPECT_EQ(configError(f), "");
  EXPECT_EQ(resolveOptions(f).perIterSkip, 20);
  f = {};
  f.perIterTiming = 2;
  EXPECT_EQ(resolveOptions(f).perIterTiming, 2);
  EXPECT_EQ(parsePerIterTiming("+1"), 1);
  for (const char* bad : {"3", "-1", "01", "1.0", "x", "", "0x1", " 1"}) {
    try {
      parsePerIterTiming(bad);
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const ds::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("is not valid: give 0"), std::string::npos) << e.what();
    }
  }
}

TEST(CollFlags, AllExpandsAndDuplicatesRunOnce) {
  CollFlags f;
  f.op = "all";
  f.datatype = "all";
  f.collectives = "allreduce,all";
  auto o = resolveOptions(f);
  EXPECT_EQ(o.ops.size(), 5u);
  EXPECT_EQ(o.dtypes.size(), 8u);
  EXPECT_EQ(o.collectives.size(), 7u);
  EXPECT_EQ(o.collectives[0], "allreduce");
  f.datatype = "float,f32,half";
  EXPECT_EQ(resolveOptions(f).dtypes.size(), 2u);
  EXPECT_EQ(splitList(" gloo, mpi ,,nccl"), (std::vector<std::string>{"gloo", "mpi", "nccl"}));
}

TEST(CollCombine, AverageFlag) {
  std::vector<double> t{10, 30, 20};
  EXPECT_DOUBLE_EQ(combineTimes(t, 0), 10);
  EXPECT_DOUBLE_EQ(combineTimes(t, 1), 20);
  EXPECT_DOUBLE_EQ(combineTimes(t, 2), 10);
  EXPECT_DOUBLE_EQ(combineTimes(t, 3), 30);
}

TEST(CollDataCheck, ReferencesAreExactInEveryDtype) {
  for (auto t : ds::comm::kAllDTypes) {
    for (auto op : ds::comm::kAllReduceOps) {
      CheckArgs a{0, 4, 0, op, t, 3, {}};
      for (std::size_t i = 0; i < 50; ++i) {
        double v = reducedValue(a, i);
        EXPECT_EQ(v, roundTo(t, v));
        if (op == ds::comm::ReduceOp::kProd) {
          EXPECT_EQ(v, 2.0) << "one rank contributes a 2";
        }
      }
    }
  }
  // countWrong finds a corrupted element of an allreduce result.
  const CollSpec& ar = findCollective("allreduce");
  CheckArgs a{1, 2, 0, ds::comm::ReduceOp::kSum, ds::comm::DType::kF32, 1, ar.counts(64, 2)};
  std::vector<float> out(64);
  for (std::size_t i = 0; i < 64; ++i) out[i] = static_cast<float>(reducedValue(a, i));
  EXPECT_EQ(countWrong(ar, a, out.data()), 0);
  out[7] += 1;
  out[9] = -100;
  EXPECT_EQ(countWrong(ar, a, out.data()), 2);
  // reduce checks the root only.
  const CollSpec& rd = findCollective("reduce");
  EXPECT_EQ(countWrong(rd, a, out.data()), 0);
}

// The periodic fill and check (CollSpec::period, checkBlock) must say exactly what the element-by-
// element definitions say, for every collective, rank count, rank, size (below, at and across
// periods and blocks) and dtype; a spec that claims a wrong period or block fails here.
TEST(CollDataCheck, PeriodicFillAndCheckMatchEveryElementsDefinition) {
  using ds::comm::DType;
  for (const CollSpec* spec : allCollectives()) {
    for (int n : {2, 3}) {
      for (std::size_t count : {std::size_t{1}, std::size_t{96}, std::size_t{97 * 3 + 2},
                                std::size_t{1009 * 2 + 5}, std::size_t{6000}}) {
        for (DType t : {DType::kF32, DType::kBF16, DType::kI8}) {
          for (int rank = 0; rank < n; ++rank) {
            const CollCounts c = spec->counts(count, n);
            CheckArgs a{rank, n, n - 1, ds::comm::ReduceOp::kSum, t, 5, c};
            const std::string what = fmt::format("{} n={} count={} dtype={} rank={}", spec->facts->name, n,
                                                 count, ds::comm::dtypeName(t), rank);
            const std::size_t elt = ds::comm::dtypeSize(t);
            // The fill against input(., i) element by element.
            std::vector<char> fast(c.sendCount * elt), slow(c.sendCount * elt);
            fillHost(fast.data(), c.sendCount, t, spec->period,
                     [&](std::size_t i) { return spec->input(a, rank, i); });
            fillHost(slow.data(), c.sendCount, t, 0, [&](std::size_t i) { return spec->input(a, rank, i); });
            ASSERT_EQ(fast, slow) << what;
            // The check against expected(., i) element by element: a right result passes, and every
            // corrupted element is counted, first and last of each block included.
            std::vector<char> got(c.recvCount * elt);
            fillHost(got.data(), c.recvCount, t, 0, [&](std::size_t i) { return spec->expected(a, i); });
            if (!spec->checked(a)) {
              EXPECT_EQ(countWrong(*spec, a, got.data()), 0) << what;
              continue;
            }
            ASSERT_EQ(countWrong(*spec, a, got.data()), 0) << what;
            std::vector<std::size_t> bad;
            const std::size_t block = spec->checkBlock != nullptr ? spec->checkBlock(a) : c.recvCount;
            for (std::size_t b = 0; block > 0 && b < c.recvCount; b += block) {
              bad.push_back(b);
              bad.push_back(std::min(b + block, c.recvCount) - 1);
            }
            if (c.recvCount > 200) bad.push_back(200);
            std::sort(bad.begin(), bad.end());
            bad.erase(std::unique(bad.begin(), bad.end()), bad.end());
            for (std::size_t i : bad) {
              ds::comm::setElementFromDouble(got.data(), i, t, spec->expected(a, i) + 1);
            }
            EXPECT_EQ(countWrong(*spec, a, got.data()), static_cast<long long>(bad.size())) << what;
          }
        }
      }
    }
  }
}

// Host buffers are placed as torch places a CPU tensor (64-byte aligned, as c10's gAlignment), and
// zeroed: the same placement for dsbench and the raw-MPI peer, whatever the size.
TEST(CollHostMemory, BuffersAreAlignedAsTorchTensorsAndZeroed) {
  auto mem = makeMemory(ds::comm::Device{});
  ASSERT_TRUE(mem->isHost());
  for (std::size_t bytes :
       {std::size_t{1}, std::size_t{100}, std::size_t{4096}, std::size_t{3} << 20, std::size_t{64} << 20}) {
    DeviceBuffer buf(*mem, bytes);
    ASSERT_NE(buf.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf.data()) % 64, 0u) << bytes;
    const auto* p = static_cast<const unsigned char*>(buf.data());
    EXPECT_EQ(std::count(p, p + bytes, 0), static_cast<std::ptrdiff_t>(bytes)) << bytes;
  }
}
