#include "engine/comm/liveness.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "engine/common/error.h"
#include "engine/common/log.h"

namespace ds::comm {
namespace {

// A process group's heartbeat: the beat's counter and its state "<entered> <completed> <failed>".
struct Progress {
  std::uint64_t entered = 0;
  std::uint64_t completed = 0;
  std::uint64_t beat = 0;
  int failed = 0;  // the rank hit an error itself (and reports it in its own log)
};

std::optional<Progress> parseProgress(const store::Bytes& b) {
  auto beat = parseBeat(store::toString(b));
  if (!beat) return std::nullopt;
  Progress out;
  out.beat = beat->counter;
  std::istringstream in(beat->state);
  if (!(in >> out.entered >> out.completed)) return std::nullopt;
  in >> out.failed;  // optional
  return out;
}

}  // namespace

GroupLiveness::GroupLiveness(LivenessOptions options, LivenessHooks hooks)
    : o_(std::move(options)), hooks_(std::move(hooks)) {
  if (!heartbeatsOn()) return;
  HeartbeatOptions h;
  h.store = o_.store;
  h.key = key(fmt::format("hb/{}", o_.rank));
  h.interval = o_.heartbeatInterval;
  h.setTimeout = std::max(o_.heartbeatInterval * 5, Duration(5000));
  h.state = [this] {
    return fmt::format("{} {} {}", entered_.load(), completed_.load(), failedPublished_.load() ? 1 : 0);
  };
  h.onFirstError = [rank = o_.rank](const std::exception& e) {
    log::debug("heartbeat of rank {} could not reach the store: {}", rank, e.what());
  };
  h.afterBeat = hooks_.afterBeat;
  h.stopping = o_.stopping;
  heartbeat_ = std::make_unique<Heartbeat>(std::move(h));
}

GroupLiveness::~GroupLiveness() { stop(); }

void GroupLiveness::start() {
  if (heartbeat_) heartbeat_->start();
}

void GroupLiveness::stop() {
  {
    std::lock_guard<std::mutex> lock(watchMu_);
    stop_ = true;
  }
  watchCv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (heartbeat_) heartbeat_->stop();
}

std::string GroupLiveness::key(const std::string& suffix) const {
  return fmt::format("pg/{}/{}", o_.groupName, suffix);
}

void GroupLiveness::watch(std::shared_ptr<Work> work, bool onCaller) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(watchMu_);
    if (work && !watchdogStarted_) {
      watchdogStarted_ = true;
      watchdog_ = std::thread([this] { watchdogLoop(); });
    }
    // Woken only when it must look sooner than it would: asleep until an earlier op's deadline, it
    // moves on to the op watched then. A wake per start and end of every op cost two context
    // switches per op (on the rank's one core when bound: ~20 us per blocking mpi op).
    wake = work && work->deadline() < watchdogArmedUntil_;
    watched_ = std::move(work);
    watchedOnCaller_ = onCaller;
  }
  if (wake) watchCv_.notify_all();
}

void GroupLiveness::watchdogLoop() {
  std::unique_lock<std::mutex> lock(watchMu_);
  while (!stopping()) {
    if (!watched_) {
      watchdogArmedUntil_ = Work::Clock::time_point::max();
      watchCv_.wait(lock, [&] { return stopping() || watched_ != nullptr; });
      continue;
    }
    std::shared_ptr<Work> work = watched_;
    watchdogArmedUntil_ = work->deadline();
    if (watchCv_.wait_until(lock, work->deadline() + o_.watchdogGrace,
                            [&] { return stopping() || watched_ != work; })) {
      continue;
    }
    const bool onCaller = watchedOnCaller_;
    lock.unlock();
    if (work->expire()) {
      // Nobody was waiting for the op: the log is the only place its diagnosis shows now.
      std::exception_ptr error = work->exception();
      bool stuck = false;
      if (onCaller && error) {
        std::lock_guard<std::mutex> relock(watchMu_);
        stuck = watched_ == work;  // the caller has not come back from the call during the diagnosis
      }
      try {
        if (error) std::rethrow_exception(error);
      } catch (const std::exception& e) {
        log::error("{} (reported by the process group's watchdog: {})", e.what(),
                   stuck ? "the op runs on the caller's thread, inside a call that cannot be interrupted, "
                           "so the job ends now"
                         : "no wait() was there to raise it");
      }
      if (stuck && hooks_.abortHungCall) hooks_.abortHungCall(work->desc());
    }
    if (hooks_.afterExpiry) hooks_.afterExpiry();
    lock.lock();
    if (watched_ == work) watched_.reset();  // abandoned: the worker may never return from it
  }
}

