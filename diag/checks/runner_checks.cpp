// Family "runner": DeepSpeed's runner inputs, checked before `deepspeed --hostfile ...` starts a job:
// the hostfile, what --include/--exclude/--num_nodes/--num_gpus resolve to, whether every host
// resolves and answers on its ssh port, what each rank will be given (exports, `.deepspeed_env`,
// launch.py's variables), and whether this host's slots fit the GPUs visible here. The parsing and
// resolution are DeepSpeed's own rules (engine/env/deepspeed_runner.h), errors included.
#include <arpa/inet.h>
#include <dirent.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <future>
#include <map>

#include "diag/check.h"
#include "diag/probes.h"
#include "diag/util.h"
#include "engine/common/error.h"
#include "engine/host/net.h"

namespace ds::diag {
namespace {

constexpr const char* kNotAsked =
    "No DeepSpeed runner inputs given: pass --hostfile FILE (with --include/--exclude/--num_nodes/--num_gpus "
    "as "
    "you give them to `deepspeed`) to check them";

std::string accelerator(Context& c) {
  if (auto a = c.get("DS_ACCELERATOR"); a && !trim(*a).empty()) return trim(*a);
  return c.gpu().devices.empty() ? "cpu" : "cuda";
}

// get_accelerator().device_count(): torch's CUDA count, or for cpu LOCAL_SIZE, else the NUMA nodes.
long long localDeviceCount(Context& c, const std::string& accel) {
  if (accel != "cpu") return static_cast<long long>(c.gpu().devices.size());
  if (auto v = c.get("LOCAL_SIZE")) {
    if (auto n = parseInteger(trim(*v)); n && *n > 0) return *n;
  }
  long long nodes = 0;
  if (DIR* d = opendir((c.paths().sysfs + "/devices/system/node").c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 4 && n.rfind("node", 0) == 0 && parseInteger(n.substr(4))) ++nodes;
    }
    closedir(d);
  }
  return std::max<long long>(nodes, 1);
}

env::RunnerContext runnerContext(Context& c, bool readEnvFiles) {
  env::RunnerContext rc;
  rc.env = &c.env();
  rc.names = c.variableNames();
  if (auto h = c.get("HOME")) {
    rc.home = *h;
  } else if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    rc.home = pw->pw_dir;
  }
  char buf[4096];
  rc.cwd = getcwd(buf, sizeof buf) != nullptr ? buf : ".";
  rc.accelerator = accelerator(c);
  rc.readEnvFiles = readEnvFiles;
  const auto& flags = *c.options().runner;
  if (access(flags.hostfile.c_str(), F_OK) != 0) rc.localDeviceCount = localDeviceCount(c, rc.accelerator);
  // backend_exists(): the launcher's program on this shell's PATH (mvapich's `mpiname` must also print
  // MVAPICH2-GDR, which runner.resources says rather than runs).
  rc.backendExists = [path = c.get("PATH").value_or("")](std::string_view launcher) {
    return onPath(path, std::string(env::runnerBackendProgram(launcher)));
  };
  return rc;
}

// How the plan's launcher starts the ranks, for sentences.
std::string startedBy(const env::RunnerPlan& p) {
  long long total = 0;
  for (const auto& [_, slots] : p.active) total += static_cast<long long>(slots.size());
  if (p.launcher == "pdsh") return "pdsh over ssh from this machine";
  if (p.launcher == "openmpi") return "Open MPI's mpirun (-hostfile: every host and slot of the hostfile)";
  if (p.launcher == "mpich") return "MPICH's mpirun (-ppn, -hosts) through DeepSpeed's launcher_helper.py";
  if (p.launcher == "impi") return "Intel MPI's mpirun (-ppn, -hosts, one `-n 1` block per rank)";
  if (p.launcher == "mvapich")
    return "MVAPICH's mpirun (-ppn, --hostfile /tmp/deepspeed_mvapich_hostfile, which DeepSpeed writes first)";
  if (p.launcher == "slurm") return fmt::format("srun -n {} (Slurm places the tasks)", total);
  return "launch.py on this machine";
}

