#include "bench/coll/coll_command.h"

#include <memory>

#include "bench/coll/coll.h"
#include "bench/coll/coll_options.h"
#include "bench/common_flags.h"
#include "engine/common/cli.h"

namespace ds::bench {

namespace {

// A value is checked as typed by the parser resolveOptions uses, so that a bad one is refused naming
// its flag or variable before anything starts (resolveOptions then checks how the values relate).
CLI::Validator sizeCheck(const char* flag) {
  return cli::checkedBy([flag](const std::string& text) { coll::parseSize(text, flag); });
}
template <class Set>
CLI::Validator resolvedWith(Set set) {
  return cli::checkedBy([set](const std::string& text) {
    coll::CollFlags f;
    set(f, text);
    coll::resolveOptions(f);
  });
}

}  // namespace

Command addCollCommand(CLI::App& parent) {
  auto f = std::make_shared<coll::CollFlags>();
  auto* c = parent.add_subcommand(
      "coll",
      "Collective sweeps with nccl-tests' flags and table (allreduce, allgather, reduce_scatter, alltoall, "
      "broadcast, reduce, sendrecv)");
  c->add_option("-b,--minbytes", f->minBytes,
                "smallest size in bytes; K, M, G suffixes are binary (default 32M)")
      ->check(sizeCheck("-b/--minbytes"))
      ->envname("DSBENCH_MINBYTES");
  c->add_option("-e,--maxbytes", f->maxBytes, "largest size in bytes (default 32M)")
      ->check(sizeCheck("-e/--maxbytes"))
      ->envname("DSBENCH_MAXBYTES");
  c->add_option("-i,--stepbytes", f->stepBytes, "additive step between sizes (default 1M)")
      ->check(sizeCheck("-i/--stepbytes"))
      ->envname("DSBENCH_STEPBYTES");
  c->add_option_function<int>(
       "-f,--stepfactor",
       [f](const int& v) {
         f->stepFactor = v;
         f->stepFactorGiven = true;
       },
       "multiplicative step between sizes (an integer >= 2); overrides -i")
      ->transform(cli::integer(2, 1024))
      ->envname("DSBENCH_STEPFACTOR");
  c->add_option("-n,--iters", f->iters, "timed iterations per size (default 20)")
      ->transform(cli::integer(1, 1000000000))
      ->envname("DSBENCH_ITERS");
  c->add_option("-w,--warmup_iters", f->warmupIters,
                "warm-up iterations at the largest and smallest size (default 1)")
      ->transform(cli::integer(0, 1000000000))
      ->envname("DSBENCH_WARMUP_ITERS");
  c->add_option("-c,--check", f->check, "data-check iterations per size; 0 turns the check off (default 1)")
      ->transform(cli::integer(0, 1000000000))
      ->envname("DSBENCH_CHECK");
  c->add_option("-o,--op", f->op,
                "reduction op: sum, prod, max, min, avg, a comma list, or all (default sum)")
      ->check(resolvedWith([](coll::CollFlags& f, const std::string& t) { f.op = t; }))
      ->envname("DSBENCH_OP");
  c->add_option(
       "-d,--datatype", f->datatype,
       "float, double, half, bfloat16, int32, int64, uint8, int8, a comma list, or all (default float)")
      ->check(resolvedWith([](coll::CollFlags& f, const std::string& t) { f.datatype = t; }))
      ->envname("DSBENCH_DATATYPE");
  c->add_option("-r,--root", f->root, "root rank of broadcast and reduce (default 0)")
      ->transform(cli::integer(0, 16777216))
      ->envname("DSBENCH_ROOT");
  c->add_option("-a,--average", f->average,
                "time combined across ranks: 0 rank 0, 1 average, 2 min, 3 max (default 1)")
      ->transform(cli::integer(0, 3))
      ->envname("DSBENCH_AVERAGE");
  flags::timeout(c, f->timeoutS,
                 "seconds any one op, barrier or exchange may take; when it runs out the sweep stops, writes "
                 "what it measured and exits 4 (default: the process group's timeout)");
  flags::json(c, f->jsonPath, "write the results as JSON to this file (rank 0; atomically at the end)");
  c->add_option(
       "--journal", f->journalPath,
       "append a JSON line per finished size to this file (default: next to -J, <name>.journal.jsonl)")
      ->check(cli::outputFile())
      ->envname("DSBENCH_JOURNAL");
  c->add_option(
       "--coll", f->collectives,
       "collectives: allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce, sendrecv, a comma "
       "list, or all (default allreduce)")
      ->check(resolvedWith([](coll::CollFlags& f, const std::string& t) { f.collectives = t; }))
      ->envname("DSBENCH_COLL");
  flags::backend(c, f->backends,
                 "backends to compare, a comma list of gloo, mpi, nccl, shm (default: the accelerator's)",
                 true);
  c->add_option(
       "--min-time", f->minTimeS,
       "seconds: per size, raise the iterations (never below -n) so the timed loop lasts at least this long")
      ->transform(cli::number(0, 86400))
      ->envname("DSBENCH_MIN_TIME");
  flags::repeat(c, f->repeat, "sizes");
  c->add_option(
       "-I,--per_iter_timing", f->perIterTiming,
       "per-iteration columns after each #wrong: 0 none (default), 1 nccl-tests' i_min i_max i_p99 i_cv%, "
       "2 the tails i_p50 i_p90 i_p99 i_p99.9 i_max; 1 and 2 also keep every iteration's time in the JSON "
       "(times_us). i_* are of each iteration's slowest rank")
      ->check(cli::checkedBy([](const std::string& t) { coll::parsePerIterTiming(t); }))
      ->envname("DSBENCH_PER_ITER_TIMING");
  c->add_option("-K,--per_iter_skip", f->perIterSkip,
                "leave the first N timed iterations of each size out of the per-iteration statistics (i_*, "
                "the JSON's iter), not out of the time per op; less than -n (default 0)")
      ->transform(cli::integer(0, 1000000000))
      ->envname("DSBENCH_PER_ITER_SKIP");
  c->add_flag("-z,--blocking", f->blocking,
              "wait for each op and barrier before the next (nccl-tests -z 1); per-iteration times are then "
              "wall times")
      ->envname("DSBENCH_BLOCKING");
  flags::initMethod(c, f->initMethod);
  flags::label(c, f->label, f->labelGiven);
  return Command{c, [f] { return coll::runColl(*f); }};
}

}  // namespace ds::bench
