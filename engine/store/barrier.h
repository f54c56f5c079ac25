// Barriers over any Store. Both block up to their timeout and never longer.
//
// Names: a barrier's keys live under "barrier/<name>/", and they are never deleted (a late rank must
// still find them). So every barrier *instance* needs its own name, e.g. "init", "step/17",
// "ckpt/3"; reusing a name in one store makes the second use pass at once or fail.
#pragma once

#include <string>

#include "engine/store/store.h"

namespace ds::store {

// Every rank add()s to a counter; the last to arrive sets a done key, the others wait for it.
// Throws TimeoutError saying how many of worldSize ranks arrived; ConfigError if more than worldSize
// ranks entered (a reused name or a wrong world size).
void storeBarrier(Store& store, const std::string& name, int rank, int worldSize, Timeout timeout = {});

// c10d's monitored_barrier: every rank other than 0 sets an arrival key; rank 0 waits up to
// `timeout` for all of them and publishes a verdict, which the others wait for (up to timeout plus
// a grace period). When ranks are missing, rank 0 throws TimeoutError "Ranks 1, 2 failed to pass
// monitoredBarrier in 2000 ms" and the others throw a TimeoutError quoting that verdict; if rank 0
// itself never answers, they throw a TimeoutError that says so.
void monitoredBarrier(Store& store, const std::string& name, int rank, int worldSize, Duration timeout);

}  // namespace ds::store
