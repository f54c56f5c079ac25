// What DeepSpeed's runner (the `deepspeed` command, DeepSpeed 0.19.8 on Python 3.11) makes of its
// inputs before it starts anything: the hostfile, --include/--exclude, --num_nodes/--num_gpus, the
// local devices, `.deepspeed_env` and the exported variable prefixes. It follows
// deepspeed/launcher/runner.py (fetch_hostfile, _parse_hostfile, parse_node_config_list,
// parse_resource_filter, parse_inclusion_exclusion, apply_num_nodes_and_gpus, main()),
// multinode_runner.py (the six launchers: PDSHRunner, OpenMPIRunner, MPICHRunner, IMPIRunner,
// SlurmRunner, MVAPICHRunner: validate_args, validate_active_resources, their exports and get_cmd)
// and launch.py (ranks, LOCAL_RANK, visible devices).
//
// Pure functions of their inputs, apart from reading the hostfile and `.deepspeed_env`: nothing
// connects and nothing runs over ssh. Where DeepSpeed raises, they throw DeepSpeedRunnerError with
// DeepSpeed's exception type and text verbatim. engine/env/tests/deepspeed/runner_* holds the
// differential test against DeepSpeed's own functions.
//
// Text is read as Python reads it: UTF-8 (a bad byte is DeepSpeed's UnicodeDecodeError), universal
// newlines, str.strip() whitespace. Known limits: `\d` and int() take ASCII digits only (Python
// also takes other Unicode decimal digits), and `\w` in add_export's quoting rule counts every
// non-ASCII character that is not whitespace as a word character.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/common/error.h"
#include "engine/env/env_source.h"

namespace ds::env {

// Where DeepSpeed's runner raises. what() is DeepSpeed's text, where it happened and what to do;
// type() and deepspeedText() are DeepSpeed's exception, verbatim, for comparison with DeepSpeed.
class DeepSpeedRunnerError : public ConfigError {
 public:
  DeepSpeedRunnerError(std::string type, std::string deepspeedText, std::string where, std::string remedy);
  const std::string& type() const { return type_; }
  const std::string& deepspeedText() const { return text_; }
  const std::string& where() const { return where_; }    // "hosts:3", "--include", ...
  const std::string& remedy() const { return remedy_; }  // what to do, one sentence

