// Hostile values for every flag of every tool (issue 18): empty, NaN, inf, negative, huge, a directory, /dev/zero, a FIFO, non-UTF-8. Each must be refused at once with the tool's usage exit
// code, a message naming the flag (or, through its environment twin, the variable), no "internal
// error", within 10 s and 1 GiB of address space, and without leaving a file behind.
//
// kFlags below is the one table: a flag that a tool's --help lists and the table lacks fails
// FlagsOfEveryToolAreInTheTable, so a new flag joins it. Nothing here reaches a rendezvous: the
// refusals all come before it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"

namespace ds::testing {
namespace {

enum class Kind {
  kInt,     // a whole number with bounds
  kNumber,  // a real number with bounds
  kSize,    // bytes with K/M/G suffix (dsbench coll -b/-e/-i)
  kEnum,    // one name of a fixed list
  kText,    // free text the tool checks (labels, lists of names, specs)
  kOutput,  // a file the tool writes
  kInput,   // a file the tool reads
  kSwitch,  // a flag without a value: only its environment twin takes hostile text
};

struct FlagCase {
  const char* tool;  // "dsrun", "dsbench coll", "dsreport html", ...
  const char* flag;  // as --help lists it; a positional's name for positionals
  const char* env;   // its environment twin, or ""
  Kind kind;
  bool positional = false;
  // Hostile values this flag accepts on purpose (an empty --init-method means the default, ...).
  std::vector<std::string> accepted = {};
};

// The table: every flag of every tool.
const std::vector<FlagCase> kFlags = {
    {"dsrun", "--nproc-per-node", "DSRUN_NPROC_PER_NODE", Kind::kInt},
    {"dsrun", "--nnodes", "DSRUN_NNODES", Kind::kInt},
    {"dsrun", "--node-rank", "DSRUN_NODE_RANK", Kind::kInt},
    {"dsrun", "--master-addr", "DSRUN_MASTER_ADDR", Kind::kText, false, {"bogus", "\xff\xfe"}},
    {"dsrun", "--master-port", "DSRUN_MASTER_PORT", Kind::kInt},
    {"dsrun", "--standalone", "DSRUN_STANDALONE", Kind::kSwitch},
    {"dsrun", "--rdzv-id", "DSRUN_RDZV_ID", Kind::kText, false, {"", "bogus", "\xff\xfe"}},
    {"dsrun",
     "--log-dir",
     "DSRUN_LOG_DIR",
     Kind::kOutput,
     false,
     {"", "DIR", "DIR/", "MISSING/x", "\xff\xfe/x"}},
    {"dsrun", "--tee", "DSRUN_TEE", Kind::kSwitch},
    {"dsrun", "--grace-period", "DSRUN_GRACE_PERIOD", Kind::kNumber},
    {"dsrun", "--max-restarts", "DSRUN_MAX_RESTARTS", Kind::kInt},
    {"dsrun", "--no-python", "DSRUN_NO_PYTHON", Kind::kSwitch},

    {"dsbench world", "--discovery", "DSBENCH_DISCOVERY", Kind::kEnum},
    {"dsbench world", "--backend", "DSBENCH_BACKEND", Kind::kEnum},
    {"dsbench world", "--init-method", "DSBENCH_INIT_METHOD", Kind::kText, false, {""}},
    {"dsbench world", "--timeout", "DSBENCH_TIMEOUT", Kind::kInt},
    {"dsbench world", "--json", "DSBENCH_JSON", Kind::kOutput},
    {"dsbench world", "--quiet", "", Kind::kSwitch},
    {"dsbench world", "--dry-run", "DSBENCH_DRY_RUN", Kind::kSwitch},
    {"dsbench coll", "--minbytes", "DSBENCH_MINBYTES", Kind::kSize},
    {"dsbench coll", "--maxbytes", "DSBENCH_MAXBYTES", Kind::kSize},
    {"dsbench coll", "--stepbytes", "DSBENCH_STEPBYTES", Kind::kSize},
    {"dsbench coll", "--stepfactor", "DSBENCH_STEPFACTOR", Kind::kInt},
    {"dsbench coll", "--iters", "DSBENCH_ITERS", Kind::kInt},
    {"dsbench coll", "--warmup_iters", "DSBENCH_WARMUP_ITERS", Kind::kInt},
    {"dsbench coll", "--check", "DSBENCH_CHECK", Kind::kInt},
    {"dsbench coll", "--op", "DSBENCH_OP", Kind::kText},
    {"dsbench coll", "--datatype", "DSBENCH_DATATYPE", Kind::kText},
    {"dsbench coll", "--root", "DSBENCH_ROOT", Kind::kInt},
    {"dsbench coll", "--average", "DSBENCH_AVERAGE", Kind::kInt},
    {"dsbench coll", "--timeout", "DSBENCH_TIMEOUT", Kind::kNumber},
    {"dsbench coll", "--json", "DSBENCH_JSON", Kind::kOutput},
    {"dsbench coll", "--journal", "DSBENCH_JOURNAL", Kind::kOutput},
    {"dsbench coll", "--coll", "DSBENCH_COLL", Kind::kText},
    {"dsbench coll", "--backend", "DSBENCH_BACKEND", Kind::kEnum},
    {"dsbench coll", "--min-time", "DSBENCH_MIN_TIME", Kind::kNumber},
    {"dsbench coll", "--repeat", "DSBENCH_REPEAT", Kind::kInt},
    {"dsbench coll", "--blocking", "DSBENCH_BLOCKING", Kind::kSwitch},
    {"dsbench coll", "--per_iter_timing", "DSBENCH_PER_ITER_TIMING", Kind::kEnum},
    {"dsbench coll", "--per_iter_skip", "DSBENCH_PER_ITER_SKIP", Kind::kInt},
    {"dsbench coll", "--init-method", "DSBENCH_INIT_METHOD", Kind::kText, false, {""}},
    {"dsbench coll", "--label", "DSBENCH_LABEL", Kind::kText, false, {"bogus"}},
    {"dsbench train", "--model", "DSBENCH_MODEL", Kind::kText},
    {"dsbench train", "--batch", "DSBENCH_BATCH", Kind::kInt},
    {"dsbench train", "--steps", "DSBENCH_STEPS", Kind::kInt},
    {"dsbench train", "--warmup", "DSBENCH_WARMUP", Kind::kInt},
    {"dsbench train", "--repeat", "DSBENCH_REPEAT", Kind::kInt},
    {"dsbench train", "--backend", "DSBENCH_BACKEND", Kind::kEnum},
    {"dsbench train", "--init-method", "DSBENCH_INIT_METHOD", Kind::kText, false, {""}},
    {"dsbench train", "--timeout", "DSBENCH_TIMEOUT", Kind::kInt},
    {"dsbench train", "--bucket-cap-mb", "DSBENCH_BUCKET_CAP_MB", Kind::kNumber},
    {"dsbench train", "--overlap", "DSBENCH_OVERLAP", Kind::kEnum},
    {"dsbench train", "--comm-hook", "DSBENCH_COMM_HOOK", Kind::kEnum},
    {"dsbench train", "--dtype", "DSBENCH_DTYPE", Kind::kEnum},
    {"dsbench train", "--gradient-as-bucket-view", "DSBENCH_GRADIENT_AS_BUCKET_VIEW", Kind::kSwitch},
    {"dsbench train", "--scaling", "DSBENCH_SCALING", Kind::kSwitch},
    {"dsbench train", "--optimizer", "DSBENCH_OPTIMIZER", Kind::kEnum},
    {"dsbench train", "--lr", "DSBENCH_LR", Kind::kNumber},
    {"dsbench train", "--samples", "DSBENCH_SAMPLES", Kind::kInt},
    {"dsbench train", "--blas-threads", "DSBENCH_BLAS_THREADS", Kind::kInt},
    {"dsbench train", "--json", "DSBENCH_JSON", Kind::kOutput},
    {"dsbench train", "--label", "DSBENCH_LABEL", Kind::kText, false, {"bogus"}},
    {"dsbench train", "--eval-samples", "DSBENCH_EVAL_SAMPLES", Kind::kInt},
    {"dsbench train", "--quiet", "", Kind::kSwitch},
    {"dsbench gpu", "--size", "DSBENCH_SIZE", Kind::kSize},
    {"dsbench gpu", "--iters", "DSBENCH_ITERS", Kind::kInt},
    {"dsbench gpu", "--warmup", "DSBENCH_WARMUP", Kind::kInt},
    {"dsbench gpu", "--device", "DSBENCH_DEVICE", Kind::kText, false, {""}},  // "": every GPU
    {"dsbench gpu", "--json", "DSBENCH_JSON", Kind::kOutput},
    {"dsbench gpu", "--label", "DSBENCH_LABEL", Kind::kText, false, {"bogus"}},

    {"dsdiag", "--world", "DSDIAG_WORLD", Kind::kSwitch},
    {"dsdiag", "--json", "DSDIAG_JSON", Kind::kOutput},
    {"dsdiag", "--junit", "DSDIAG_JUNIT", Kind::kOutput},
    {"dsdiag", "--only", "DSDIAG_ONLY", Kind::kText, false, {""}},
    {"dsdiag", "--skip", "DSDIAG_SKIP", Kind::kText, false, {""}},
    {"dsdiag", "--list", "", Kind::kSwitch},
    {"dsdiag", "--timeout", "DSDIAG_TIMEOUT", Kind::kNumber},
    {"dsdiag", "--connect-timeout", "DSDIAG_CONNECT_TIMEOUT", Kind::kNumber},
    {"dsdiag", "--backend", "DSDIAG_BACKEND", Kind::kEnum},
    {"dsdiag", "--link-large-mib", "DSDIAG_LINK_LARGE_MIB", Kind::kNumber},
    {"dsdiag", "--slow-link-ms", "DSDIAG_SLOW_LINK_MS", Kind::kNumber},
    {"dsdiag", "--verbose", "DSDIAG_VERBOSE", Kind::kSwitch},
    {"dsdiag", "--color", "DSDIAG_COLOR", Kind::kEnum},
    {"dsdiag", "--fail-on", "DSDIAG_FAIL_ON", Kind::kEnum},
    {"dsdiag", "--pair-timeout", "DSDIAG_PAIR_TIMEOUT", Kind::kNumber},
    {"dsdiag", "--all-pairs", "DSDIAG_ALL_PAIRS", Kind::kSwitch},
    {"dsdiag", "--link-rounds", "DSDIAG_LINK_ROUNDS", Kind::kInt},
    {"dsdiag", "--min-link-gbps", "DSDIAG_MIN_LINK_GBPS", Kind::kNumber},
    {"dsdiag", "--exclude-file", "DSDIAG_EXCLUDE_FILE", Kind::kOutput},
    {"dsdiag", "--hostfile", "DSDIAG_HOSTFILE", Kind::kInput},
    // DeepSpeed's filters are checked against the hostfile by runner.resources (a finding, exit 2).
    {"dsdiag", "--include", "DSDIAG_INCLUDE", Kind::kText, false, {"", "bogus", "\xff\xfe"}},
    {"dsdiag", "--exclude", "DSDIAG_EXCLUDE", Kind::kText, false, {"", "bogus", "\xff\xfe"}},
    {"dsdiag", "--num_nodes", "DSDIAG_NUM_NODES", Kind::kInt, false, {"-1"}},  // DeepSpeed's default
    {"dsdiag", "--num_gpus", "DSDIAG_NUM_GPUS", Kind::kInt, false, {"-1"}},
    {"dsdiag", "--ssh_port", "DSDIAG_SSH_PORT", Kind::kInt},
    // As deepspeed takes them: any launcher name (DeepSpeed refuses an unknown one only on a multi-node
    // launch, and runner.resources says so), any launcher arguments and master address.
    {"dsdiag", "--launcher", "DSDIAG_LAUNCHER", Kind::kText, false, {"", "bogus", "\xff\xfe"}},
    {"dsdiag", "--launcher_args", "DSDIAG_LAUNCHER_ARGS", Kind::kText, false, {"", "bogus", "\xff\xfe"}},
    {"dsdiag", "--master_addr", "DSDIAG_MASTER_ADDR", Kind::kText, false, {"", "bogus", "\xff\xfe"}},
    {"dsdiag", "--master_port", "DSDIAG_MASTER_PORT", Kind::kInt},
    {"dsdiag", "--no_ssh", "DSDIAG_NO_SSH", Kind::kSwitch},
    {"dsdiag", "--node_rank", "DSDIAG_NODE_RANK", Kind::kInt, false, {"-1"}},  // DeepSpeed's default
    {"dsdiag", "--force_multi", "DSDIAG_FORCE_MULTI", Kind::kSwitch},

    {"dsreport html", "runs", "", Kind::kInput, true},
    {"dsreport html", "--output", "DSREPORT_HTML_OUTPUT", Kind::kOutput},
    {"dsreport html", "--max-input-mb", "DSREPORT_MAX_INPUT_MB", Kind::kInt},
    {"dsreport compare", "runs", "", Kind::kInput, true},
    {"dsreport compare", "--threshold", "DSREPORT_THRESHOLD", Kind::kNumber},
    {"dsreport compare", "--alpha", "DSREPORT_ALPHA", Kind::kNumber},
    {"dsreport compare", "--ignore-hosts", "DSREPORT_IGNORE_HOSTS", Kind::kSwitch},
    {"dsreport compare", "--json", "DSREPORT_COMPARE_JSON", Kind::kOutput},
    {"dsreport compare", "--html", "DSREPORT_COMPARE_HTML", Kind::kOutput},
    {"dsreport compare", "--max-input-mb", "DSREPORT_MAX_INPUT_MB", Kind::kInt},
    {"dsreport ingest", "--db", "DSREPORT_DB", Kind::kOutput},
    {"dsreport ingest", "--label", "DSREPORT_LABEL", Kind::kText, false, {"bogus"}},
    {"dsreport ingest", "--busy-timeout-ms", "", Kind::kInt},
    {"dsreport ingest", "--quiet", "", Kind::kSwitch},
    {"dsreport ingest", "--max-input-mb", "DSREPORT_MAX_INPUT_MB", Kind::kInt},
    {"dsreport import", "input", "", Kind::kInput, true},
    {"dsreport import", "--output", "DSREPORT_IMPORT_OUTPUT", Kind::kOutput},
    {"dsreport import", "--label", "DSREPORT_LABEL", Kind::kText, false, {"bogus"}},
    // Free text: the backend column of the rows, and a collective name the file may override.
    {"dsreport import", "--backend", "", Kind::kSwitch},
    {"dsreport import", "--collective", "", Kind::kSwitch},
    {"dsreport import", "--max-input-mb", "DSREPORT_MAX_INPUT_MB", Kind::kInt},
    {"dsreport dashboard", "--db", "DSREPORT_DB", Kind::kInput},
    {"dsreport dashboard", "--output", "DSREPORT_DASHBOARD_OUTPUT", Kind::kOutput},
    // Filters: any text is a valid filter (it may match nothing).
    {"dsreport dashboard", "--label", "", Kind::kSwitch},
    {"dsreport dashboard", "--backend", "", Kind::kSwitch},
    {"dsreport dashboard", "--collective", "", Kind::kSwitch},
    {"dsreport dashboard", "--size", "", Kind::kInt},
    {"dsreport dashboard", "--window", "", Kind::kInt},
    {"dsreport dashboard", "--recent", "", Kind::kInt},
    {"dsreport dashboard", "--min-history", "", Kind::kInt},
    {"dsreport dashboard", "--alpha", "", Kind::kNumber},
    {"dsreport dashboard", "--threshold", "", Kind::kNumber},
    {"dsreport baseline", "runs", "", Kind::kInput, true},
    {"dsreport baseline", "--output", "", Kind::kOutput},
    {"dsreport baseline", "--rules", "DSREPORT_RULES", Kind::kInput},
    {"dsreport baseline", "--quiet", "", Kind::kSwitch},
    {"dsreport baseline", "--db", "DSREPORT_DB", Kind::kInput},
    {"dsreport baseline", "--label", "", Kind::kText},
    {"dsreport baseline", "--since", "", Kind::kText},
    {"dsreport baseline", "--last", "", Kind::kInt},
    {"dsreport baseline", "--max-input-mb", "DSREPORT_MAX_INPUT_MB", Kind::kInt},
    {"dsreport check", "runs", "", Kind::kInput, true},
    {"dsreport check", "--baseline", "DSREPORT_BASELINE", Kind::kInput},
    {"dsreport check", "--rules", "DSREPORT_RULES", Kind::kInput},
    {"dsreport check", "--k", "", Kind::kInt},
    {"dsreport check", "--n", "", Kind::kInt},
    {"dsreport check", "--hosts", "", Kind::kText, false, {"bogus"}},  // a one-host list: it is no_result
    {"dsreport check", "--output", "", Kind::kOutput},
    {"dsreport check", "--junit", "DSREPORT_CHECK_JUNIT", Kind::kOutput},
    {"dsreport check", "--quiet", "", Kind::kSwitch},
    {"dsreport check", "--max-input-mb", "DSREPORT_MAX_INPUT_MB", Kind::kInt},
    {"dsreport export", "runs", "", Kind::kInput, true},
    {"dsreport export", "--openmetrics", "DSREPORT_OPENMETRICS", Kind::kOutput},
    {"dsreport export", "--check", "DSREPORT_EXPORT_CHECK", Kind::kInput},
    {"dsreport export", "--max-input-mb", "DSREPORT_MAX_INPUT_MB", Kind::kInt},
    {"dsreport dashboard", "--fleet", "", Kind::kSwitch},
    {"dsreport dashboard", "--pattern", "", Kind::kText},
    {"dsreport dashboard", "--metric", "", Kind::kEnum},
    {"dsreport dashboard", "--max-patterns", "", Kind::kInt},
    {"dsreport dashboard", "--max-columns", "", Kind::kInt},
    {"dsreport dashboard", "--since", "", Kind::kText},
    {"dsreport dashboard", "--until", "", Kind::kText},
    {"dsreport dashboard", "--quarantine-k", "", Kind::kInt},
    {"dsreport dashboard", "--quarantine-n", "", Kind::kInt},
    {"dsreport dashboard", "--exclude-file", "", Kind::kOutput},
};

const char* kNonUtf8 = "\xff\xfe";

// The hostile values of a kind. DIR, FIFO and MISSING stand for paths made per run.
std::vector<std::string> hostileValues(Kind k) {
  switch (k) {
    case Kind::kInt:
      return {"", "nan", "inf", "-1", "99999999999999999999999999999", "12abc", "0x10x", kNonUtf8};
    case Kind::kNumber:
      return {"", "nan", "inf", "-inf", "-1", "1e999", "abc", kNonUtf8};
    case Kind::kSize:
      return {"", "nan", "inf", "-1", "999999999999G", kNonUtf8};
    case Kind::kEnum:
      return {"", "bogus", kNonUtf8};
    case Kind::kText:
      return {"", "bogus", kNonUtf8};
    case Kind::kOutput:
      return {"", "DIR", "DIR/", "/dev/zero", "FIFO", "MISSING/x", std::string(kNonUtf8) + "/x"};
    case Kind::kInput:
      return {"", "DIR", "/dev/zero", "FIFO", "MISSING"};
    case Kind::kSwitch:
      return {};
  }
  return {};
}

// The documented usage exit code of each tool (README "Exit codes").
int usageExit(const std::string& tool) {
  if (tool == "dsrun") return 2;
  if (tool.rfind("dsbench", 0) == 0) return 5;
  if (tool == "dsdiag") return 3;
  if (tool == "dsreport check") return 3;  // its 2 means "a host is unhealthy"
  return 2;  // dsreport
}

std::string sourceFile(const std::string& rel) { return std::string(DS_SOURCE_DIR) + "/" + rel; }

class CliFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = tmp_.sub("cwd");
    dir_ = tmp_.sub("a_dir");
    fifo_ = tmp_.file("a_fifo");
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
    sweep_ = sourceFile("reports/tests/data/sweep_golden.json");
    nccl_ = sourceFile("reports/import/tests/data/all_reduce_2.13.txt");
  }

