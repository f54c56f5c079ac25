// Per-host samples: every figure of a run that can be judged, history-keyed or exported, one number
// each, with the host (and, for a link, the peer) it is about. This is the one view that baselines,
// checks (reports/baseline), the per-host history and the exports (reports/export) read, so that
// they all agree on what "host X's allreduce busbw at 1 GiB" was in a run.
//
// Where a figure is about a host:
// - a sweep run on one host (the nightly per-node check, as Azure's health checks run it): every row
//   is that host's;
// - a sweep run across hosts: a row is the job's, not any one host's (a collective ends when its
//   slowest rank does), so its samples name scope "job" and the job's host list;
// - a fleet run (dsdiag --world fleet mode): each measured link pair is a "link" sample of both its
//   hosts, and each host gets a "host" sample, the median of its links.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "reports/run/run_file.h"

namespace ds::report {

struct Sample {
  std::string scope;  // "host", "link" or "job"
  std::string host;   // the host it is about; for scope "job", the job's host list ("node[01-04]")
  std::string peer;   // scope "link": the other end's host; "" otherwise
  int rank = -1;      // the rank that measured it, when one did (link samples: the measuring end)
  std::string runId;  // RunFile::runId
  std::string time;   // the run's start time, ISO 8601 UTC ("" unknown)
  std::string label;  // the run's cluster label ("" none)
  // What was measured. Sweep rows: metric "busbw" with collective/backend/dtype/op/bytes of the row.
  // Fleet: metric "link_bw" (GB/s) or "link_latency" (us), collective "pair", backend "tcp".
  std::string metric;
  std::string collective, backend, dtype, op;
  std::size_t bytes = 0;
  int worldSize = 0;
  std::string place;  // sweep: "out" or "in" (out-of-place when it was measured); "" otherwise
  double value = 0;
  std::string unit;  // "GB/s" or "us"
  bool higherIsBetter = true;
  // The key a baseline is kept under besides the pattern above: the host's SKU (hw::skuKey) and the
  // software stack that moved the bytes ("nccl 2.21.5", "open_mpi 4.1.4", "gloo 0.0.0", "tcp").
  std::string sku = "unknown";
  std::string stack;
  // The hardware bound that applies to the figure (reports/baseline/expected.h), for absolute floors
  // ("below 50% of line rate is never normal"): 0 and "" when the run recorded no hardware.
  double boundGBps = 0;
  std::string boundName;  // "2x200 Gb/s NIC line rate", "NVLink 18x25 GB/s", ...
};

// The samples of one run, in file order. Sweep rows that were not measured, or measured wrong data,
// give none; diag files without fleet mode, train and world files give none.
std::vector<Sample> samplesOf(const RunFile& run);

// The pattern part of a sample's key, the same for every host: "busbw allreduce nccl f32 sum 1073741824
// out w16" or "link_bw pair tcp w16". Hosts, runs and time are not in it.
std::string patternKey(const Sample& s);

}  // namespace ds::report
