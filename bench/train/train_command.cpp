#include "bench/train/train_command.h"

#include <memory>

#include "bench/common_flags.h"
#include "bench/train/train.h"
#include "engine/common/cli.h"
#include "engine/ddp/mlp.h"

namespace ds::bench {

Command addTrainCommand(CLI::App& parent) {
  auto o = std::make_shared<TrainOptions>();
  auto* t = parent.add_subcommand("train",
                                  "time DDP training steps (forward, backward compute, backward comm, "
                                  "exposed comm, optimizer) on an MLP preset with synthetic data");
  t->add_option("--model", o->model,
                "preset 1m, 25m, 100m, or mlp:WIDTHxLAYERS[,act=relu][,bias=0][,in=N][,out=N]")
      ->capture_default_str()
      ->check(cli::checkedBy([](const std::string& t) { ddp::parseModelSpec(t); }))
      ->envname("DSBENCH_MODEL");
  t->add_option("--batch", o->batch, "samples per rank per step")
      ->transform(cli::integer(1, 1 << 24))
      ->capture_default_str()
      ->envname("DSBENCH_BATCH");
  t->add_option("--steps", o->steps, "measured steps per configuration")
      ->transform(cli::integer(1, 1000000))
      ->capture_default_str()
      ->envname("DSBENCH_STEPS");
  t->add_option("--warmup", o->warmup, "unmeasured steps first (includes the bucket rebuild)")
      ->transform(cli::integer(0, 1000000))
      ->capture_default_str()
      ->envname("DSBENCH_WARMUP");
  flags::repeat(t, o->repeat, "configurations");
  flags::backend(t, o->backend, "nccl, gloo, mpi or shm (default: the accelerator's)");
  flags::initMethod(t, o->initMethod);
  flags::timeout(t, o->timeoutSeconds, "seconds; default DEEPSPEED_TIMEOUT minutes or 10 min");
  t->add_option("--bucket-cap-mb", o->bucketCapMb, "DDP bucket_cap_mb; a comma-separated list sweeps")
      ->delimiter(',')
      ->transform(cli::number(0, 1e5, true))
      ->capture_default_str()
      ->envname("DSBENCH_BUCKET_CAP_MB");
  t->add_option(
       "--overlap", o->overlap,
       "on, off (one bucket launched after backward), both, or auto (on where the comm gets a CPU of "
       "its own, the ranks are unbound and no more than the CPUs, or it waits on a network or a GPU; the "
       "table says which and why, the JSON records it as "
       "metadata.overlap_auto for every run)")
      ->check(cli::oneOf({"on", "off", "both", "auto"}))
      ->capture_default_str()
      ->envname("DSBENCH_OVERLAP");
  t->add_option("--comm-hook", o->commHook, "allreduce, fp16 or bf16")
      ->check(cli::oneOf({"allreduce", "fp16", "bf16"}))
      ->capture_default_str()
      ->envname("DSBENCH_COMM_HOOK");
  t->add_option("--dtype", o->dtypes,
                "parameters, activations and gradients: f32 or bf16 (CUDA only: bf16 GEMMs with f32 "
                "accumulation, bf16 gradient allreduce, f32 master weights); a comma-separated list runs each")
      ->delimiter(',')
      ->check(cli::checkedBy([](const std::string& t) { parseTrainDType(t); }))
      ->capture_default_str()
      ->envname("DSBENCH_DTYPE");
  t->add_flag("--gradient-as-bucket-view", o->gradientAsBucketView, "gradients are views into the buckets")
      ->envname("DSBENCH_GRADIENT_AS_BUCKET_VIEW");
  t->add_flag("--scaling", o->scaling,
              "also run the first configuration at world sizes 1..N on sub-groups of ranks 0..k-1 (gloo)")
      ->envname("DSBENCH_SCALING");
  t->add_option("--optimizer", o->optimizer, "sgd (momentum 0.9) or adamw")
      ->check(cli::oneOf({"sgd", "adamw"}))
      ->capture_default_str()
      ->envname("DSBENCH_OPTIMIZER");
  t->add_option("--lr", o->lr, "learning rate (default 0.01 for sgd, 1e-3 for adamw)")
      ->transform(cli::number(0, 1e3))
      ->envname("DSBENCH_LR");
  t->add_option("--samples", o->samples, "dataset size (default: 4 steps' worth, at least 1024)")
      ->transform(cli::integer(1, 1LL << 32))
      ->envname("DSBENCH_SAMPLES");
  t->add_option(
       "--eval-samples", o->evalSamples,
       "samples of the fixed evaluation batch whose loss is taken before the first and after the last step "
       "(0: none)")
      ->transform(cli::integer(0, 65536))
      ->capture_default_str()
      ->envname("DSBENCH_EVAL_SAMPLES");
  t->add_option("--blas-threads", o->blasThreads,
                "OpenBLAS threads per rank (default: cores / ranks on the node)")
      ->transform(cli::integer(0, 4096))
      ->envname("DSBENCH_BLAS_THREADS");
  flags::json(t, o->jsonPath, "write the results as JSON to this file (rank 0)");
  flags::label(t, o->label, o->labelGiven);
  flags::quiet(t, o->verbose);
  return Command{t, [o] { return runTrain(*o); }};
}

}  // namespace ds::bench