  std::string substitute(const std::string& v) const {
    if (v == "DIR") return dir_;
    if (v == "DIR/") return dir_ + "/";
    if (v == "FIFO") return fifo_;
    if (v == "MISSING") return tmp_.file("missing");
    if (v == "MISSING/x") return tmp_.file("missing") + "/x";
    return v;
  }

  // The command line of `tool` with `extra` (the flag under test) placed where it parses: before
  // dsrun's program, after dsreport's required positionals.
  std::vector<std::string> command(const FlagCase& c, const std::vector<std::string>& extra) const {
    const std::string tool = c.tool;
    const std::string bin = binDir() + "/" + tool.substr(0, tool.find(' '));
    const std::string sub = tool.find(' ') == std::string::npos ? "" : tool.substr(tool.find(' ') + 1);
    std::vector<std::string> argv{bin};
    if (!sub.empty()) argv.push_back(sub);
    auto add = [&](std::initializer_list<std::string> xs) { argv.insert(argv.end(), xs); };
    const std::string flag = c.flag;
    if (tool == "dsrun") {
      argv.insert(argv.end(), extra.begin(), extra.end());
      add({"/bin/true"});
      return argv;
    }
    if (sub == "html" && !c.positional) add({sweep_});
    if (sub == "compare" && !c.positional) add({sweep_, sweep_});
    if (sub == "compare" && c.positional) {
      argv.insert(argv.end(), extra.begin(), extra.end());
      add({sweep_});
      return argv;
    }
    if (sub == "import" && !c.positional) add({nccl_});
    if (sub == "import" && flag != "--output") add({"-o", work_ + "/out.json"});
    if (sub == "ingest") add({sweep_});
    if (sub == "ingest" && flag != "--db") add({"--db", work_ + "/h.sqlite"});
    if (sub == "dashboard" && flag != "--db") add({"--db", sweep_});  // a regular file: parsing passes
    if (sub == "export" && !c.positional) add({sweep_});
    if ((sub == "baseline" || sub == "check") && !c.positional) add({sweep_});
    if (sub == "baseline" && flag != "--output") add({"-o", work_ + "/baseline.json"});
    if (sub == "export" && flag != "--openmetrics") add({"--openmetrics", work_ + "/m.prom"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // Runs argv in work_ under ulimit -v 1 GiB (not under ASan/TSan, which reserve terabytes).
  std::unique_ptr<Process> startBounded(const std::vector<std::string>& argv,
                                        std::map<std::string, std::string> env = {}) const {
    std::vector<std::string> sh{"/bin/sh", "-c"};
#if defined(DS_SANITIZE_ADDRESS) || defined(DS_SANITIZE_THREAD)
    sh.push_back("cd \"$0\" && exec \"$@\"");
#else
    sh.push_back("cd \"$0\" && ulimit -v 1048576 && exec \"$@\"");
#endif
    sh.push_back(work_);
    sh.insert(sh.end(), argv.begin(), argv.end());
    // No launcher around it, and a port nobody serves: a case that wrongly passed would fail fast.
    env.emplace("MASTER_PORT", std::to_string(unusedPort()));
    env.emplace("DS_ACCELERATOR", "cpu");
    // OpenBLAS (dsbench) starts a thread per core at load; under ulimit -v their buffers do not fit and
    // its exit then waits on threads that retry malloc forever. One thread starts none.
    env.emplace("OPENBLAS_NUM_THREADS", "1");
    return std::make_unique<Process>(sh, cleanOptions(std::chrono::seconds(10), std::move(env)));
  }

  RunResult runBounded(const std::vector<std::string>& argv, std::map<std::string, std::string> env = {}) const {
    return startBounded(argv, std::move(env))->wait();
  }

  std::set<std::string> listing() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::recursive_directory_iterator(tmp_.path())) names.insert(e.path());
    return names;
  }

  void expectRefused(const FlagCase& c, const std::string& shownValue, const RunResult& r,
                     const std::string& names, const std::set<std::string>& before) {
    SCOPED_TRACE(std::string(c.tool) + " " + c.flag + " = [" + shownValue + "]\nstderr: " + r.err);
    EXPECT_FALSE(r.timedOut) << "took more than 10 s";
    EXPECT_EQ(r.exitCode, usageExit(c.tool));
    EXPECT_NE((r.err + r.out).find(names), std::string::npos) << "the message does not name " << names;
    // Named once: not "--label: --label is empty" nor "--op: -o/--op: unknown op" (engine/common/cli.h).
    EXPECT_EQ(r.err.find(names + ": " + names), std::string::npos) << "names " << names << " twice";
    EXPECT_EQ(r.err.find(names + ": -"), std::string::npos) << "names " << names << " and then a flag";
    EXPECT_EQ(r.err.find("): -"), std::string::npos) << "names the variable and then a flag";
    EXPECT_EQ(r.err.find("internal error"), std::string::npos);
    EXPECT_EQ(r.err.find("Could not convert"), std::string::npos);
    EXPECT_EQ(listing(), before) << "files were left behind";
  }

  void runTool(const std::string& prefix) {
    int cases = 0;
    for (const auto& c : kFlags) {
      if (std::string(c.tool).rfind(prefix, 0) != 0) continue;
      const auto before = listing();
      for (const auto& raw : hostileValues(c.kind)) {
        if (std::find(c.accepted.begin(), c.accepted.end(), raw) != c.accepted.end()) continue;
        const std::string v = substitute(raw);
        std::vector<std::string> extra =
            c.positional ? std::vector<std::string>{v} : std::vector<std::string>{c.flag, v};
        expectRefused(c, raw, runBounded(command(c, extra)), c.flag, before);
        ++cases;
      }
      // The environment twin: its first hostile value (or text a switch cannot take) names the variable.
      if (*c.env != '\0') {
        std::string raw = c.kind == Kind::kSwitch ? "maybe" : "";
        for (const auto& h : hostileValues(c.kind)) {
          if (!h.empty() && std::find(c.accepted.begin(), c.accepted.end(), h) == c.accepted.end()) {
            raw = h;
            break;
          }
        }
        if (raw.empty()) continue;
        expectRefused(c, "env " + raw, runBounded(command(c, {}), {{c.env, substitute(raw)}}), c.env, before);
        ++cases;
      }
    }
    EXPECT_GT(cases, 0);
    std::printf("%d hostile cases for %s\n", cases, prefix.c_str());
  }

  TempDir tmp_{"ds_cli_fuzz"};
  std::string work_, dir_, fifo_, sweep_, nccl_;
};

TEST_F(CliFuzz, Dsrun) { runTool("dsrun"); }
TEST_F(CliFuzz, DsbenchWorld) { runTool("dsbench world"); }
TEST_F(CliFuzz, DsbenchColl) { runTool("dsbench coll"); }
TEST_F(CliFuzz, DsbenchTrain) { runTool("dsbench train"); }
TEST_F(CliFuzz, DsbenchGpu) { runTool("dsbench gpu"); }
TEST_F(CliFuzz, Dsdiag) { runTool("dsdiag"); }
TEST_F(CliFuzz, Dsreport) { runTool("dsreport"); }

// Every flag a tool's --help lists is in kFlags (so a new flag gets its hostile values).
TEST_F(CliFuzz, FlagsOfEveryToolAreInTheTable) {
  const std::vector<std::string> tools = {
      "dsrun",           "dsbench world",      "dsbench coll",     "dsbench train",    "dsbench gpu",
      "dsdiag",          "dsreport html",      "dsreport compare", "dsreport ingest",
      "dsreport import", "dsreport dashboard", "dsreport export", "dsreport baseline", "dsreport check"};
  const std::set<std::string> always = {"--help", "--version", "--help-all"};
  const std::regex longFlag(R"((?:^|[ ,])(--[a-zA-Z][a-zA-Z0-9_-]*))");
  for (const auto& tool : tools) {
    FlagCase probe{tool.c_str(), "", "", Kind::kSwitch};
    auto argv = command(probe, {"--help"});
    if (tool == "dsrun") argv = {binDir() + "/dsrun", "--help"};
    RunResult r = runBounded(argv);
    ASSERT_EQ(r.exitCode, 0) << tool << ": " << r.err;
    std::set<std::string> known;
    for (const auto& c : kFlags)
      if (tool == c.tool) known.insert(c.flag);
    std::istringstream lines(r.out);
    bool inOptions = false;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("Options:", 0) == 0) inOptions = true;
      if (line.rfind("Subcommands:", 0) == 0) inOptions = false;
      if (!inOptions || line.size() < 3 || line[0] != ' ' || line[1] != ' ' || line[2] == ' ') continue;
      // "  -b,--minbytes TEXT ..." : the option names come before the first double space.
      std::string names = line.substr(2, line.find("  ", 2) - 2);
      bool listed = false;
      std::vector<std::string> flags;
      for (std::sregex_iterator it(names.begin(), names.end(), longFlag), end; it != end; ++it)
        flags.push_back((*it)[1]);
      if (flags.empty()) continue;
      for (const auto& f : flags) listed = listed || known.count(f) > 0 || always.count(f) > 0;
      EXPECT_TRUE(listed) << tool << " --help lists " << names << ", which the table kFlags lacks";
    }
  }
}

}  // namespace
}  // namespace ds::testing
