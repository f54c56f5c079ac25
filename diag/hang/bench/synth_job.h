// A hung training job at scale, synthesised: every rank's Flight Recorder dump written as torch's C++
// pickler writes it (protocol 2, strings memoized by value, shared frame dicts memoized, MARK ... APPENDS
// and MARK ... SETITEMS, LONG1 for nanosecond times), for the `dsdiag hang` benchmark (hang_scale.cpp)
// and its smoke test. Not a reader's test oracle: the reader is tested on real torch dumps.
//
// The job: `ranks` ranks, tensor-parallel groups of `tp` neighbours ("TENSOR_MODEL_PARALLEL_GROUP",
// pg names 1..ranks/tp) and data-parallel groups of every tp-th rank ("DATA_PARALLEL_GROUP", the next tp
// names), as Megatron builds them, plus the default group "0" whose pg_config lists every rank. Each
// step: two TP all_reduces (bf16 activations), two DP all_reduces (fp32 gradient buckets), and a world
// all_reduce of the loss every 25 steps. The ring buffer keeps each rank's last `entries` ops (NCCL's
// default TORCH_FR_BUFFER_SIZE is 2000).
//
// The fault: at step `faultStep` the culprit rank's host stalls after its TP ops and before the first
// DP all_reduce (it never enqueues it and issues nothing after). Its DP group waits in that all_reduce;
// every other rank finishes the step and waits in the next step's TP all_reduce for its TP peer, which
// is one of those waiting in the DP group: one stalled host stops all ranks, as at scale it does.
#pragma once

#include <cstdint>
#include <string>

namespace ds::diag::hang::bench {

struct SynthJob {
  int ranks = 16384;
  int entries = 2000;      // per rank: the ring buffer's length
  int tp = 8;              // ranks per tensor-parallel group; must divide ranks
  int culprit = -1;        // -1: ranks * 3 / 4 + 5 (not rank 0, not the first file)
  int faultStep = -1;      // -1: a step late enough that every buffer is full (about 5,000 ops)
  std::int64_t startNs = 1'767'225'600'000'000'000;  // 2026-01-01T00:00:00Z, the first step's time

  // The defaults resolved and checked; throws ConfigError with a sentence for an impossible job.
  SynthJob resolved() const;
};

// What dsdiag hang must find in the synthesised dumps: the culprit holds two ops, the DP all_reduce
// it never entered and the next step's TP all_reduce its TP peers (who finished the step) wait in.
// Either may head the verdict; the other is a further claim on the same culprit.
struct SynthExpectation {
  int culprit = -1;
  std::string kind;  // "stalled_host"
  struct Place {
    std::string pgName;
    std::int64_t seq = -1;
  };
  Place dp, tp;
};
SynthExpectation expectationOf(const SynthJob& job);

// The pickle bytes of one rank's dump (job must be resolved()).
std::string synthDumpPickle(const SynthJob& job, int rank);

// Writes every rank's dump to dir/rank_<r> (the folder must exist); returns the bytes written. Throws
// IoError naming the file when one cannot be written.
std::uint64_t writeSynthDumps(const SynthJob& job, const std::string& dir);

}  // namespace ds::diag::hang::bench
