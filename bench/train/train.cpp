#include "bench/train/train.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <thread>

#include "bench/coll/coll_options.h"
#include "bench/exit_codes.h"
#include "bench/metadata.h"
#include "bench/world/world.h"
#include "engine/common/cli.h"
#include "engine/common/error.h"
#include "engine/common/iso_time.h"
#include "engine/common/log.h"
#include "engine/ddp/ops.h"
#include "engine/host/resources.h"
#include "engine/init.h"
#include "reports/json_io.h"
#include "reports/schema/label.h"
#include "reports/sweep/sweep_journal.h"
#include "reports/train/train_text.h"

namespace ds::bench {

namespace {

constexpr std::size_t kFields = 9;  // StepSample's doubles

double ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

StepSample sampleOf(const ddp::StepRecord& s) {
  StepSample o;
  o.forwardMs = ms(s.ddp.forwardNs);
  o.backwardComputeMs = ms(s.ddp.backwardComputeNs);
  o.backwardCommMs = ms(s.ddp.backwardCommNs);
  o.exposedCommMs = ms(s.ddp.exposedCommNs);
  o.optimizerMs = ms(s.ddp.optimizerNs);
  o.stepMs = ms(s.stepNs);
  o.commBusyMs = ms(s.ddp.commBusyNs);
  o.loss = s.loss;
  o.deviceStepMs = ms(s.deviceStepNs);
  return o;
}

// Collective: every rank's measured steps, in rank order.
std::vector<std::vector<StepSample>> gatherSteps(comm::ProcessGroup& pg,
                                                 const std::vector<StepSample>& mine) {
  std::vector<double> flat;
  for (const auto& s : mine) {
    flat.insert(flat.end(), {s.forwardMs, s.backwardComputeMs, s.backwardCommMs, s.exposedCommMs,
                             s.optimizerMs, s.stepMs, s.commBusyMs, s.loss, s.deviceStepMs});
  }
  std::vector<double> all(flat.size() * static_cast<std::size_t>(pg.size()));
  if (!flat.empty()) {
    ddp::exchangeHost(pg, flat, all,
                      [&](const comm::Buffer& in, const comm::Buffer& out) { return pg.allgather(in, out); });
  }
  std::vector<std::vector<StepSample>> out(static_cast<std::size_t>(pg.size()));
  for (int r = 0; r < pg.size(); ++r) {
    for (std::size_t k = 0; k < mine.size(); ++k) {
      const double* d = all.data() + (static_cast<std::size_t>(r) * mine.size() + k) * kFields;
      out[r].push_back(StepSample{d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]});
    }
  }
  return out;
}

// The rank's share of the host's CPUs, or its affinity mask where that is narrower (mpirun binds a
// rank to one core: more BLAS threads would only take turns on it).
int defaultBlasThreads(const World& world) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return ddp::cpusPerRank(sys::affinityCpuCount(), cores, world.info().localWorldSize.value);
}

}  // namespace

void summarizeSteps(const std::vector<std::vector<StepSample>>& perRank, int globalBatch,
                    report::TrainRunRecord& out) {
  std::vector<double> fwd, bwd, comm, exposed, opt, step, busy, deviceStep;
  double sumBusy = 0, sumExposed = 0;
  std::size_t steps = perRank.empty() ? 0 : perRank[0].size();
  std::vector<double> slowest(steps, 0.0);
  for (const auto& rank : perRank) {
    DS_CHECK(rank.size() == steps, "ranks measured different step counts");
    for (std::size_t k = 0; k < rank.size(); ++k) {
      const auto& s = rank[k];
      fwd.push_back(s.forwardMs);
      bwd.push_back(s.backwardComputeMs);
      comm.push_back(s.backwardCommMs);
      exposed.push_back(s.exposedCommMs);
      opt.push_back(s.optimizerMs);
      step.push_back(s.stepMs);
      busy.push_back(s.commBusyMs);
      if (s.deviceStepMs > 0) deviceStep.push_back(s.deviceStepMs);
      sumBusy += s.commBusyMs;
      sumExposed += std::min(s.exposedCommMs, s.commBusyMs);
      slowest[k] = std::max(slowest[k], s.stepMs);
    }
  }
  out.forwardMs = report::summarize(fwd);
  out.backwardComputeMs = report::summarize(bwd);
  out.backwardCommMs = report::summarize(comm);
  out.exposedCommMs = report::summarize(exposed);
  out.optimizerMs = report::summarize(opt);
  out.stepMs = report::summarize(step);
  out.commBusyMs = report::summarize(busy);
  // Only where every step has one (a CUDA run): a partial set would mislead.
  if (!deviceStep.empty() && deviceStep.size() == step.size()) out.stepDeviceMs = report::summarize(deviceStep);
  const double medianStep = report::summarize(slowest).p50;
  out.samplesPerSec = medianStep > 0 ? globalBatch / (medianStep / 1e3) : 0;
  out.gemmTflops = medianStep > 0 ? out.gemmFlopsPerStep / (medianStep / 1e3) / 1e12 : 0;
  out.overlapEfficiency = sumBusy > 0 ? std::clamp(1.0 - sumExposed / sumBusy, 0.0, 1.0) : 0.0;
  const double samples = static_cast<double>(std::max<std::size_t>(1, busy.size()));
  out.hiddenCommMs = (sumBusy - sumExposed) / samples;
  if (steps > 0) {
    double first = 0, last = 0;
    for (const auto& rank : perRank) {
      first += rank.front().loss;
      last += rank.back().loss;
    }
    out.lossStart = first / static_cast<double>(perRank.size());
    out.lossEnd = last / static_cast<double>(perRank.size());
  }
}