 private:
  std::string type_, text_, where_, remedy_;
};

// One `host slots=N` line of a hostfile, in file order.
struct HostfileEntry {
  std::string host;
  long long slots = 0;
  int line = 0;  // 1-based, as an editor numbers it
};
struct Hostfile {
  std::string path;
  std::vector<HostfileEntry> hosts;
};

// DeepSpeed refuses hostfiles and `.deepspeed_env` files above this size in no way; dsperf refuses
// them (a hostfile of 16 MiB is not a hostfile) with a sentence of its own.
inline constexpr std::size_t kRunnerFileLimit = 16u << 20;
// Slots per host above which dsperf refuses (DeepSpeed builds a list of every slot id).
inline constexpr long long kRunnerSlotLimit = 1 << 20;

// _parse_hostfile on a file's bytes. `path` names the file in messages. Throws DeepSpeedRunnerError
// (UnicodeDecodeError, ValueError: a bad entry, multiple entries, empty) naming the line.
Hostfile parseHostfile(std::string_view bytes, const std::string& path);

// fetch_hostfile: nullopt where `path` is not a regular file (DeepSpeed then warns "Unable to find
// hostfile, will proceed with training with local resources only." and runs on localhost). Throws
// DeepSpeedRunnerError for an unreadable file (PermissionError) and whatever parseHostfile throws;
// ConfigError above kRunnerFileLimit.
std::optional<Hostfile> fetchHostfile(const std::string& path);

// Host -> slot ids, in DeepSpeed's (hostfile) order: the world_info DeepSpeed hands launch.py.
using ActiveResources = std::vector<std::pair<std::string, std::vector<long long>>>;

// parse_inclusion_exclusion(resource_pool, include, exclude) on a parsed hostfile's pool. Throws
// DeepSpeedRunnerError with DeepSpeed's ValueError ("Hostname 'x' not found in hostfile", ...).
ActiveResources parseInclusionExclusion(const std::vector<std::pair<std::string, long long>>& pool,
                                        std::string_view include, std::string_view exclude);
// apply_num_nodes_and_gpus: the first num_nodes hosts (when > 0), then slots 0..num_gpus-1 on each
// (when > 0; not checked against the host's slots, as in DeepSpeed).
ActiveResources applyNumNodesAndGpus(ActiveResources active, long long numNodes, long long numGpus);

// The runner's flags that decide the resources (DeepSpeed's spelling and defaults).
struct RunnerFlags {
  std::string hostfile = "/job/hostfile";  // -H/--hostfile
  std::string include, exclude;            // -i/--include, -e/--exclude
  long long numNodes = -1, numGpus = -1;   // --num_nodes, --num_gpus/--num_accelerators
  std::optional<int> sshPort;              // --ssh_port (ssh's own default, 22, when unset)
  std::string masterAddr;                  // --master_addr ("": rank 0's `hostname -I` over ssh)
  int masterPort = 29500;                  // --master_port
  // The multi-node launcher: pdsh, openmpi, mpich, impi, slurm, mvapich (any case, as DeepSpeed
  // lowers it); another name is DeepSpeed's NotImplementedError, but only once it launches multi-node.
  std::string launcher = "pdsh";
  std::string launcherArgs;  // --launcher_args, split as shlex.split splits it
  bool noSsh = false;        // --no_ssh: launch.py here as node --node_rank, whatever the hostfile
  bool forceMulti = false;   // --force_multi: the multi-node launcher even for one host
  int nodeRank = -1;         // --node_rank (with --no_ssh)
  bool module = false;       // --module
  bool noPython = false;     // --no_python
  std::string userScript = "train.py";
  std::vector<std::string> userArgs;
};

// The launchers DeepSpeed's runner knows, in its LAUNCHER_CLASSES order.
inline constexpr std::string_view kRunnerLaunchers[] = {"pdsh", "openmpi", "mpich", "impi", "mvapich", "slurm"};

// The program a launcher's backend_exists() looks for on PATH (mvapich also needs `mpiname` to
// print MVAPICH2-GDR); "" for a name DeepSpeed does not know.
std::string_view runnerBackendProgram(std::string_view launcher);

// What the runner's environment holds beside the flags.
struct RunnerContext {
  const EnvSource* env = nullptr;   // the launching shell's environment
  std::vector<std::string> names;   // the variable names `env` holds, in environ order
  std::string home;                 // expanduser("~"): HOME, else the password database's
  std::string cwd;                  // where `deepspeed` runs ('.' and PYTHONPATH)
  std::string accelerator = "cpu";  // get_accelerator()'s name (its export prefixes)
  long long localDeviceCount = 0;   // get_accelerator().device_count(), used without a hostfile
  bool readEnvFiles = true;         // false: leave `.deepspeed_env` out (a caller that checks it apart)
  std::string python = "python3";   // sys.executable of the `deepspeed` command (in the commands)
  std::string deepspeedDir = "<deepspeed>/launcher";  // where multinode_runner.py lies (mpich's helper)
  // backend_exists() for a launcher (lowercase); unset: taken as installed, and the plan says what
  // DeepSpeed looks for (RunnerPlan::backendProgram).
  std::function<bool(std::string_view launcher)> backendExists{};
};

// One variable PDSHRunner exports to every rank of a multi-node launch (`export KEY=VALUE;`).
struct RunnerExport {
  std::string key;
  std::string value;   // as add_export wrote it: stripped, double-quoted when it has shell characters
  std::string source;  // "environment (prefix NCCL)", "/home/u/.deepspeed_env:3", "PYTHONPATH: cwd prepended"
};

// One rank as launch.py starts it.
struct RunnerRank {
  int rank = 0;
  int localRank = 0;  // launch.py: rank % ranks on the host (not the index on uneven hosts)
  int indexOnHost = 0;
  int nodeRank = 0;
  std::string host;
  long long slot = 0;  // its CUDA_VISIBLE_DEVICES entry
};

struct RunnerPlan {
  std::optional<Hostfile> hostfile;  // nullopt: not a file, DeepSpeed runs on localhost
  std::vector<std::string> notes;    // what DeepSpeed prints or logs on the way (sentences)
  std::string include, exclude;      // after the CUDA_VISIBLE_DEVICES rule
  ActiveResources active;            // world_info
  bool multiNode = false;            // pdsh over ssh; false: launch.py here, with this environment
  std::string masterAddr;            // "" with masterFromHost: that host's first `hostname -I` address
  std::string masterFromHost;
  int masterPort = 29500;
  int worldSize = 0;
  std::vector<RunnerRank> ranks;
  // Multi-node only (a local launch passes the whole environment and reads no `.deepspeed_env`).
  std::vector<std::string> prefixes;  // EXPORT_ENVS + the accelerator's export_envs()
  std::vector<std::string> envFiles;  // the `.deepspeed_env` paths read, in order
  std::vector<RunnerExport> exports;  // the launcher's own first (openmpi: UCX_TLS; mvapich: MV2_*)
  // What starts the job: "local" (launch.py here) or the multi-node launcher's name.
  std::string launcher = "local";
  std::string backendProgram;         // what the launcher's backend_exists() looks for
  std::vector<std::string> command;   // the argv DeepSpeed's Popen runs (master from a host: see below)
  // Variables the runner sets or removes in that command's environment (PYTHONPATH, PDSH_RCMD_TYPE,
  // PDSH_SSH_ARGS_APPEND; CUDA_VISIBLE_DEVICES is removed where DeepSpeed turned it into --include).
  std::vector<std::pair<std::string, std::string>> commandEnv;
  std::vector<std::string> commandEnvUnset;
  // A file the launcher writes before it starts (mvapich: /tmp/deepspeed_mvapich_hostfile).
  std::string launcherFile, launcherFileText;
};

// Where the master address is asked of a host over ssh, the command holds this text in its place.
std::string runnerMasterPlaceholder(const std::string& host);

// shlex.split(text) (POSIX mode, no comments), as DeepSpeed splits --launcher_args. Throws
// DeepSpeedRunnerError (ValueError "No closing quotation" / "No escaped character").
std::vector<std::string> pythonShlexSplit(std::string_view text, const std::string& where);

// encode_world_info: json.dumps(world_info) in urlsafe base64, as launch.py's --world_info gets it.
std::string encodeWorldInfo(const ActiveResources& active);

// DeepSpeed's EXPORT_ENVS followed by `accelerator`'s export_envs() (["NCCL"] for cuda).
std::vector<std::string> runnerExportPrefixes(std::string_view accelerator);

// The `.deepspeed_env` paths DeepSpeed looks at, in its order: ~/NAME then ./NAME, NAME from
// DS_ENV_FILE (default .deepspeed_env); `path` as DeepSpeed joins it, `resolved` against ctx.cwd.
struct EnvFileCandidate {
  std::string path;
  std::string resolved;
};
std::vector<EnvFileCandidate> deepspeedEnvFiles(const RunnerContext& ctx);

// main() up to the launch: the order of its checks, its errors (DeepSpeedRunnerError), and the
// layout launch.py then builds. The ssh check and `ssh HOST hostname -I` are not run: the plan
// names the host they would reach.
RunnerPlan planRunner(const RunnerFlags& flags, const RunnerContext& ctx);

}  // namespace ds::env
