#include "bench/train/train_command.h"

#include <memory>

#include "bench/train/train.h"
#include "engine/common/cli.h"
#include "engine/ddp/mlp.h"
#include "engine/init.h"
#include "reports/schema/label.h"

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
  t->add_option("--backend", o->backend, "nccl, gloo, mpi or shm (default: the accelerator's)")
      ->check(cli::oneOf({"nccl", "gloo", "mpi", "shm"}))
      ->envname("DSBENCH_BACKEND");
  t->add_option("--init-method", o->initMethod, "env:// (default), tcp://HOST:PORT or file:///PATH")
      ->check(cli::checkedBy([](const std::string& t) { parseInitMethod(t); }))
      ->envname("DSBENCH_INIT_METHOD");
  t->add_option("--timeout", o->timeoutSeconds, "seconds; default DEEPSPEED_TIMEOUT minutes or 10 min")
      ->transform(cli::integer(0, 1000000))
      ->envname("DSBENCH_TIMEOUT");
  t->add_option("--bucket-cap-mb", o->bucketCapMb, "DDP bucket_cap_mb; a comma-separated list sweeps")
      ->delimiter(',')
      ->transform(cli::number(0, 1e5, true))
      ->capture_default_str()
      ->envname("DSBENCH_BUCKET_CAP_MB");
  t->add_option("--overlap", o->overlap, "on, off (one bucket launched after backward) or both")
      ->check(cli::oneOf({"on", "off", "both"}))
      ->capture_default_str()
      ->envname("DSBENCH_OVERLAP");
  t->add_option("--comm-hook", o->commHook, "allreduce, fp16 or bf16")
      ->check(cli::oneOf({"allreduce", "fp16", "bf16"}))
      ->capture_default_str()
      ->envname("DSBENCH_COMM_HOOK");
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
  t->add_option("--blas-threads", o->blasThreads,
                "OpenBLAS threads per rank (default: cores / ranks on the node)")
      ->transform(cli::integer(0, 4096))
      ->envname("DSBENCH_BLAS_THREADS");
  t->add_option("--json", o->jsonPath, "write the results as JSON to this file (rank 0)")
      ->check(cli::outputFile())
      ->envname("DSBENCH_JSON");
  t->add_option_function<std::string>(
       "--label",
       [o](const std::string& v) {
         o->label = v;
         o->labelGiven = true;
       },
       "name of the cluster or system this run describes (kept as metadata.label in the JSON, so one "
       "history serves many); 1-64 printable characters")
      ->check(cli::checkedBy([](const std::string& t) { report::checkLabel(t, "--label"); }))
      ->envname("DSBENCH_LABEL");
  t->add_flag("!--quiet", o->verbose, "do not log what init_distributed discovered");
  return Command{t, [o] { return runTrain(*o); }};
}

}  // namespace ds::bench