// The launchers whose ranks get none of env://'s variables: deepspeed.init_distributed() then runs MPI
// discovery (mpi4py), and --master_addr/--master_port never reach the ranks.
bool ranksWithoutEnvVars(const env::RunnerPlan& p) {
  return p.launcher == "openmpi" || p.launcher == "mvapich" || p.launcher == "slurm";
}

Json errorData(const env::DeepSpeedRunnerError& e) {
  return {{"deepspeed_error", {{"type", e.type()}, {"message", e.deepspeedText()}}}, {"where", e.where()}};
}

Finding fromError(const env::DeepSpeedRunnerError& e) {
  return fail(fmt::format("{}: DeepSpeed's runner stops with {}: {}", e.where(), e.type(), e.deepspeedText()),
              e.remedy(), errorData(e));
}

// The plan, or the finding that replaces it.
struct Planned {
  std::optional<env::RunnerPlan> plan;
  std::optional<Finding> failure;
};
Planned plan(Context& c, bool readEnvFiles) {
  Planned p;
  try {
    p.plan = env::planRunner(*c.options().runner, runnerContext(c, readEnvFiles));
  } catch (const env::DeepSpeedRunnerError& e) {
    p.failure = fromError(e);
  } catch (const std::exception& e) {
    p.failure = fail(e.what(), "Fix the file named above and run dsdiag again.");
  }
  return p;
}

std::string slotText(const std::vector<long long>& slots) {
  if (slots.empty()) return "none";
  bool run = slots.size() > 2;
  for (std::size_t i = 1; i < slots.size() && run; ++i) run = slots[i] == slots[i - 1] + 1;
  return run ? fmt::format("{}-{}", slots.front(), slots.back()) : join(slots, ",");
}

std::string csv(const std::vector<long long>& slots) { return join(slots, ","); }

// Whether a hostfile name is this machine: localhost, its host name (short or long), or a name that
// resolves to one of its addresses.
bool isThisHost(Context& c, const std::string& host) {
  const std::string me = net::hostName();
  auto numeric = [](const std::string& h) {
    in6_addr a{};
    return inet_pton(AF_INET, h.c_str(), &a) == 1 || inet_pton(AF_INET6, h.c_str(), &a) == 1;
  };
  auto shortName = [](const std::string& h) { return h.substr(0, h.find('.')); };
  if (host == "localhost" || host == me) return true;
  if (!numeric(host) && !numeric(me) && shortName(host) == shortName(me)) return true;
  auto r = resolveHost(host, c.options().connectTimeout);
  return !r.addresses.empty() && std::all_of(r.addresses.begin(), r.addresses.end(), isLocalAddress);
}

Json rankJson(const env::RunnerPlan& p, const env::RunnerRank& r) {
  std::size_t onHost = p.active[static_cast<std::size_t>(r.nodeRank)].second.size();
  return {
      {"rank", r.rank},
      {"host", r.host},
      {"node_rank", r.nodeRank},
      {"env",
       {{"RANK", std::to_string(r.rank)},
        {"LOCAL_RANK", std::to_string(r.localRank)},
        {"WORLD_SIZE", std::to_string(p.worldSize)},
        {"MASTER_ADDR", p.masterFromHost.empty() ? p.masterAddr : "<" + p.masterFromHost + "'s hostname -I>"},
        {"MASTER_PORT", std::to_string(p.masterPort)},
        {"CROSS_RANK", std::to_string(r.nodeRank)},
        {"CROSS_SIZE", std::to_string(p.active.size())},
        {"LOCAL_SIZE", std::to_string(onHost)},
        {"CUDA_VISIBLE_DEVICES", csv(p.active[static_cast<std::size_t>(r.nodeRank)].second)}}}};
}