namespace {

// --scaling: the configuration at world sizes 1..N. Ranks 0..k-1 form a sub-group of the job's
// backend named "train-scale-k" on the world's store; the other ranks wait at a store barrier, so
// they neither compete for the cores nor leave early. Returns the records on rank 0 (others: empty).
template <typename RunOne>
std::vector<report::TrainRunRecord> runScaling(const TrainOptions& o, World& world,
                                               const ddp::TrainConfig& base, bool overlap, double cap,
                                               RunOne& runOne) {
  std::vector<report::TrainRunRecord> out;
  const int n = world.worldSize();
  for (int k = 1; k <= n; ++k) {
    ddp::TrainConfig c = base;
    c.ddp.bucketCapMb = cap;
    c.ddp.overlap = overlap;
    // The dataset grows with the world size, as the global batch does.
    c.samples = o.samples > 0 ? o.samples
                              : std::max<std::size_t>(1024, 4 * static_cast<std::size_t>(o.batch) *
                                                                static_cast<std::size_t>(k));
    if (world.rank() < k) {
      if (world.rank() == 0 && o.verbose) log::info("dsbench train --scaling: {} rank(s)", k);
      std::unique_ptr<comm::ProcessGroup> sub;
      comm::ProcessGroup* group = nullptr;
      if (k == n) {
        group = &world.pg();
      } else if (k > 1) {
        comm::ProcessGroupOptions po = world.pg().options();
        po.rank = world.rank();
        po.size = k;
        po.globalRanks.resize(static_cast<std::size_t>(k));  // the world's ranks 0..k-1
        std::iota(po.globalRanks.begin(), po.globalRanks.end(), 0);
        po.groupName = fmt::format("train-scale-{}", k);
        sub = comm::createProcessGroup(world.backend(), po);
        group = sub.get();
      }
      auto r = runOne(c, group, k);
      if (world.rank() == 0) out.push_back(std::move(r));
    }
    world.barrier();
  }
  return out;
}

// Per rank: parameters, gradients and DDP's bucket copy in the run's dtype, the f32 optimizer state
// (sgd momentum: one copy; adamw: two) plus, for bf16, the f32 master weights and gradients, the
// activations of one batch in the dtype (two per layer, before and after the activation) and the
// synthetic dataset in f32; the largest over the --dtype values. In doubles, as MlpSpec::paramCount
// counts: a hostile spec (mlp:100000x100000) would overflow size_t. Refused before init, so every rank
// stops before any rendezvous instead of an OOM kill or std::bad_alloc mid-run.
void checkTrainMemory(const TrainOptions& o, const ddp::MlpSpec& spec, const std::vector<comm::DType>& dtypes) {
  const double w = spec.width, layers = spec.layers, in = spec.in(), out = spec.out(), b = spec.bias ? 1 : 0;
  const double params = layers <= 1 ? in * out + b * out
                                    : in * w + b * w + (layers - 2) * (w * w + b * w) + w * out + b * out;
  const double states = o.optimizer == "adamw" ? 2 : 1;
  const double activations = 2.0 * o.batch * (w * (layers - 1) + out);
  const double samples = o.samples > 0 ? static_cast<double>(o.samples) : std::max(1024.0, 4.0 * o.batch);
  double perRank = 0;
  for (comm::DType t : dtypes) {
    const double elt = static_cast<double>(comm::dtypeSize(t));
    const double masters = t == comm::DType::kF32 ? 0 : 2;
    perRank = std::max(perRank, params * (3 * elt + 4 * (states + masters)) + elt * activations +
                                    4.0 * samples * (in + out));
  }
  const int ranks = sys::launcherLocalRanks();
  sys::checkMemory(
      perRank * ranks, sys::readMemoryInfo(),
      fmt::format("--model {} ({:.3g} parameters; {} per rank with --batch {}, x {} rank(s) on this node)",
                  o.model, params, sys::bytesText(perRank), o.batch, ranks),
      "Choose a smaller --model or --batch, or start fewer ranks on this node.");
}

}  // namespace

