// DeepSpeed's runner inputs (engine/env/deepspeed_runner.h).
//
// DeepSpeedRunnerFixtures: every case of tests/deepspeed/runner_cases.json must give what DeepSpeed's
// own fetch_hostfile, parse_inclusion_exclusion and runner.main() gave on the same files, flags and
// environment (runner_fixtures.json, recorded by scripts/deepspeed/record_runner.py; DeepSpeed's
// version is in the file): the result, or the exception's type and text. Runs without DeepSpeed;
// the live twin (label deepspeed) re-records first and points DS_DEEPSPEED_RUNNER_FIXTURES here.
// DeepSpeedRunner: the inputs DeepSpeed's record cannot cover (unreadable files, garbage, limits)
// and the layout launch.py builds.
#include "engine/env/deepspeed_runner.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"

namespace ds::env {
namespace {

using ds::testing::TempDir;
using nlohmann::json;

std::string fixturesPath() {
  if (const char* p = std::getenv("DS_DEEPSPEED_RUNNER_FIXTURES"); p && *p) return p;
  return DS_DEEPSPEED_RUNNER_FIXTURES;
}

json load(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return json::parse(in);
}

void writeFile(const std::string& path, const std::string& bytes, mode_t mode = 0644) {
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  ::chmod(path.c_str(), mode);
}

std::string fromHex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// The case's files, as record_runner.py writes them.
void writeSpec(const std::string& path, const json& spec) {
  if (spec.is_string()) return writeFile(path, spec.get<std::string>());
  if (spec.value("dir", false)) {
    ::mkdir(path.c_str(), 0755);
    return;
  }
  writeFile(path, spec.contains("bytes_hex") ? fromHex(spec["bytes_hex"]) : spec.value("text", ""),
            static_cast<mode_t>(spec.value("mode", 0644)));
}

json activeJson(const ActiveResources& a) {
  json out = json::array();
  for (const auto& [h, s] : a) out.push_back(json::array({h, s}));
  return out;
}

json errorJson(const DeepSpeedRunnerError& e) {
  return {{"ok", false}, {"error_type", e.type()}, {"error", e.deepspeedText()}};
}

// One case against DeepSpeed's recorded answer; the mismatches as text.
// `caseEnv` is the case's environment in the order written (nlohmann::ordered_json): DeepSpeed's
// os.environ, and so its exports and the command line, follow that order.
std::vector<std::string> compareCase(const json& c, const nlohmann::ordered_json& caseEnv, const json& r,
                                     const std::string& stubAddr) {
  TempDir tmp("ds_runner_fixture");
  const std::string cwd = tmp.sub("cwd"), home = tmp.sub("home");
  if (c.contains("files")) {
    for (const auto& [rel, spec] : c["files"].items()) {
      bool inHome = rel.rfind("~/", 0) == 0;
      writeSpec((inHome ? home : cwd) + "/" + (inHome ? rel.substr(2) : rel), spec);
    }
  }
  MapEnv env;
  std::vector<std::string> names{"PATH", "HOME"};
  env.set("PATH", "/usr/bin:/bin");
  env.set("HOME", home);
  for (const auto& [k, v] : caseEnv.items()) {
    env.set(k, v.get<std::string>());
    names.push_back(k);
  }
  RunnerFlags flags;
  flags.hostfile = cwd + "/hostfile";
  flags.include = c.value("include", "");
  flags.exclude = c.value("exclude", "");
  const json args = c.value("args", json::array());
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string f = args[i];
    if (f == "--no_ssh") flags.noSsh = true;
    else if (f == "--force_multi") flags.forceMulti = true;
    else if (f == "--module") flags.module = true;
    else if (f == "--no_python") flags.noPython = true;
    else if (i + 1 >= args.size()) ADD_FAILURE() << "flag without a value: " << f;
    else {
      std::string v = args[++i];
      if (f == "--num_nodes") flags.numNodes = std::stoll(v);
      else if (f == "--num_gpus" || f == "--num_accelerators") flags.numGpus = std::stoll(v);
      else if (f == "--master_addr") flags.masterAddr = v;
      else if (f == "--master_port") flags.masterPort = std::stoi(v);
      else if (f == "--ssh_port") flags.sshPort = std::stoi(v);
      else if (f == "--launcher") flags.launcher = v;
      else if (f == "--launcher_args") flags.launcherArgs = v;
      else if (f == "--node_rank") flags.nodeRank = std::stoi(v);
      else ADD_FAILURE() << "the test does not know runner flag " << f;
    }
  }
  for (const auto& a : c.value("user_args", json::array())) flags.userArgs.push_back(a.get<std::string>());
  RunnerContext ctx{
      &env, names, home, cwd, r.at("accelerator").get<std::string>(), c.value("device_count", 0)};
  ctx.python = "$PYTHON";
  ctx.deepspeedDir = "$DEEPSPEED_LAUNCHER";
  const bool installed = c.value("backend_exists", true);
  ctx.backendExists = [installed](std::string_view) { return installed; };
  std::vector<std::string> bad;
  auto expect = [&](const char* what, const json& ours, const json& theirs) {
    if (ours != theirs)
      bad.push_back(fmt::format("{}: dsperf {} but DeepSpeed {}", what, ours.dump(), theirs.dump()));
  };

