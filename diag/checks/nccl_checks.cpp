// Family "nccl": which NCCL runs and how it is configured (REFERENCE.md §6, §7.8, §7.9). libnccl is
// dlopen'ed in a child process; dsdiag never links it.
#include <algorithm>
#include <map>

#include "diag/check.h"
#include "diag/probes.h"
#include "diag/util.h"
#include "engine/comm/backends/nccl/nccl_version.h"

namespace ds::diag {
namespace {

// Documented as debugging aids; left set in production they make runs slow or hang.
constexpr const char* kDebugOnly[] = {"NCCL_P2P_DISABLE",   "NCCL_SHM_DISABLE",    "NCCL_IB_DISABLE",
                                      "NCCL_ALGO",          "NCCL_PROTO",          "NCCL_MAX_NCHANNELS",
                                      "NCCL_MIN_NCHANNELS", "NCCL_NTHREADS",       "NCCL_CHECKS_DISABLE",
                                      "NCCL_LAUNCH_MODE",   "NCCL_BUFFSIZE",       "NCCL_NET_GDR_LEVEL"};

bool isDebugOnly(const std::string& k) {
  return std::find(std::begin(kDebugOnly), std::end(kDebugOnly), k) != std::end(kDebugOnly);
}

struct ConfFile {
  std::string path;
  bool read = false;
  std::map<std::string, std::string> values;
  std::vector<std::string> malformed;
};

ConfFile readConf(const std::string& path) {
  ConfFile f;
  f.path = path;
  auto text = readTextFile(path);
  if (!text) return f;
  f.read = true;
  int lineNo = 0;
  for (const auto& raw : split(*text, '\n')) {
    ++lineNo;
    std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      f.malformed.push_back(fmt::format("line {}: {}", lineNo, quoteValue(line, 40)));
      continue;
    }
    f.values[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return f;
}

// The conf files NCCL reads: NCCL_CONF_FILE when set, else ~/.nccl.conf and /etc/nccl.conf.
std::vector<ConfFile> confFiles(const Context& c) {
  std::vector<ConfFile> out;
  if (auto f = c.get("NCCL_CONF_FILE"); f && !f->empty()) {
    out.push_back(readConf(*f));
    return out;
  }
  if (auto home = c.get("HOME"); home && !home->empty()) out.push_back(readConf(*home + "/.nccl.conf"));
  out.push_back(readConf(c.paths().ncclConf));
  return out;
}

std::map<std::string, std::string> ncclEnv(const Context& c) {
  std::map<std::string, std::string> out;
  for (const auto& n : c.namesWithPrefix("NCCL_")) out[n] = c.get(n).value_or("");
  return out;
}

Finding version(Context& c) {
  auto& p = c.nccl();
  auto header = comm::decodeNcclVersion(p.headerCode);
  Json data{{"path", p.path}, {"runtime_code", p.runtimeCode}, {"header_code", p.headerCode},
            {"header", p.headerCode ? header.str() : ""}};
  bool wants = c.jobBackend() == "nccl";
  if (!p.broken.empty()) {
    data["error"] = p.error;
    return brokenLibrary(p.broken, p.error, "libnccl (dsbench built with CUDA, PyTorch)",
                         "", data);
  }
  if (!p.loaded || !p.error.empty()) {
    std::string msg = fmt::format("libnccl {}{}", p.loaded ? "loads but fails: " : "cannot be loaded: ", p.error);
    data["error"] = p.error;
    if (wants) {
      return fail(msg + ". The job's backend is nccl, so init_distributed fails",
                  "Install NCCL (libnccl2) or put its lib directory on LD_LIBRARY_PATH; or use backend gloo.", data);
    }
    return skip(msg + "; the job's backend is " + c.jobBackend() + ", so NCCL is not needed", data);
  }
  auto rt = comm::decodeNcclVersion(p.runtimeCode);
  data["runtime"] = rt.str();
  std::string both = fmt::format("NCCL {} loaded from {} (code {}); built with {}", rt.str(), p.path, p.runtimeCode,
                                 p.headerCode ? fmt::format("{} (NCCL_VERSION_CODE {})", header.str(), p.headerCode)
                                              : "no nccl.h (version unknown)");
  if (p.headerCode && p.headerCode != p.runtimeCode) {
    return warn(both + ": the library loaded at run time differs from the header dsbench was built with; features and "
                "ABI assumptions may differ",
                "Put the matching libnccl first (LD_LIBRARY_PATH, or a pip wheel's nvidia/nccl/lib shadowing the "
                "system one), or rebuild against the installed NCCL.",
                data);
  }
  // Loading the library and asking its version is all this check does: it says so, and where a
  // communicator is started (issue 42: a PASS must not read as "NCCL starts here").
  return pass(both + "; no communicator made here: dsdiag --world (a job on nccl) and `dsbench world --backend "
                     "nccl` start one",
              data);
}

Finding envEcho(Context& c) {
  auto env = ncclEnv(c);
  std::map<std::string, std::string> settings;
  for (const auto& f : confFiles(c)) {
    for (const auto& [k, v] : f.values) settings[k] = v;
  }
  for (const auto& [k, v] : env) settings[k] = v;  // the environment wins over the files
  Json data{{"env", env}, {"settings", settings}};
  if (env.empty() && settings.empty()) return pass("No NCCL_* variables are set (NCCL's defaults apply)", data);
  std::vector<std::string> parts;
  for (const auto& [k, v] : settings) parts.push_back(fmt::format("{}={}", k, quoteValue(v, 40)));
  if (auto d = env.find("NCCL_DEBUG"); d != env.end()) {
    static const char* kLevels[] = {"VERSION", "WARN", "INFO", "TRACE", "ABORT"};
    std::string up = d->second;
    std::transform(up.begin(), up.end(), up.begin(), ::toupper);
    if (std::find(std::begin(kLevels), std::end(kLevels), up) == std::end(kLevels)) {
      return warn(fmt::format("NCCL_DEBUG={} is not a level NCCL knows (VERSION, WARN, INFO, TRACE): it is ignored, so "
                              "the logs you expect never appear",
                              quoteValue(d->second)),
                  "Use NCCL_DEBUG=WARN in production, INFO when debugging.", data);
    }
    if (up == "TRACE") {
      return warn("NCCL_DEBUG=TRACE logs every call: it slows every collective",
                  "Use NCCL_DEBUG=WARN (or INFO while debugging).", data);
    }
  }
  return pass(fmt::format("NCCL settings (env over conf files): {}", join(parts, ", ")), data);
}

Finding debugVars(Context& c) {
  std::vector<std::string> found;
  Json data = Json::object();
  for (const auto& [k, v] : ncclEnv(c)) {
    if (isDebugOnly(k)) {
      found.push_back(fmt::format("{}={} (env)", k, quoteValue(v, 30)));
      data[k] = v;
    }
  }
  for (const auto& f : confFiles(c)) {
    for (const auto& [k, v] : f.values) {
      if (isDebugOnly(k) && !data.contains(k)) {
        found.push_back(fmt::format("{}={} ({})", k, quoteValue(v, 30), f.path));
        data[k] = v;
      }
    }
  }
  if (found.empty()) return pass("No debug-only NCCL variables are set");
  return warn(fmt::format("Debug-only NCCL settings: {}. They disable transports or pin algorithms, which makes "
                          "collectives slow or can hang them",
                          join(found, ", ")),
              "Remove them from the job environment and nccl.conf unless you are debugging NCCL right now.", data);
}

Finding confFilesCheck(Context& c) {
  auto files = confFiles(c);
  Json arr = Json::array();
  std::vector<std::string> read;
  for (const auto& f : files) {
    arr.push_back({{"path", f.path}, {"read", f.read}, {"values", f.values}, {"malformed", f.malformed}});
    if (f.read) read.push_back(fmt::format("{} ({} setting(s))", f.path, f.values.size()));
  }
  Json data{{"files", arr}};
  if (auto f = c.get("NCCL_CONF_FILE"); f && !f->empty() && !files.front().read) {
    return warn(fmt::format("NCCL_CONF_FILE={} cannot be read: NCCL silently ignores it, so the settings you put there "
                            "do not apply",
                            quoteValue(*f)),
                "Point NCCL_CONF_FILE at a readable file on every node, or unset it.", data);
  }
  for (const auto& f : files) {
    if (!f.malformed.empty()) {
      return warn(fmt::format("{} has lines that are not KEY=VALUE ({}): NCCL skips them", f.path,
                              join(f.malformed, "; ")),
                  "Write one NCCL_NAME=value per line; # starts a comment.", data);
    }
  }
  if (read.empty()) return pass("No NCCL configuration file (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf)", data);
  return pass("Read " + join(read, ", "), data);
}

}  // namespace

std::vector<CheckDef> ncclChecks() {
  return {
      {"nccl.version", "nccl", "libnccl version (dlopen + ncclGetVersion) against the header built with", version},
      {"nccl.env", "nccl", "NCCL_* settings echoed (environment over conf files)", envEcho},
      {"nccl.debug_vars", "nccl", "Debug-only NCCL variables left set", debugVars},
      {"nccl.conf_files", "nccl", "/etc/nccl.conf, ~/.nccl.conf and NCCL_CONF_FILE", confFilesCheck},
  };
}

}  // namespace ds::diag
