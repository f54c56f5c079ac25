// ds_ddp_worker: one rank of a DDP run, started by mpirun from mpi_test.cpp.
//
//   equiv    --opt sgd|adamw [--accum K] [--view] --out DIR   train ddpConfig(opt, world, K) on the
//            mpi backend; each rank writes DIR/params.<rank>.bin and prints its replica checks
//   mismatch                                                   rank 1 builds a different model; each
//            rank prints the ConfigError DDP raises at construction
//
// Exit: 0 done (mismatch: the error was raised), 1 unexpected error, 2 usage.
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/common/error.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/ops.h"
#include "engine/ddp/tests/scenario.h"
#include "engine/init.h"

using namespace ds::ddp;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ds_ddp_worker equiv|mismatch [options]\n");
    return 2;
  }
  std::string mode = argv[1];
  std::string opt = "sgd", out;
  int accum = 1;
  bool view = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--opt" && i + 1 < argc) {
      opt = argv[++i];
    } else if (a == "--accum" && i + 1 < argc) {
      accum = std::stoi(argv[++i]);
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--view") {
      view = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  ops::setBlasThreads(1);
  int rank = -1;
  try {
    ds::InitOptions init;
    init.distBackend = "mpi";
    init.verbose = false;
    init.timeout = std::chrono::seconds(60);
    auto world = ds::initDistributed(init);
    rank = world->rank();
    auto& pg = world->pg();
    if (mode == "equiv") {
      TrainConfig c = testing::ddpConfig(opt, pg.size(), accum);
      c.ddp.gradientAsBucketView = view;
      TrainResult r = train(c, &pg);
      std::string path = out + "/params." + std::to_string(rank) + ".bin";
      FILE* f = std::fopen(path.c_str(), "wb");
      if (f == nullptr ||
          std::fwrite(r.finalParams.data(), sizeof(float), r.finalParams.size(), f) != r.finalParams.size()) {
        std::fprintf(stderr, "rank %d: cannot write %s\n", rank, path.c_str());
        return 1;
      }
      std::fclose(f);
      std::printf("rank %d OK replicas agree after %d checks, %zu buckets, checksum %016llx\n", rank,
                  r.replicaChecks, r.buckets.size(), static_cast<unsigned long long>(r.finalChecksum));
    } else if (mode == "mismatch") {
      Mlp model(parseModelSpec(rank == 1 ? "mlp:8x2,in=4,out=2" : "mlp:8x3,in=4,out=2"), 1);
      try {
        DistributedDataParallel ddp(model, pg);
        std::printf("rank %d NO_ERROR\n", rank);
      } catch (const ds::ConfigError& e) {
        std::printf("rank %d CONFIG_ERROR: %s\n", rank, e.what());
      }
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
    std::fflush(stdout);
    ds::destroyProcessGroup();
  } catch (const std::exception& e) {
    std::printf("rank %d ERROR: %s\n", rank, e.what());
    std::fflush(stdout);
    return 1;
  }
  return 0;
}