  // fetch_hostfile
  json fetch;
  std::optional<Hostfile> hf;
  try {
    hf = fetchHostfile(flags.hostfile);
    json pool = nullptr;
    if (hf) {
      pool = json::array();
      for (const auto& e : hf->hosts) pool.push_back(json::array({e.host, e.slots}));
    }
    fetch = {{"ok", true}, {"pool", pool}};
  } catch (const DeepSpeedRunnerError& e) {
    fetch = errorJson(e);
  }
  expect("fetch_hostfile", fetch, r.at("fetch"));

  // parse_inclusion_exclusion on the pool
  if (r.contains("filter")) {
    json filter;
    if (!hf) {
      filter = "no pool";
    } else {
      std::vector<std::pair<std::string, long long>> pool;
      for (const auto& e : hf->hosts) pool.emplace_back(e.host, e.slots);
      try {
        filter = {{"ok", true},
                  {"active", activeJson(parseInclusionExclusion(pool, flags.include, flags.exclude))}};
      } catch (const DeepSpeedRunnerError& e) {
        filter = errorJson(e);
      }
    }
    expect("parse_inclusion_exclusion", filter, r.at("filter"));
  }

  // main()
  json main;
  try {
    RunnerPlan p = planRunner(flags, ctx);
    auto portable = [&](std::string v) {
      for (std::size_t at; (at = v.find(cwd)) != std::string::npos;) v.replace(at, cwd.size(), "$CWD");
      if (!p.masterFromHost.empty()) {
        const std::string ph = runnerMasterPlaceholder(p.masterFromHost);
        for (std::size_t at; (at = v.find(ph)) != std::string::npos;) v.replace(at, ph.size(), stubAddr);
      }
      return v;
    };
    json exports = nullptr;
    if (p.multiNode) {
      exports = json::object();
      for (const auto& e : p.exports) exports[e.key] = portable(e.value);
    }
    json command = json::array();
    for (const auto& a : p.command) command.push_back(portable(a));
    json envSet = json::object();
    for (const auto& [k, v] : p.commandEnv) {
      if (env.get(k) != v) envSet[k] = portable(v);
    }
    std::vector<std::string> unset = p.commandEnvUnset;
    std::sort(unset.begin(), unset.end());
    json file = nullptr;
    if (!p.launcherFile.empty()) file = {{"path", p.launcherFile}, {"text", p.launcherFileText}};
    main = {{"ok", true},
            {"world_info", activeJson(p.active)},
            {"multi_node", p.multiNode},
            {"launcher", p.launcher},
            {"master_addr", p.masterFromHost.empty() ? p.masterAddr : stubAddr},
            {"exports", exports},
            {"command", command},
            {"env_set", envSet},
            {"env_unset", unset},
            {"launcher_file", file}};
  } catch (const DeepSpeedRunnerError& e) {
    main = errorJson(e);
  }
  expect("runner.main", main, r.at("main"));
  return bad;
}

TEST(DeepSpeedRunnerFixtures, EveryCaseGivesDeepSpeedsAnswer) {
  const json fx = load(fixturesPath());
  const json cases = load(DS_DEEPSPEED_RUNNER_CASES).at("cases");
  std::ifstream in(DS_DEEPSPEED_RUNNER_CASES);
  const auto ordered = nlohmann::ordered_json::parse(in).at("cases");
  ASSERT_EQ(fx.at("cases").size(), cases.size()) << "runner_fixtures.json is stale: re-record with "
                                                    "scripts/deepspeed/record_runner.py";
  std::string stub = fx.at("stub_hostname_i");
  stub = stub.substr(0, stub.find(' '));
  int agree = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    ASSERT_EQ(fx["cases"][i]["name"], c["name"]);
    auto bad = compareCase(c, ordered[i].at("env"), fx["cases"][i]["result"], stub);
    for (const auto& b : bad) ADD_FAILURE() << c["name"].get<std::string>() << ": " << b;
    if (bad.empty()) ++agree;
  }
  std::printf("%d of %zu runner cases agree with DeepSpeed %s\n", agree, cases.size(),
              fx["versions"]["deepspeed"].get<std::string>().c_str());
  EXPECT_GE(cases.size(), 30u);
  // Every launcher DeepSpeed knows starts at least one recorded job and refuses at least one.
  for (std::string_view l : kRunnerLaunchers) {
    int started = 0, refused = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const json& m = fx["cases"][i]["result"]["main"];
      const json args = cases[i].value("args", json::array());
      bool named = false;
      for (std::size_t k = 0; k + 1 < args.size(); ++k) {
        std::string f = args[k], v = args[k + 1];
        std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return std::tolower(ch); });
        named = named || (f == "--launcher" && v == l);
      }
      if (m.value("launcher", "") == l) ++started;
      if ((named || l == "pdsh") && !m.value("ok", true)) ++refused;
    }
    EXPECT_GE(started, 1) << l << ": no case launches with it";
    EXPECT_GE(refused, 1) << l << ": no case where DeepSpeed refuses it";
  }
}