comm::DType parseTrainDType(const std::string& text) {
  comm::DType t = comm::DType::kF32;
  try {
    t = text == "fp32" ? comm::DType::kF32 : comm::parseDType(text);
  } catch (const ConfigError&) {
    t = comm::DType::kI8;  // refused below with the accepted names
  }
  if (t != comm::DType::kF32 && t != comm::DType::kBF16) {
    throw ConfigError(fmt::format("{} is not a parameter dtype of dsbench train: use f32 (float32, fp32) "
                                  "or bf16 (bfloat16), or both as f32,bf16",
                                  cli::shown(text)));
  }
  return t;
}

int runTrain(const TrainOptions& o) {
  if (o.steps <= 0 || o.batch <= 0 || o.warmup < 0) {
    throw ConfigError(
        fmt::format("dsbench train: --steps ({}) and --batch ({}) must be positive, --warmup ({}) not "
                    "negative",
                    o.steps, o.batch, o.warmup));
  }
  if (o.bucketCapMb.empty()) throw ConfigError("dsbench train: --bucket-cap-mb needs at least one value");
  if (o.repeat < 1 || o.repeat > 1000) {
    throw ConfigError(fmt::format(
        "dsbench train: --repeat {} is not valid: give the number of passes over the configurations, 1 "
        "to 1000.",
        o.repeat));
  }
  const std::string label = o.labelGiven || !o.label.empty() ? report::checkLabel(o.label, "--label") : "";
  const ddp::MlpSpec spec = ddp::parseModelSpec(o.model);
  std::vector<comm::DType> dtypes;
  for (const auto& text : o.dtypes) {
    const comm::DType t = parseTrainDType(text);
    if (std::find(dtypes.begin(), dtypes.end(), t) == dtypes.end()) dtypes.push_back(t);
  }
  if (dtypes.empty()) throw ConfigError("dsbench train: --dtype needs at least one value (f32 or bf16)");
  checkTrainMemory(o, spec, dtypes);
  ddp::makeCommHook(o.commHook);  // a bad name fails before any rank starts working

  InitOptions init;
  init.distBackend = o.backend;
  init.initMethod = o.initMethod;
  init.verbose = o.verbose;
  if (o.timeoutSeconds > 0) init.timeout = std::chrono::seconds(o.timeoutSeconds);
  const std::string startTime = isoUtcNowMs();
  auto world = initDistributed(init);
  auto& pg = world->pg();
  // Who ran it, for the metadata (collective: every rank publishes its record).
  std::vector<std::string> hosts;
  std::vector<report::PlacedRank> placed;
  nlohmann::json rankMeta = nlohmann::json::array();
  for (const auto& rec : gatherWorld(*world)) {
    hosts.push_back(rec.host);
    placed.push_back({rec.rank, rec.host, rec.placement});
    rankMeta.push_back({{"rank", rec.rank}, {"host", rec.host}});
    if (rec.placement) rankMeta.back()["placement"] = *rec.placement;
  }
  if (o.scaling && world->backend() == "mpi") {
    throw ConfigError(
        "dsbench train --scaling needs sub-groups, which the mpi backend does not offer yet. Run it once per "
        "world size instead: for k in 1 2 ... N: mpirun -np $k dsbench train --backend mpi ... (or use "
        "--backend gloo).");
  }
  const int blasThreads = o.blasThreads > 0 ? o.blasThreads : defaultBlasThreads(*world);
  ddp::ops::setBlasThreads(blasThreads);

  ddp::TrainConfig base;
  base.model = spec;
  base.batch = o.batch;
  base.steps = o.warmup + o.steps;
  base.optimizer.kind = o.optimizer;
  base.optimizer.lr = o.lr > 0 ? o.lr : (o.optimizer == "adamw" ? 1e-3f : 0.01f);
  const std::size_t perStep =
      static_cast<std::size_t>(o.batch) * static_cast<std::size_t>(world->worldSize());
  base.samples = o.samples > 0 ? o.samples : std::max<std::size_t>(1024, 4 * perStep);
  base.evalSamples = o.evalSamples;
  base.ddp.commHookName = o.commHook;
  base.ddp.gradientAsBucketView = o.gradientAsBucketView;
  if (world->accelerator().name() == "cuda")
    base.device = comm::Device{comm::DeviceType::kCuda, world->localRank()};
  // bf16 on the host would time f32 GEMMs plus conversions, not bf16 maths: Debian's OpenBLAS 0.3.21
  // lacks its bf16 GEMM (cblas_sbgemm is not built) and the engine's host bf16 is a test reference
  // (engine/ddp/ops.h). A figure labelled bf16 that is slower than f32 would mislead, so refuse.
  if (base.device.type != comm::DeviceType::kCuda &&
      std::find(dtypes.begin(), dtypes.end(), comm::DType::kBF16) != dtypes.end()) {
    throw ConfigError(fmt::format(
        "dsbench train --dtype bf16 needs a CUDA GPU, and this run is on {}: the host has no bf16 GEMM "
        "(Debian's OpenBLAS is built without cblas_sbgemm), so a CPU bf16 step would time f32 GEMMs plus "
        "conversions, not bf16. Use --dtype f32 on CPU, or run on a GPU node (DS_ACCELERATOR=cuda).",
        world->accelerator().name()));
  }
  base.dtype = dtypes.front();

  // What --overlap auto chooses here, worked out (and recorded in the JSON) whatever --overlap says,
  // so that a run of both settings also tells which one auto would have taken.
  ddp::OverlapPlacement place;
  place.cpu = base.device.type == comm::DeviceType::kCpu;
  place.rankCpus = sys::affinityCpuCount();
  place.hostCpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  place.localRanks = std::max(1, world->info().localWorldSize.value);
  place.computeThreads = blasThreads;
  place.multiHost = std::set<std::string>(hosts.begin(), hosts.end()).size() > 1;
  const auto autoChoice = ddp::chooseOverlap(place);
  std::vector<bool> overlaps;
  if (o.overlap == "auto") {
    overlaps.push_back(autoChoice.overlap);
  } else {
    if (o.overlap != "off") overlaps.push_back(true);
    if (o.overlap != "on") overlaps.push_back(false);
  }

  // One configuration on `group` (nullptr: this rank alone) of `n` ranks; collective on the group.
  auto runOne = [&](const ddp::TrainConfig& c, comm::ProcessGroup* group, int n) {
    ddp::TrainResult result = ddp::train(c, group);
    std::vector<StepSample> mine;
    for (std::size_t k = static_cast<std::size_t>(o.warmup); k < result.steps.size(); ++k) {
      mine.push_back(sampleOf(result.steps[k]));
    }
    auto all = group != nullptr ? gatherSteps(*group, mine) : std::vector<std::vector<StepSample>>{mine};
    report::TrainRunRecord r;
    r.model = spec.toString();
    r.params = spec.paramCount();
    r.worldSize = n;
    r.backend = group != nullptr ? group->backendName() : "none";
    r.device = c.device.type == comm::DeviceType::kCuda ? "cuda" : "cpu";
    r.dtype = comm::dtypeName(c.dtype);
    r.gemmFlopsPerStep = spec.gemmFlopsPerSample() * o.batch;
    r.perRankBatch = o.batch;
    r.steps = o.steps;
    r.warmup = o.warmup;
    r.optimizer = o.optimizer;
    r.bucketCapMb = c.ddp.bucketCapMb;
    r.overlap = c.ddp.overlap;
    r.commHook = result.logging.comm_hook;
    r.gradientAsBucketView = o.gradientAsBucketView;
    r.buckets = static_cast<int>(result.buckets.size());
    summarizeSteps(all, o.batch * n, r);
    r.ddp.avg_forward_compute_time = result.logging.avg_forward_compute_time;
    r.ddp.avg_backward_compute_time = result.logging.avg_backward_compute_time;
    r.ddp.avg_backward_comm_time = result.logging.avg_backward_comm_time;
    r.ddp.avg_backward_compute_comm_overlap_time = result.logging.avg_backward_compute_comm_overlap_time;
    r.ddp.avg_exposed_comm_time = result.logging.avg_exposed_comm_time;
    r.ddp.bucket_sizes = result.logging.bucket_sizes;
    // The replicas are identical after every step and the batch is the same on every rank, so each
    // rank's evaluation loss is the job's.
    r.evalLossStart = result.evalLossStart;
    r.evalLossEnd = result.evalLossEnd;
    r.evalSamples =
        std::isfinite(result.evalLossStart) ? std::min<int>(o.evalSamples, static_cast<int>(c.samples)) : 0;
    return r;
  };

  // Rank 0 appends each finished run to the journal next to --json, so a killed run keeps them.
  const std::string journal = o.jsonPath.empty() ? "" : report::journalPathFor(o.jsonPath);
  if (world->rank() == 0 && !journal.empty()) std::remove(journal.c_str());
  auto keep = [&](const report::TrainRunRecord& r) {
    if (world->rank() == 0 && !journal.empty()) report::appendTrainJournal(journal, r);
  };
  std::vector<report::TrainRunRecord> runs;
  bool finite = true;
  std::vector<ddp::TrainConfig> configs;
  for (comm::DType dtype : dtypes) {
    bool baselineDone = false;
    for (double cap : o.bucketCapMb) {
      for (bool overlap : overlaps) {
        // The baseline is one bucket whatever the cap: measure it once per dtype.
        if (!overlap && baselineDone) continue;
        baselineDone = baselineDone || !overlap;
        ddp::TrainConfig c = base;
        c.dtype = dtype;
        c.ddp.bucketCapMb = cap;
        c.ddp.overlap = overlap;
        configs.push_back(c);
      }
    }
  }
  // --repeat: R passes over the configurations, the order rotated each pass (as dsbench coll's sizes),
  // so that a drift of the machine spreads over all of them; a configuration is reported once its
  // last pass is done.
  std::vector<std::vector<report::TrainRunRecord>> passes(configs.size());
  for (int rep = 0; rep < o.repeat; ++rep) {
    for (std::size_t idx : coll::repeatOrder(configs.size(), rep, o.repeat)) {
      const ddp::TrainConfig& c = configs[idx];
      if (world->rank() == 0 && o.verbose) {
        log::info("dsbench train: {} {} on {} rank(s), bucket_cap_mb {}, overlap {}, hook {}{}",
                  spec.toString(), comm::dtypeName(c.dtype), world->worldSize(), c.ddp.bucketCapMb,
                  c.ddp.overlap ? "on" : "off", o.commHook,
                  o.repeat > 1 ? fmt::format(", pass {}/{}", rep + 1, o.repeat) : "");
      }
      auto r = runOne(c, &pg, world->worldSize());
      finite = finite && std::isfinite(r.lossStart) && std::isfinite(r.lossEnd) &&
               (o.evalSamples == 0 || (std::isfinite(r.evalLossStart) && std::isfinite(r.evalLossEnd)));
      passes[idx].push_back(std::move(r));
    }
  }
  for (auto& reps : passes) {
    auto r = report::mergeTrainRepeats(reps);
    keep(r);
    runs.push_back(std::move(r));
  }
  std::string scalingText;
  if (o.scaling) {
    auto scaled = runScaling(o, *world, base, overlaps.front(), o.bucketCapMb.front(), runOne);
    scalingText = report::formatScaling(scaled);
    for (auto& r : scaled) {
      finite = finite && std::isfinite(r.lossStart) && std::isfinite(r.lossEnd);
      keep(r);
      runs.push_back(std::move(r));
    }
  }
  if (world->rank() == 0) {
    std::string text = report::formatPlacementLines(placed) +
                       (o.overlap == "auto" ? fmt::format("# --overlap auto: {}\n", autoChoice.reason) : "") +
                       report::formatTrainTable(runs) + scalingText;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!o.jsonPath.empty()) {
      nlohmann::json meta{{"command_line", coll::commandLine()},
                          {"launcher", coll::launcherName()},
                          {"world_size", world->worldSize()},
                          {"repeat", o.repeat},
                          {"backend", world->backend()},
                          {"hosts", hosts},
                          {"ranks", rankMeta},
                          {"versions", coll::libraryVersions(world->backend() == "nccl")},
                          {"env", coll::relevantEnv()},
                          {"start_time", startTime},
                          {"end_time", isoUtcNowMs()}};
      meta["overlap_auto"] = {{"overlap", autoChoice.overlap}, {"reason", autoChoice.reason}};
      if (!label.empty()) meta["label"] = label;
      report::writeJsonAtomic(o.jsonPath, report::trainToJson(runs, meta));
    }
    if (!finite) {
      log::error("dsbench train: the loss is not finite (diverged); the timings stand, but lower --lr");
    }
  }
  destroyProcessGroup();
  return finite ? kExitOk : kExitWrongData;
}

}  // namespace ds::bench