void GroupLiveness::publishFailure() {
  if (failedPublished_.exchange(true) || !heartbeatsOn()) return;
  try {
    heartbeat_->beatNow(Duration(2000));
  } catch (const Error&) {
    // Best effort: the failure itself is what this rank reports.
  }
}

std::exception_ptr GroupLiveness::diagnoseTimeout(const OpDesc& desc, const std::string& backend,
                                                  const std::string& cause) {
  publishFailure();
  std::string head =
      fmt::format("{} {} timed out on rank {} of {}: {}.", backend, desc.describe(), o_.rank, o_.size, cause);
  std::string who = missingRanks(desc);
  if (who.empty() && desc.isPointToPoint()) {
    // Heartbeats count collectives only: an alive peer may still never have posted the matching op.
    who = fmt::format(
        " Its peer, rank {}, is alive but did not post the matching {} (tag {}, {} bytes) in time, or the "
        "transport between them stalled: look at what rank {} was doing then (its log, its flight recorder "
        "dump, py-spy dump).",
        desc.root, desc.type == OpType::kSend ? "recv" : "send", desc.tag, desc.bytes, desc.root);
  } else if (who.empty()) {
    who = " Every other rank reached this op and is alive, so the backend itself stalled (network?).";
  }
  return std::make_exception_ptr(
      TimeoutError(head + who + " The group is now unusable; restart the job once the cause is fixed."));
}

std::string GroupLiveness::missingRanks(const OpDesc& desc) {
  if (!heartbeatsOn()) return "";
  auto& s = *o_.store;
  const Duration opTimeout(5000);
  std::string storeError;
  // Returns false when the store could not be read (typically: rank 0, which hosts it, has exited).
  auto snapshot = [&](std::map<int, Progress>& beats) {
    for (int r = 0; r < o_.size; ++r) {
      std::string k = key(fmt::format("hb/{}", r));
      try {
        if (s.check({k}, opTimeout)) {
          if (auto b = parseProgress(s.get(k, opTimeout))) beats[r] = *b;
        }
      } catch (const Error& e) {
        storeError = e.what();
        return false;
      }
    }
    return true;
  };
  std::map<int, Progress> first;
  std::map<int, Progress> second;
  Duration pause = std::min<Duration>(o_.heartbeatInterval * 3, Duration(5000));
  auto storeGone = [&] {
    return fmt::format(
        " Which ranks are missing cannot be told: the store at {} cannot be read ({}); rank 0, which "
        "hosts it, has probably failed or exited already, so look at rank 0's error.",
        s.describe(), storeError);
  };
  // Two looks, a few heartbeats apart: one look alone cannot tell a silent rank from a slow one.
  if (!snapshot(first)) return storeGone();
  std::this_thread::sleep_for(pause);
  if (!snapshot(second)) return storeGone();
  std::vector<std::string> missing;
  std::vector<int> failedToo;
  for (int r = 0; r < o_.size; ++r) {
    if (r == o_.rank) continue;
    auto b = second.find(r);
    if (b != second.end() && b->second.failed != 0) {
      failedToo.push_back(r);  // it hit the error too and says so itself: not a cause
      continue;
    }
    if (b == second.end()) {
      missing.push_back(
          fmt::format("{} (never published progress: it died early, never joined, or the store is "
                      "unreachable)",
                      r));
      continue;
    }
    auto a = first.find(r);
    bool silent = a != first.end() && a->second.beat == b->second.beat;
    if (!desc.isPointToPoint() && b->second.entered < desc.seq) {
      missing.push_back(fmt::format(
          "{} (has not reached op #{}; its last reported op was #{}{})", r, desc.seq, b->second.entered,
          silent
              ? fmt::format(", and it stopped responding: no heartbeat for {:.1f} s", pause.count() / 1000.0)
              : ""));
    } else if (silent) {
      missing.push_back(
          fmt::format("{} (stopped responding inside op #{}: no heartbeat for {:.1f} s; killed, "
                      "stopped or hung)",
                      r, b->second.entered, pause.count() / 1000.0));
    }
  }
  std::string also =
      failedToo.empty() ? ""
                        : fmt::format(" Rank{} {} failed in this group as well and report{} their own error.",
                                      failedToo.size() == 1 ? "" : "s", fmt::join(failedToo, ", "),
                                      failedToo.size() == 1 ? "s" : "");
  if (missing.empty()) return also;
  return fmt::format(" Ranks that never arrived: {}.{}", fmt::join(missing, "; "), also);
}

}  // namespace ds::comm