// --- what DeepSpeed's record cannot cover ---

TEST(DeepSpeedRunner, MissingOrNonRegularHostfileMeansLocalResources) {
  TempDir tmp("ds_runner");
  EXPECT_FALSE(fetchHostfile(tmp.file("missing")));
  EXPECT_FALSE(fetchHostfile(tmp.path()));  // a directory: os.path.isfile is false
  EXPECT_FALSE(fetchHostfile("/dev/null"));
}

// The check itself; as root it runs in a child that dropped to nobody (root reads a mode-000 file).
void expectPermissionError(const std::string& path) {
  try {
    fetchHostfile(path);
    ADD_FAILURE() << "no error";
  } catch (const DeepSpeedRunnerError& e) {
    EXPECT_EQ(e.type(), "PermissionError");
    EXPECT_EQ(e.deepspeedText(), "[Errno 13] Permission denied: '" + path + "'");
    EXPECT_NE(std::string(e.what()).find("chmod"), std::string::npos) << e.what();
  }
}

TEST(DeepSpeedRunner, UnreadableHostfileIsPythonsPermissionError) {
  TempDir tmp("ds_runner");
  ::chmod(tmp.path().c_str(), 0755);
  writeFile(tmp.file("hosts"), "a slots=1\n", 0);
  if (::geteuid() != 0) return expectPermissionError(tmp.file("hosts"));
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(77);
    expectPermissionError(tmp.file("hosts"));
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot drop to uid 65534 here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the unprivileged child's expectations failed (its output is above)";
}

