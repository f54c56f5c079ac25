#include "engine/comm/backends/mpi/mpi_wait.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "engine/common/error.h"
#include "engine/env/mpi_runtime.h"

namespace ds::comm::mpidetail {
namespace {

// The default timer slack of a thread (50 µs) would turn every short sleep into ~55 µs; the waiting
// thread is the only one whose sleeps must be short, so it alone asks for 1 µs.
void tightenTimerSlackOnce() {
  thread_local bool done = false;
  if (!done) {
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    done = true;
  }
}

// Open MPI's switch, looked up in the process (libopen-pal is loaded with libmpi). Null: not Open MPI.
struct OpalYield {
  bool (*set)(bool) = nullptr;  // returns the previous setting
  bool alreadyOn = false;
};

const OpalYield& opalYield() {
  static const OpalYield y = [] {
    OpalYield o;
    o.set = reinterpret_cast<bool (*)(bool)>(dlsym(RTLD_DEFAULT, "opal_progress_set_yield_when_idle"));
    const auto* flag = static_cast<const bool*>(dlsym(RTLD_DEFAULT, "opal_progress_yield_when_idle"));
    // Without the flag the setting in force is unknown, and turning it off afterwards could undo
    // the user's mpi_yield_when_idle=1: leave it alone.
    if (flag == nullptr) o.set = nullptr;
    o.alreadyOn = flag != nullptr && *flag;
    return o;
  }();
  return y;
}

std::mutex yieldMu;
int yieldUsers = 0;

}  // namespace

bool YieldWhileIdle::available() { return opalYield().set != nullptr && !opalYield().alreadyOn; }

YieldWhileIdle::YieldWhileIdle() {
  if (!available()) return;
  std::lock_guard<std::mutex> lock(yieldMu);
  if (yieldUsers++ == 0) static_cast<void>(opalYield().set(true));
  engaged_ = true;
}

YieldWhileIdle::~YieldWhileIdle() {
  if (!engaged_) return;
  std::lock_guard<std::mutex> lock(yieldMu);
  if (--yieldUsers == 0) static_cast<void>(opalYield().set(false));
}

std::string errorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(len));
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw BackendError(fmt::format("{}: {}", what, errorText(rc)));
}

PollPolicy pollPolicyFromEnv(const char* value) {
  PollPolicy p;
  if (value == nullptr || *value == '\0') return p;
  long v[4] = {};
  char tail = 0;
  if (std::sscanf(value, "%ld,%ld,%ld,%ld%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4 || v[0] < 0 ||
      v[1] < 0 || v[2] < 1 || v[3] < v[2]) {
    throw ConfigError(
        fmt::format("DS_MPI_WAIT='{}' is not valid; use spin_us,yield_us,first_sleep_us,max_sleep_us "
                    "with first_sleep_us >= 1 and max_sleep_us >= first_sleep_us (default 5,100,2,1000).",
                    value));
  }
  p.spin = std::chrono::microseconds(v[0]);
  p.yield = std::chrono::microseconds(std::max(v[0], v[1]));
  p.firstSleep = std::chrono::microseconds(v[2]);
  p.maxSleep = std::chrono::microseconds(v[3]);
  return p;
}

std::chrono::nanoseconds yieldPhase(const PollPolicy& policy, std::size_t bytes) {
  return policy.yield +
         std::min<std::chrono::nanoseconds>(
             policy.maxYield,
             std::chrono::nanoseconds(static_cast<long long>(static_cast<double>(policy.yieldPerMiB.count()) *
                                                             static_cast<double>(bytes) / (1 << 20))));
}

WaitResult waitAll(MPI_Request* reqs, int n, MPI_Status* statuses, std::size_t bytes,
                   Clock::time_point deadline, const PollPolicy& policy,
                   const std::function<std::string()>& what) {
  // The clock is read only once the first test failed (a read costs ~25-80 ns here; an 8-byte op
  // is often done at the first test).
  Clock::time_point start{};
  bool started = false;
  const auto yieldFor = yieldPhase(policy, bytes);
  auto pause = policy.firstSleep;
  while (true) {
    int flag = 0;
    int rc = 0;
    {
      mpi::CallGuard guard;
      rc = MPI_Testall(n, reqs, &flag, statuses);
    }
    if (rc != MPI_SUCCESS) {
      std::string detail = errorText(rc);
      if (rc == MPI_ERR_IN_STATUS && statuses != MPI_STATUSES_IGNORE) {
        for (int i = 0; i < n; ++i) {
          if (statuses[i].MPI_ERROR != MPI_SUCCESS && statuses[i].MPI_ERROR != MPI_ERR_PENDING) {
            detail = errorText(statuses[i].MPI_ERROR);
            break;
          }
        }
      }
      throw BackendError(fmt::format("{}: {}", what(), detail));
    }
    if (flag != 0) return WaitResult::kDone;
    const auto now = Clock::now();
    if (!started) {
      start = now;
      started = true;
    }
    if (now >= deadline) return WaitResult::kTimedOut;
    const auto elapsed = now - start;
    if (elapsed < policy.spin) continue;
    if (elapsed < yieldFor) {
      sched_yield();
      continue;
    }
    tightenTimerSlackOnce();
    auto left = deadline - now;
    auto nap = std::min<Clock::duration>(pause, left);
    timespec ts{static_cast<time_t>(std::chrono::duration_cast<std::chrono::seconds>(nap).count()),
                static_cast<long>((nap % std::chrono::seconds(1)).count())};
    nanosleep(&ts, nullptr);
    pause = std::min<std::chrono::nanoseconds>(
        std::chrono::nanoseconds(static_cast<long long>(static_cast<double>(pause.count()) * policy.growth) +
                                 1),
        policy.maxSleep);
  }
}

}  // namespace ds::comm::mpidetail
