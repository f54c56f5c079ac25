#include "reports/train/train_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ds::report {

namespace {

bool hasEval(const TrainRunRecord& r) {
  return std::isfinite(r.evalLossStart) && std::isfinite(r.evalLossEnd);
}

std::string row(const TrainRunRecord& r, double Percentiles::*q, bool eval) {
  return fmt::format(
      "{:>5} {:>7.2f} {:>5} {:>9} {:>4} {:>7} | {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} | "
      "{:>9.1f} {:>7.3f} {:>6.1f}% | {:>8.4f} -> {:<8.4f}\n",
      r.dtype, r.bucketCapMb, r.overlap ? "on" : "off", r.commHook, r.buckets,
      r.gradientAsBucketView ? "view" : "copy", r.forwardMs.*q, r.backwardComputeMs.*q, r.backwardCommMs.*q,
      r.exposedCommMs.*q, r.optimizerMs.*q, r.stepMs.*q, r.commBusyMs.*q, r.samplesPerSec, r.gemmTflops,
      100.0 * r.overlapEfficiency, eval ? r.evalLossStart : r.lossStart, eval ? r.evalLossEnd : r.lossEnd);
}

}  // namespace

std::string formatTrainTable(const std::vector<TrainRunRecord>& runs) {
  if (runs.empty()) return "# dsbench train: no runs\n";
  const auto& f = runs.front();
  // The evaluation batch's loss when every run has one (older files: the training steps' losses).
  const bool eval = std::all_of(runs.begin(), runs.end(), hasEval);
  std::string out = fmt::format(
      "# dsbench train: {} ({:.1f}M params), {} rank(s) on {} ({}), batch {}/rank, {} optimizer, {} measured "
      "steps "
      "after {} warm-up\n",
      f.model, static_cast<double>(f.params) / 1e6, f.worldSize, f.backend, f.device, f.perRankBatch,
      f.optimizer, f.steps, f.warmup);
  const std::string head = fmt::format(
      "# {:>3} {:>7} {:>5} {:>9} {:>4} {:>7} | {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} | {:>9} {:>7} {:>7} | "
      "{}\n",
      "dtype", "capMB", "ovlap", "hook", "bkts", "grad", "fwd", "bwd", "bwdcomm", "exposed", "optim", "step",
      "commbusy", "samples/s", "TFLOP/s", "hidden", eval ? "eval loss start -> end" : "loss start -> end");
  for (auto [q, name] : {std::pair{&Percentiles::p50, "median"}, std::pair{&Percentiles::p90, "p90"}}) {
    out += fmt::format("# per-step time in ms, {} over all ranks' measured steps\n", name);
    out += head;
    for (const auto& r : runs) out += "  " + row(r, q, eval);
  }
  out +=
      "# bwd = backward compute; bwdcomm = first bucket launched to all reduced; exposed = comm the step "
      "waited "
      "for after backward;\n# commbusy = time the collectives ran; hidden = 1 - exposed / commbusy (comm the "
      "overlap hid)\n"
      "# TFLOP/s = the model's GEMM FLOPs per rank per step (forward, weight and input gradients) at the "
      "median step time (per step the slowest rank);\n# dtype = the parameters', activations' and gradients' type\n";
  for (const auto& r : runs) {
    if (r.stepDeviceMs.samples == 0) continue;
    out += fmt::format(
        "# {} {:.2f} MB: step on the device (CUDA events, first forward to zero_grad, batch already loaded) "
        "median {:.3f} ms, p90 {:.3f} ms; the step column is the host's clock with the batch's load\n",
        r.dtype, r.bucketCapMb, r.stepDeviceMs.p50, r.stepDeviceMs.p90);
  }
  if (eval) {
    out += fmt::format(
        "# eval loss = the loss on one fixed batch of {} samples before the first and after the last step "
        "(the "
        "same data at both ends); the first and last training steps see different batches\n",
        f.evalSamples);
  } else {
    out +=
        "# loss = the first and the last measured step's training loss: two different batches, so it can "
        "rise "
        "on a healthy run\n";
  }
  return out;
}

std::string formatScaling(const std::vector<TrainRunRecord>& runs) {
  if (runs.empty()) return "";
  double one = 0;
  std::string out = "# scaling (same configuration on ranks 0..k-1):";
  for (const auto& r : runs) {
    if (r.worldSize == 1) one = r.samplesPerSec;
    out +=
        fmt::format(" {} rank{} {:.1f} samples/s", r.worldSize, r.worldSize == 1 ? "" : "s", r.samplesPerSec);
    if (r.worldSize > 1 && one > 0) {
      out += fmt::format(" ({:.1f}% of {} x 1 rank)", 100.0 * r.samplesPerSec / (one * r.worldSize),
                         r.worldSize);
    }
    out += ";";
  }
  out.back() = '\n';
  return out;
}

}  // namespace ds::report