TEST(DeepSpeedRunner, GarbageNamesTheLineAndSaysWhatToDo) {
  try {
    parseHostfile("a slots=1\n\x01\x02garbage\n", "hosts");
    FAIL() << "no error";
  } catch (const DeepSpeedRunnerError& e) {
    EXPECT_EQ(e.type(), "ValueError");
    EXPECT_EQ(e.where(), "hosts:2");
    EXPECT_NE(std::string(e.what()).find("HOST slots=N"), std::string::npos) << e.what();
  }
  try {
    parseHostfile("a slots=1\nb slots=1\na slots=2\n", "hosts");
    FAIL() << "no error";
  } catch (const DeepSpeedRunnerError& e) {
    EXPECT_EQ(e.where(), "hosts:3");
    EXPECT_NE(std::string(e.what()).find("already on line 1"), std::string::npos) << e.what();
  }
  try {
    parseHostfile(std::string("a slots=1\n\xff\xfe\n", 14), "hosts");
    FAIL() << "no error";
  } catch (const DeepSpeedRunnerError& e) {
    EXPECT_EQ(e.type(), "UnicodeDecodeError");
    EXPECT_EQ(e.deepspeedText(), "'utf-8' codec can't decode byte 0xff in position 10: invalid start byte");
    EXPECT_EQ(e.where(), "hosts:2");
  }
}

TEST(DeepSpeedRunner, RefusesAbsurdSlotsAndHugeFiles) {
  EXPECT_THROW(parseHostfile("a slots=99999999999999999999\n", "hosts"), ConfigError);
  TempDir tmp("ds_runner");
  writeFile(tmp.file("big"), std::string(kRunnerFileLimit + 1, '#'));
  try {
    fetchHostfile(tmp.file("big"));
    FAIL() << "no error";
  } catch (const DeepSpeedRunnerError&) {
    FAIL() << "a size refusal is dsperf's, not DeepSpeed's";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MiB"), std::string::npos) << e.what();
  }
}

TEST(DeepSpeedRunner, LayoutFollowsLaunchPy) {
  TempDir tmp("ds_runner");
  writeFile(tmp.file("hosts"), "a slots=2\nb slots=3\n");
  MapEnv env;
  RunnerFlags f;
  f.hostfile = tmp.file("hosts");
  RunnerContext ctx{&env, {}, tmp.path(), tmp.path(), "cuda", 0};
  RunnerPlan p = planRunner(f, ctx);
  ASSERT_EQ(p.worldSize, 5);
  EXPECT_TRUE(p.multiNode);
  EXPECT_EQ(p.masterFromHost, "a");
  // launch.py: LOCAL_RANK = rank % 3 on b, so b's ranks 2, 3, 4 get 2, 0, 1.
  EXPECT_EQ(p.ranks[2].host, "b");
  EXPECT_EQ(p.ranks[2].localRank, 2);
  EXPECT_EQ(p.ranks[2].indexOnHost, 0);
  EXPECT_EQ(p.ranks[3].localRank, 0);
  EXPECT_EQ(p.prefixes.back(), "NCCL");
}

TEST(DeepSpeedRunner, EnvFileLookupFollowsDsEnvFile) {
  MapEnv env{{"DS_ENV_FILE", "/etc/job.env"}};
  RunnerContext ctx{&env, {}, "/home/u", "/work", "cpu", 0};
  auto files = deepspeedEnvFiles(ctx);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "/etc/job.env");  // os.path.join with an absolute name: read twice
  EXPECT_EQ(files[1].path, "/etc/job.env");
  MapEnv plain;
  ctx.env = &plain;
  files = deepspeedEnvFiles(ctx);
  EXPECT_EQ(files[0].path, "/home/u/.deepspeed_env");
  EXPECT_EQ(files[1].path, "./.deepspeed_env");
  EXPECT_EQ(files[1].resolved, "/work/./.deepspeed_env");
}

}  // namespace
}  // namespace ds::env