Finding hostfileCheck(Context& c) {
  if (!c.options().runner) return skip(kNotAsked);
  const std::string& path = c.options().runner->hostfile;
  std::optional<env::Hostfile> hf;
  try {
    hf = env::fetchHostfile(path);
  } catch (const env::DeepSpeedRunnerError& e) {
    return fromError(e);
  } catch (const std::exception& e) {
    return fail(e.what(), "Point --hostfile at the job's hostfile: one `HOST slots=N` line per node.");
  }
  if (!hf) {
    return pass(
        fmt::format("No hostfile at {} (DeepSpeed's default): DeepSpeed warns \"Unable to find hostfile, "
                    "will proceed with training with local resources only.\" and runs every rank on this "
                    "machine",
                    path),
        {{"hostfile", path}, {"exists", false}});
  }
  Json hosts = Json::array();
  std::vector<std::string> parts, empty;
  long long total = 0;
  for (const auto& e : hf->hosts) {
    hosts.push_back({{"host", e.host}, {"slots", e.slots}, {"line", e.line}});
    parts.push_back(fmt::format("{} ({})", e.host, e.slots));
    total += e.slots;
    if (e.slots == 0) empty.push_back(fmt::format("{} (line {})", e.host, e.line));
  }
  Json data{{"hostfile", path}, {"hosts", hosts}, {"slots", total}};
  if (!empty.empty()) {
    return warn(
        fmt::format("{}: {} has slots=0: DeepSpeed keeps it in the job's host list (CROSS_SIZE counts it, "
                    "pdsh logs into it) but starts no rank there",
                    path, join(empty, ", ")),
        "Give the host its GPU count, or remove the line (or leave it out with --exclude).", data);
  }
  return pass(fmt::format("{}: {} host(s), {} slot(s): {}", path, hf->hosts.size(), total, join(parts, ", ")),
              data);
}

Finding resourcesCheck(Context& c) {
  if (!c.options().runner) return skip(kNotAsked);
  auto planned = plan(c, false);
  if (planned.failure) return *planned.failure;
  const auto& p = *planned.plan;
  const auto& flags = *c.options().runner;
  Json ranks = Json::array();
  for (const auto& r : p.ranks) ranks.push_back(rankJson(p, r));
  Json world = Json::array();
  std::vector<std::string> parts;
  int first = 0;
  for (const auto& [host, slots] : p.active) {
    world.push_back({{"host", host}, {"slots", slots}});
    int n = static_cast<int>(slots.size());
    parts.push_back(fmt::format("{} slots {} -> rank{} {}", host, slotText(slots), n == 1 ? "" : "s",
                                n == 1 ? std::to_string(first) : fmt::format("{}-{}", first, first + n - 1)));
    first += n;
  }
  std::string master = p.masterFromHost.empty()
                           ? fmt::format("{}:{}", p.masterAddr, p.masterPort)
                           : fmt::format("{}'s first `hostname -I` address (asked over ssh):{}",
                                         p.masterFromHost, p.masterPort);
  Json data{{"world_info", world},       {"ranks", ranks},      {"world_size", p.worldSize},
            {"multi_node", p.multiNode}, {"master", master},    {"notes", p.notes},
            {"include", p.include},      {"exclude", p.exclude},
            {"launcher", p.launcher},    {"backend_program", p.backendProgram}};
  if (p.active.empty() || p.worldSize == 0) {
    return fail(
        "The runner's inputs resolve to no slot at all: DeepSpeed's launch.py would start no rank (it fails "
        "on an empty world)",
        "Keep at least one host and slot: loosen --exclude, or check the hostfile's slots.", data);
  }
  std::string how = startedBy(p);
  std::string summary = fmt::format("{} rank(s) on {} host(s), started by {}: {}; MASTER_ADDR {}",
                                    p.worldSize, p.active.size(), how, join(parts, "; "), master);
  if (!p.notes.empty()) summary += ". " + join(p.notes, ". ");
  // launch.py's LOCAL_RANK is rank % (ranks on the host): on uneven hosts it is a rotation.
  std::vector<std::string> rotated;
  for (const auto& r : p.ranks) {
    if (r.localRank != r.indexOnHost)
      rotated.push_back(fmt::format("rank {} on {}: {}", r.rank, r.host, r.localRank));
  }
  if (!rotated.empty()) {
    summary += fmt::format(
        ". launch.py sets LOCAL_RANK = rank % ranks-on-host, so on uneven hosts it is not the "
        "index ({}); still unique per host",
        join(rotated, ", "));
  }
  if (ranksWithoutEnvVars(p)) {
    std::string mpi = fmt::format(
        "{} gives the ranks no RANK, LOCAL_RANK, MASTER_ADDR or MASTER_PORT, so deepspeed.init_distributed() runs "
        "MPI discovery: it imports mpi4py in the job's Python (ModuleNotFoundError without it) and takes rank 0's "
        "first `hostname -I` address and port 29500 (init_distributed's distributed_port)",
        p.launcher);
    if (!flags.masterAddr.empty() || flags.masterPort != 29500) {
      return warn(fmt::format("--launcher {} does not pass --master_addr/--master_port (given: {}:{}) to the "
                              "ranks: {}. {}",
                              p.launcher, flags.masterAddr.empty() ? "<hostname -I>" : flags.masterAddr,
                              flags.masterPort, mpi, summary),
                  "Set the port in the script (deepspeed.init_distributed(distributed_port=...)), or use "
                  "--launcher pdsh, mpich or impi, which export MASTER_ADDR and MASTER_PORT.",
                  data);
    }
    summary += ". " + mpi + " (install mpi4py where the job's Python runs)";
  }
  if (p.hostfile && !p.multiNode && !flags.noSsh && !isThisHost(c, p.active.front().first)) {
    return warn(
        fmt::format("Only {} is left, so DeepSpeed starts its {} rank(s) here, on {}, with launch.py - not "
                    "over ssh on {} - and MASTER_ADDR is {}'s address. {}",
                    p.active.front().first, p.worldSize, net::hostName(), p.active.front().first,
                    p.active.front().first, summary),
        fmt::format(
            "Run `deepspeed` on {} itself, keep two or more hosts in the filter, or add --force_multi "
            "so that DeepSpeed launches over ssh.",
            p.active.front().first),
        data);
  }
  if (p.hostfile && flags.numGpus > 0) {
    std::vector<std::string> short_;
    long long least = flags.numGpus;
    for (const auto& e : p.hostfile->hosts) {
      bool used =
          std::any_of(p.active.begin(), p.active.end(), [&](const auto& a) { return a.first == e.host; });
      if (used && e.slots < flags.numGpus) {
        short_.push_back(fmt::format("{} (slots={}, line {})", e.host, e.slots, e.line));
        least = std::min(least, e.slots);
      }
    }
    if (!short_.empty()) {
      return warn(
          fmt::format(
              "--num_gpus {} gives every host slots 0-{} without looking at the hostfile, which gives "
              "fewer to {}. {}",
              flags.numGpus, flags.numGpus - 1, join(short_, ", "), summary),
          fmt::format("Use --num_gpus {} (the smallest host's slots), or correct the hostfile's slots if the "
                      "hosts really have {} GPUs.",
                      least, flags.numGpus),
          data);
    }
  }
  if (p.hostfile && flags.numNodes > static_cast<long long>(p.active.size())) {
    return warn(fmt::format("--num_nodes {} but only {} host(s) remain: DeepSpeed silently runs on {}. {}",
                            flags.numNodes, p.active.size(), p.active.size(), summary),
                "Add the missing hosts to the hostfile, or lower --num_nodes to what the job should get.",
                data);
  }
  return pass(summary, data);
}

