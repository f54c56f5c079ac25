// The nccl backend on real GPUs (label gpu). Every test skips with the reason when CUDA sees no
// device; with DS_REQUIRE_GPU=1 (scripts/gpu-check.sh) a missing GPU fails instead. World size 1
// runs on one GPU; the multi-rank tests need one GPU per rank (NCCL forbids two ranks on one GPU).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/backends/nccl/nccl_process_group.h"
#include "engine/comm/tests/matrix.h"
#include "engine/common/error.h"
#include "engine/store/hash_store.h"

namespace ds::comm {

// Names the dtype in test names and failure messages ("... GetParam() = bf16").
void PrintTo(DType t, std::ostream* os) { *os << dtypeName(t); }

namespace {

using namespace std::chrono_literals;

int visibleGpus(std::string& why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    why = fmt::format("no usable CUDA device: cudaGetDeviceCount failed with {} ({})", cudaGetErrorString(e),
                      cudaGetErrorName(e));
    return 0;
  }
  if (n == 0) why = "no CUDA device: cudaGetDeviceCount returned 0";
  return n;
}

bool gpuRequired() {
  const char* v = std::getenv("DS_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// Skips the test unless `n` GPUs are visible. A missing GPU altogether fails under DS_REQUIRE_GPU=1.
#define DS_NEED_GPUS(n)                                                                              \
  do {                                                                                               \
    std::string why_;                                                                                \
    int have_ = visibleGpus(why_);                                                                   \
    if (have_ == 0) {                                                                                \
      if (gpuRequired()) FAIL() << "DS_REQUIRE_GPU=1 but " << why_;                                  \
      GTEST_SKIP() << "skipped: " << why_ << " (the nccl tests need a GPU)";                         \
    }                                                                                                \
    if (have_ < (n)) GTEST_SKIP() << "skipped: needs " << (n) << " GPUs, " << have_ << " visible"; \
  } while (0)

void cudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{} failed: {}", what, cudaGetErrorString(e)));
}

// Device memory for the shared matrix. The copy in waits for the device, because the group's
// stream does not wait for the legacy default stream (REFERENCE: inputs must be ready at issue).
testing::MemoryOps deviceMemory(int device) {
  testing::MemoryOps m;
  m.device = Device{DeviceType::kCuda, device};
  m.alloc = [device](std::size_t b) {
    cudaOk(cudaSetDevice(device), "cudaSetDevice");
    void* p = nullptr;
    cudaOk(cudaMalloc(&p, b), "cudaMalloc");
    return p;
  };
  m.free = [](void* p) { cudaFree(p); };
  m.toDevice = [device](void* d, const void* s, std::size_t b) {
    cudaOk(cudaSetDevice(device), "cudaSetDevice");
    cudaOk(cudaMemcpy(d, s, b, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    cudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  };
  m.toHost = [](void* d, const void* s, std::size_t b) {
    cudaOk(cudaMemcpy(d, s, b, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  };
  return m;
}

ProcessGroupOptions worldOne() {
  ProcessGroupOptions o;
  o.rank = 0;
  o.size = 1;
  o.store = std::make_shared<store::HashStore>();
  o.device = Device{DeviceType::kCuda, 0};
  o.timeout = 60s;
  return o;
}

std::string joinFailures(const std::vector<std::string>& f) {
  std::string s;
  for (std::size_t i = 0; i < f.size() && i < 20; ++i) s += "\n  " + f[i];
  if (f.size() > 20) s += fmt::format("\n  ... and {} more", f.size() - 20);
  return s;
}

// Every collective x in/out-of-place x every op x counts 0, 1, odd and 1<<20, for one dtype.
class NcclWorldOneMatrix : public ::testing::TestWithParam<DType> {};

TEST_P(NcclWorldOneMatrix, EveryCollectiveOpCountAndPlacement) {
  DS_NEED_GPUS(1);
  auto pg = makeNcclProcessGroup(worldOne());
  testing::MatrixShape shape;
  shape.counts = {0, 1, 1023, std::size_t{1} << 20};
  shape.largeCount = 0;
  shape.dtypes = {GetParam()};
  auto cases = testing::matrixCases(1, shape);
  ASSERT_GT(cases.size(), 100u);
  auto failures = testing::runCases(*pg, cases, deviceMemory(0));
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << cases.size() << " cases wrong:" << joinFailures(failures);
  EXPECT_FALSE(pg->broken());
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, NcclWorldOneMatrix, ::testing::ValuesIn(kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtypeName(i.param)); });

struct DeviceArray {
  void* p = nullptr;
  explicit DeviceArray(std::size_t bytes) { cudaOk(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DeviceArray() { cudaFree(p); }
};

TEST(NcclWorldOne, CpuBufferIsConfigError) {
  DS_NEED_GPUS(1);
  auto pg = makeNcclProcessGroup(worldOne());
  std::vector<float> host(16, 1.0f);
  Buffer cpu{host.data(), host.size(), DType::kF32, Device{DeviceType::kCpu, 0}};
  try {
    pg->allreduce(cpu);
    FAIL() << "a cpu buffer was accepted by the nccl group";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(pg->broken());
}

TEST(NcclWorldOne, WorkReportsCompletionAndGpuTime) {
  DS_NEED_GPUS(1);
  auto pg = makeNcclProcessGroup(worldOne());
  const std::size_t n = std::size_t{1} << 24;  // 64 MiB: long enough for a measurable duration
  DeviceArray a(n * sizeof(float)), c(n * sizeof(float));
  cudaOk(cudaMemset(a.p, 0, n * sizeof(float)), "cudaMemset");
  cudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  Device dev{DeviceType::kCuda, 0};
  // Out of place, so that even one rank moves 64 MiB and the events measure a non-zero time.
  auto work = pg->allreduce(Buffer{a.p, n, DType::kF32, dev}, Buffer{c.p, n, DType::kF32, dev}, ReduceOp::kSum);
  EXPECT_EQ(work->duration().count(), 0) << "duration before completion";
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!work->isCompleted() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100us);
  ASSERT_TRUE(work->isCompleted());
  work->wait();
  EXPECT_EQ(work->exception(), nullptr);
  EXPECT_GT(work->duration().count(), 0);
  EXPECT_LT(work->duration(), 30s);

  auto barrier = pg->barrier();
  EXPECT_TRUE(barrier->isCompleted()) << "barrier() returns after the GPU passed it";
  barrier->wait();
  EXPECT_EQ(barrier->desc().type, OpType::kBarrier);
}

TEST(NcclWorldOne, OutputOutsideTheResultIsUntouched) {
  DS_NEED_GPUS(1);
  auto pg = makeNcclProcessGroup(worldOne());
  const std::size_t n = 1023, guard = 256;
  DeviceArray in(n * 4), out((n + guard) * 4);
  std::vector<std::int32_t> host(n, 7), sentinel(n + guard, 0x5a5a5a5a);
  cudaOk(cudaMemcpy(in.p, host.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaOk(cudaMemcpy(out.p, sentinel.data(), (n + guard) * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  Device dev{DeviceType::kCuda, 0};
  pg->allreduce(Buffer{in.p, n, DType::kI32, dev}, Buffer{out.p, n, DType::kI32, dev}, ReduceOp::kMax)->wait();
  std::vector<std::int32_t> got(n + guard);
  cudaOk(cudaMemcpy(got.data(), out.p, (n + guard) * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 7) << "element " << i;
  for (std::size_t i = n; i < n + guard; ++i) ASSERT_EQ(got[i], 0x5a5a5a5a) << "guard element " << i << " was written";
}

// The matrix runs alltoall out of place only; in place, the backend sends from a stream-ordered copy.
TEST(NcclWorldOne, InPlaceAlltoallKeepsTheData) {
  DS_NEED_GPUS(1);
  auto pg = makeNcclProcessGroup(worldOne());
  const std::size_t n = 1023;
  DeviceArray a(n * 8);
  std::vector<std::int64_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::int64_t>(i) * 1000003 - 5;
  cudaOk(cudaMemcpy(a.p, host.data(), n * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  Buffer b{a.p, n, DType::kI64, Device{DeviceType::kCuda, 0}};
  auto work = pg->alltoall(b, b);
  EXPECT_TRUE(work->desc().inPlace);
  work->wait();
  std::vector<std::int64_t> got(n);
  cudaOk(cudaMemcpy(got.data(), a.p, n * 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(got, host);
}

TEST(NcclWorldOne, ManyOpsInFlightCompleteInOrder) {
  DS_NEED_GPUS(1);
  auto pg = makeNcclProcessGroup(worldOne());
  const std::size_t n = 4096;
  DeviceArray a(n * 8);
  std::vector<double> host(n, 3.0);
  cudaOk(cudaMemcpy(a.p, host.data(), n * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  Buffer b{a.p, n, DType::kF64, Device{DeviceType::kCuda, 0}};
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 200; ++i) works.push_back(pg->allreduce(b, i % 2 ? ReduceOp::kAvg : ReduceOp::kSum));
  works.back()->wait();
  for (auto& w : works) EXPECT_TRUE(w->isCompleted()) << w->desc().describe();
  for (std::size_t i = 1; i < works.size(); ++i) EXPECT_EQ(works[i]->desc().seq, works[i - 1]->desc().seq + 1);
  cudaOk(cudaMemcpy(host.data(), a.p, n * 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(host[0], 3.0);
  EXPECT_EQ(host[n - 1], 3.0);
}

TEST(NcclWorldOne, DestroyWithOpsInFlightDoesNotHang) {
  DS_NEED_GPUS(1);
  const std::size_t n = std::size_t{1} << 22;
  DeviceArray a(n * 4);
  std::shared_ptr<Work> last;
  auto start = std::chrono::steady_clock::now();
  {
    auto pg = makeNcclProcessGroup(worldOne());
    Buffer b{a.p, n, DType::kF32, Device{DeviceType::kCuda, 0}};
    for (int i = 0; i < 50; ++i) last = pg->allreduce(b);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  // The group waited for its queued ops before it went, so the Work that outlived it has a result.
  EXPECT_NO_THROW(last->wait());
  EXPECT_TRUE(last->isCompleted());
}

// --- one rank per GPU, as threads over one HashStore -----------------------------------------

void runOnGpus(int n, const std::function<void(ProcessGroup&)>& fn, std::chrono::milliseconds timeout = 60s) {
  auto store = std::make_shared<store::HashStore>();
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        cudaOk(cudaSetDevice(r), "cudaSetDevice");  // this rank's buffers live on its GPU
        ProcessGroupOptions o;
        o.rank = r;
        o.size = n;
        o.store = store;
        o.device = Device{DeviceType::kCuda, r};
        o.timeout = timeout;
        o.heartbeatInterval = 200ms;
        auto pg = makeNcclProcessGroup(o);
        fn(*pg);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

int allGpus() {
  std::string why;
  return std::min(visibleGpus(why), 8);
}

TEST(NcclMultiGpu, MatrixOnEveryGpu) {
  DS_NEED_GPUS(2);
  const int n = allGpus();
  testing::MatrixShape shape;
  shape.counts = {0, 1, 1023};
  shape.largeCount = std::size_t{1} << 20;
  std::mutex mu;
  std::vector<std::string> failures;
  runOnGpus(n, [&](ProcessGroup& pg) {
    auto f = testing::runCases(pg, testing::matrixCases(n, shape), deviceMemory(pg.rank()));
    std::lock_guard<std::mutex> lock(mu);
    failures.insert(failures.end(), f.begin(), f.end());
  });
  EXPECT_TRUE(failures.empty()) << failures.size() << " wrong:" << joinFailures(failures);
}

TEST(NcclMultiGpu, MissingRankTimesOutAndAbortsTheCommunicator) {
  DS_NEED_GPUS(2);
  std::mutex mu;
  std::string rank0Error;
  bool brokenAfter = false;
  bool nextOpFailed = false;
  runOnGpus(2, [&](ProcessGroup& pg) {
    DeviceArray a(1024 * 4);
    cudaOk(cudaMemset(a.p, 0, 1024 * 4), "cudaMemset");
    cudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    Buffer b{a.p, 1024, DType::kF32, Device{DeviceType::kCuda, pg.rank()}};
    pg.allreduce(b)->wait();  // both ranks: the communicator works
    if (pg.rank() == 1) {
      std::this_thread::sleep_for(6s);  // never issues the second allreduce, but keeps heartbeating
      return;
    }
    try {
      pg.allreduce(b, ReduceOp::kSum, 2000ms)->wait();
    } catch (const TimeoutError& e) {
      std::lock_guard<std::mutex> lock(mu);
      rank0Error = e.what();
    }
    brokenAfter = pg.broken();
    try {
      pg.allreduce(b)->wait();
    } catch (const BackendError&) {
      nextOpFailed = true;
    }
  });
  EXPECT_NE(rank0Error.find("aborted"), std::string::npos) << rank0Error;
  EXPECT_NE(rank0Error.find("1 (has not reached op #2"), std::string::npos) << rank0Error;
  EXPECT_TRUE(brokenAfter);
  EXPECT_TRUE(nextOpFailed);
}

}  // namespace
}  // namespace ds::comm