struct HostProbe {
  std::string host;
  std::vector<std::string> addresses;
  std::string error;  // empty: the port answered
  int err = 0;
};

HostProbe probeSsh(const std::string& host, int port, std::chrono::milliseconds timeout) {
  HostProbe h{host, {}, "", 0};
  auto r = resolveHost(host, timeout);
  h.addresses = r.addresses;
  if (r.addresses.empty()) {
    h.error = fmt::format("does not resolve ({})", r.error.empty() ? "no addresses" : r.error);
    return h;
  }
  h.err = tryConnect(r.addresses.front(), port, timeout);
  if (h.err == ECONNREFUSED) {
    h.error = fmt::format("{}: connection refused (nothing listens on port {})", r.addresses.front(), port);
  } else if (h.err == ETIMEDOUT) {
    h.error =
        fmt::format("{}: no answer on port {} within {} ms", r.addresses.front(), port, timeout.count());
  } else if (h.err != 0) {
    h.error = fmt::format("{}: {}", r.addresses.front(), errnoText(h.err));
  }
  return h;
}

Finding sshCheck(Context& c) {
  if (!c.options().runner) return skip(kNotAsked);
  auto planned = plan(c, false);
  if (planned.failure) return skip("The runner's inputs do not resolve (see runner.resources)");
  const auto& p = *planned.plan;
  if (!p.hostfile) return skip("No hostfile: DeepSpeed launches on this machine, without ssh");
  const auto& flags = *c.options().runner;
  if (flags.noSsh && p.masterFromHost.empty())
    return skip("--no_ssh with --master_addr: DeepSpeed connects to no host (each host runs deepspeed itself)");
  if (c.options().world && c.rank() > 0) return skip("Rank 0 checks the hosts' ssh ports for the job");
  // pdsh and the mpirun launchers log into every host; srun does not (DeepSpeed's own ssh check and
  // `hostname -I` still reach the first); a single host left, or --no_ssh without --master_addr, is
  // still asked for `hostname -I` over ssh.
  std::vector<std::string> hosts;
  for (const auto& [h, _] : p.active) hosts.push_back(h);
  if (!p.multiNode || p.launcher == "slurm") hosts.resize(std::min<std::size_t>(hosts.size(), 1));
  if (hosts.empty()) return skip("No host is left to reach (see runner.resources)");
  const int port = c.options().runner->sshPort.value_or(22);
  const auto timeout = c.options().connectTimeout;
  // In waves of 64 at once: a fleet's worth of hosts costs a few timeouts, not one per host.
  std::vector<HostProbe> probes;
  for (std::size_t i = 0; i < hosts.size(); i += 64) {
    std::vector<std::future<HostProbe>> wave;
    for (std::size_t j = i; j < std::min(hosts.size(), i + 64); ++j) {
      wave.push_back(std::async(std::launch::async, probeSsh, hosts[j], port, timeout));
    }
    for (auto& f : wave) probes.push_back(f.get());
  }
  Json arr = Json::array();
  std::vector<std::string> bad, good;
  for (const auto& h : probes) {
    arr.push_back(
        {{"host", h.host}, {"addresses", h.addresses}, {"ok", h.error.empty()}, {"error", h.error}});
    if (h.error.empty()) {
      good.push_back(fmt::format("{} ({})", h.host, h.addresses.front()));
    } else {
      bad.push_back(fmt::format("{} ({})", h.host, h.error));
    }
  }
  Json data{{"port", port}, {"hosts", arr}, {"timeout_ms", timeout.count()}};
  if (!bad.empty()) {
    return fail(
        fmt::format("ssh port {} does not answer on {} of {} host(s): {}. DeepSpeed reaches {} with {} (and "
                    "checks ssh to {}{}), so the launch fails there",
                    port, bad.size(), probes.size(), join(bad, "; "),
                    hosts.size() > 1 ? "every host" : "this host", p.multiNode ? startedBy(p) : "ssh",
                    hosts.front(), p.masterFromHost.empty() ? "" : ", which it asks for MASTER_ADDR"),
        fmt::format("Check that each name resolves from this machine (DNS, /etc/hosts), that sshd listens "
                    "on port {} there (--ssh_port if it is another) and that no firewall drops it; then "
                    "`ssh -o PasswordAuthentication=no HOST hostname` is DeepSpeed's own login test.",
                    port),
        data);
  }
  return pass(fmt::format("ssh port {} answers on all {} host(s): {} (a TCP connect; passwordless login is "
                          "DeepSpeed's own `ssh HOST hostname` check)",
                          port, probes.size(), join(good, ", ")),
              data);
}

Finding exportsCheck(Context& c) {
  if (!c.options().runner) return skip(kNotAsked);
  auto base = plan(c, false);
  if (base.failure) return skip("The runner's inputs do not resolve (see runner.resources)");
  auto rc = runnerContext(c, true);
  const auto candidates = env::deepspeedEnvFiles(rc);
  std::vector<std::string> present;
  for (const auto& f : candidates) {
    struct stat st {};
    bool file = ::stat(f.resolved.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    if (file && std::find(present.begin(), present.end(), f.path) == present.end()) present.push_back(f.path);
  }
  const std::string launchVars =
      "RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, CROSS_RANK, CROSS_SIZE, "
      "LOCAL_SIZE and CUDA_VISIBLE_DEVICES (its host's slots) from launch.py";
  const auto& p0 = *base.plan;
  Json ranks = Json::array();
  if (!p0.multiNode) {
    for (const auto& r : p0.ranks) ranks.push_back(rankJson(p0, r));
    Json data{{"multi_node", false}, {"env_files_present", present}, {"ranks", ranks}};
    if (!present.empty()) {
      return warn(
          fmt::format("DeepSpeed launches on this machine (one host), and then reads no `.deepspeed_env`: "
                      "{} is ignored. Every rank gets this shell's environment and {}",
                      join(present, " and "), launchVars),
          "Export those variables in this shell before `deepspeed` (the file only applies to multi-node "
          "launches).",
          data);
    }
    return pass(
        fmt::format("DeepSpeed launches on this machine: every rank gets this shell's whole environment and "
                    "{}",
                    launchVars),
        data);
  }
  auto planned = plan(c, true);
  if (planned.failure) return *planned.failure;
  const auto& p = *planned.plan;
  for (const auto& r : p.ranks) ranks.push_back(rankJson(p, r));
  Json exports = Json::array();
  std::vector<std::string> parts, shellTraps;
  for (const auto& e : p.exports) {
    exports.push_back({{"key", e.key}, {"value", e.value}, {"source", e.source}});
    parts.push_back(fmt::format("{}={} ({})", e.key, quoteValue(e.value, 80), e.source));
    if (e.value.find_first_of("$`\\") != std::string::npos) shellTraps.push_back(e.key);
  }
  std::vector<std::string> looked;
  for (const auto& f : candidates) looked.push_back(f.path);
  Json data{{"multi_node", true},           {"prefixes", p.prefixes},
            {"env_files_read", p.envFiles}, {"env_files_looked_for", looked},
            {"exports", exports},           {"ranks", ranks}};
  std::string files = p.envFiles.empty()
                          ? fmt::format("no `.deepspeed_env` (looked for {})", join(looked, ", "))
                          : fmt::format("read {}", join(p.envFiles, ", "));
  static const std::map<std::string, std::string> kHow = {
      {"pdsh", "`export KEY=VALUE;` in pdsh's remote shell"},
      {"openmpi", "mpirun -x KEY=VALUE"},
      {"mpich", "mpirun -genv KEY=VALUE"},
      {"impi", "mpirun -genv KEY VALUE"},
      {"mvapich", "mpirun -env KEY=VALUE"},
      {"slurm", "srun --export=ALL,KEY=VALUE,..."}};
  const std::string how = kHow.count(p.launcher) != 0 ? kHow.at(p.launcher) : p.launcher;
  std::string vars = launchVars;
  if (p.launcher == "mpich") vars = "MASTER_ADDR, MASTER_PORT, WORLD_SIZE and LOCAL_SIZE (-genv), RANK and LOCAL_RANK from launcher_helper.py (PMI_RANK)";
  if (p.launcher == "impi") vars = "MASTER_ADDR, MASTER_PORT, WORLD_SIZE, LOCAL_SIZE and I_MPI_PIN=0 (-genv), RANK and LOCAL_RANK (-env per rank)";
  if (ranksWithoutEnvVars(p)) vars = "only what the launcher itself sets (no RANK or MASTER_ADDR: see runner.resources)";
  data["command"] = p.command;
  data["command_env"] = Json::object();
  for (const auto& [k, v] : p.commandEnv) data["command_env"][k] = v;
  data["command_env_unset"] = p.commandEnvUnset;
  if (!p.launcherFile.empty()) data["launcher_file"] = {{"path", p.launcherFile}, {"text", p.launcherFileText}};
  std::string summary = fmt::format(
      "{} exports {} variable(s) to every rank as {} (prefixes {}; {}): {}; and each rank "
      "gets {}",
      p.launcher, p.exports.size(), how, join(p.prefixes, ", "), files, parts.empty() ? "none" : join(parts, ", "),
      vars);
  std::vector<std::string> quoted;
  for (const auto& e : p.exports) {
    if (p.launcher != "pdsh" && !e.value.empty() && e.value.front() == '"') quoted.push_back(e.key);
  }
  if (!quoted.empty()) {
    return warn(
        fmt::format("{}: DeepSpeed put double quotes around the value(s) (add_export quotes anything with a "
                    "space or shell character) and starts {} without a shell, so nothing removes them: the "
                    "ranks get the quotes as part of the value. {}",
                    join(quoted, ", "), p.backendProgram == "sinfo" ? "srun" : "mpirun", summary),
        "Give those variables values without spaces or shell characters, or use --launcher pdsh (its remote "
        "shell removes the quotes).",
        data);
  }
  if (p.launcher == "pdsh" && !shellTraps.empty()) {
    return warn(
        fmt::format("{} carry $, ` or \\: pdsh's remote shell expands them inside `export KEY=\"VALUE\";`, "
                    "so the ranks get another value. {}",
                    join(shellTraps, ", "), summary),
        "Write the final value (no $VAR, backquotes or backslashes) in the environment or `.deepspeed_env`.",
        data);
  }
  return pass(summary, data);
}

Finding gpusFitCheck(Context& c) {
  if (!c.options().runner) return skip(kNotAsked);
  auto planned = plan(c, false);
  if (planned.failure) return skip("The runner's inputs do not resolve (see runner.resources)");
  const auto& p = *planned.plan;
  const std::string accel = accelerator(c);
  if (accel == "cpu") {
    return skip(
        "No GPU here (or DS_ACCELERATOR=cpu): the slots are CPU ranks; run dsdiag on the GPU hosts "
        "(dsdiag --world under the job) to check their GPUs");
  }
  auto me =
      std::find_if(p.active.begin(), p.active.end(), [&](const auto& a) { return isThisHost(c, a.first); });
  if (me == p.active.end()) {
    std::vector<std::string> names;
    for (const auto& [h, _] : p.active) names.push_back(h);
    return skip(
        fmt::format("This host ({}) is not among the resolved hosts ({}); run dsdiag on those hosts (dsdiag "
                    "--world under the job) to check their GPUs",
                    net::hostName(), join(names, ", ")));
  }
  const auto& gpu = c.gpu();
  // launch.py replaces CUDA_VISIBLE_DEVICES with the slots: they index the node's GPUs as NVML counts
  // them; without NVML, CUDA's count is the best there is.
  const long long count =
      static_cast<long long>(gpu.nvmlLoaded ? gpu.nvmlDevices.size() : gpu.devices.size());
  const auto& [host, slots] = *me;
  std::vector<long long> beyond;
  for (long long s : slots) {
    if (s >= count) beyond.push_back(s);
  }
  Json data{{"host", host},
            {"slots", slots},
            {"gpus_visible", count},
            {"counted_by", gpu.nvmlLoaded ? "nvml" : "cuda"}};
  if (!beyond.empty()) {
    std::vector<long long> have;
    for (long long i = 0; i < count; ++i) have.push_back(i);
    std::string remedy =
        count > 0 ? fmt::format(
                        "Give DeepSpeed what this host has: slots={} for {} in the hostfile, --include "
                        "{}:{}, or --num_gpus {}.",
                        count, host, host, slotText(have), count)
                  : fmt::format(
                        "No GPU is visible on {}: check the driver (the gpu.* checks say why), or leave the "
                        "host out (--exclude {}).",
                        host, host);
    return fail(
        fmt::format("{} gets slots {} but {} GPU(s) are visible here: launch.py sets CUDA_VISIBLE_DEVICES={} "
                    "and the ranks on slot(s) {} find no GPU (\"invalid device ordinal\")",
                    host, slotText(slots), count, csv(slots), csv(beyond)),
        remedy, data);
  }
  return pass(fmt::format("{}: slots {} fit the {} GPU(s) visible here{}", host, slotText(slots), count,
                          static_cast<long long>(slots.size()) < count
                              ? fmt::format(" ({} unused)", count - static_cast<long long>(slots.size()))
                              : ""),
              data);
}

}  // namespace

std::vector<CheckDef> runnerChecks() {
  return {
      {"runner.hostfile", "runner", "DeepSpeed's hostfile parses as DeepSpeed parses it (names the line)",
       hostfileCheck},
      {"runner.resources", "runner",
       "--include/--exclude/--num_nodes/--num_gpus resolve to DeepSpeed's hosts, slots and ranks",
       resourcesCheck},
      {"runner.ssh", "runner", "Every host resolves and its ssh port answers (bounded by --connect-timeout)",
       sshCheck},
      {"runner.exports", "runner",
       "What each rank gets: exported prefixes, `.deepspeed_env`, launch.py's variables", exportsCheck},
      {"runner.gpus_fit", "runner", "This host's slots fit the GPUs visible here", gpusFitCheck},
  };
}

}  // namespace ds::diag
