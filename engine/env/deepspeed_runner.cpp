#include "engine/env/deepspeed_runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "engine/env/deepspeed_view.h"
#include "engine/env/launchers.h"

namespace ds::env {
namespace {

// --- Python's text model on UTF-8 bytes ---

// The code point at s[i] and its length; an invalid byte counts as one non-space character (as
// os.environ's surrogateescape keeps it).
std::size_t codePoint(std::string_view s, std::size_t i, char32_t& cp) {
  auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    cp = 0xFFFD;
    return 1;
  }
  cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return n;
}

// str.isspace(), which str.strip() and re's \s follow.
bool pySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// The length of the whitespace run at s[i] (0 when none).
std::size_t spaceRun(std::string_view s, std::size_t i) {
  std::size_t j = i;
  while (j < s.size()) {
    char32_t c;
    std::size_t n = codePoint(s, j, c);
    if (!pySpace(c)) break;
    j += n;
  }
  return j - i;
}

std::string_view pyStrip(std::string_view s) {
  s.remove_prefix(spaceRun(s, 0));
  // From the end: walk forward, remembering where the last non-space character ended.
  std::size_t end = 0;
  for (std::size_t i = 0; i < s.size();) {
    char32_t c;
    std::size_t n = codePoint(s, i, c);
    i += n;
    if (!pySpace(c)) end = i;
  }
  return s.substr(0, end);
}

// Python's strict UTF-8 decoder: the UnicodeDecodeError text for the first bad sequence, or "";
// `offset` is its byte offset in the file. Python numbers positions within its read chunks (8 KiB,
// carried-over bytes first), so the text's position is the file offset for files up to 4 KiB.
std::string utf8Error(std::string_view s, std::size_t& offset) {
  for (std::size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    std::size_t need = b >= 0xC2 && b <= 0xDF   ? 1
                       : b >= 0xE0 && b <= 0xEF ? 2
                       : b >= 0xF0 && b <= 0xF4 ? 3
                                                : 0;
    auto at = [&](std::size_t last, const char* why) {
      offset = i;
      if (last == i)
        return fmt::format("'utf-8' codec can't decode byte 0x{:02x} in position {}: {}", b, i, why);
      return fmt::format("'utf-8' codec can't decode bytes in position {}-{}: {}", i, last, why);
    };
    if (need == 0) return at(i, "invalid start byte");
    for (std::size_t k = 1; k <= need; ++k) {
      if (i + k >= s.size()) {
        // At the end of the file the incremental decoder holds only the incomplete tail, and Python
        // numbers its bytes from 0.
        offset = i;
        std::size_t last = s.size() - 1 - i;
        if (last == 0)
          return fmt::format("'utf-8' codec can't decode byte 0x{:02x} in position 0: unexpected end of data",
                             b);
        return fmt::format("'utf-8' codec can't decode bytes in position 0-{}: unexpected end of data", last);
      }
      auto c = static_cast<unsigned char>(s[i + k]);
      unsigned lo = 0x80, hi = 0xBF;
      if (k == 1 && b == 0xE0) lo = 0xA0;
      if (k == 1 && b == 0xED) hi = 0x9F;
      if (k == 1 && b == 0xF0) lo = 0x90;
      if (k == 1 && b == 0xF4) hi = 0x8F;
      if (c < lo || c > hi) return at(i + k - 1, "invalid continuation byte");
    }
    i += need + 1;
  }
  return "";
}

// readlines() in text mode: universal newlines ('\r\n', '\r' and '\n' end a line).
std::vector<std::string_view> pyLines(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    std::size_t end = i;
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    out.push_back(s.substr(start, end - start + 1));  // keeps one end-of-line character, as Python's '\n'
    start = i + 1;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

[[noreturn]] void raise(std::string type, std::string text, std::string where, std::string remedy) {
  throw DeepSpeedRunnerError(std::move(type), std::move(text), std::move(where), std::move(remedy));
}

// open() and read() as Python's would fail: "[Errno 13] Permission denied: '/path'".
std::string readForPython(const std::string& path, const std::string& what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    raise(e == EACCES ? "PermissionError" : "OSError",
          fmt::format("[Errno {}] {}: {}", e, std::strerror(e), pythonRepr(path)), path,
          fmt::format(
              "DeepSpeed's runner cannot open the {}: make it readable by the user who runs `deepspeed` "
              "(chmod a+r), or remove it.",
              what));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) > kRunnerFileLimit) {
    ::close(fd);
    throw ConfigError(
        fmt::format("{}: the {} is larger than {} MiB; dsperf does not read it (a {} of that size "
                    "is not one; check the path).",
                    path, what, kRunnerFileLimit >> 20, what));
  }
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      raise("OSError", fmt::format("[Errno {}] {}", e, std::strerror(e)), path,
            fmt::format("The {} cannot be read; check the disk or file system it is on.", what));
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (data.size() > kRunnerFileLimit) break;
  }
  ::close(fd);
  return data;
}

void checkUtf8(std::string_view bytes, const std::string& path, const std::string& what) {
  std::size_t at = 0;
  std::string err = utf8Error(bytes, at);
  if (err.empty()) return;
  int line = 1 + static_cast<int>(std::count(bytes.begin(), bytes.begin() + static_cast<long>(at), '\n'));
  raise(
      "UnicodeDecodeError", err, fmt::format("{}:{}", path, line),
      fmt::format("Python reads the {} as UTF-8 and stops at byte {} (line {}): save it as plain text (ASCII "
                  "host names and values).",
                  what, at, line));
}

bool isRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string hostList(const std::vector<std::pair<std::string, std::vector<long long>>>& hosts) {
  std::vector<std::string> names;
  for (const auto& [h, _] : hosts) names.push_back(h);
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

// parse_node_config_list: NAME[:SLOT[,SLOT...]][@...] -> host -> sorted unique slots, first-seen order.
std::vector<std::pair<std::string, std::vector<long long>>> parseNodeConfigList(std::string_view text,
                                                                                const std::string& flag) {
  std::vector<std::pair<std::string, std::vector<long long>>> configs;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = text.find('@', start);
    std::string_view node =
        text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start);
    std::string host(node);
    std::vector<long long> slots;
    if (auto colon = node.find(':'); colon != std::string_view::npos) {
      if (node.find(':', colon + 1) != std::string_view::npos) {
        raise("ValueError", "too many values to unpack (expected 2)", flag,
              fmt::format("{} has more than one ':' in {}: write HOST:SLOT,SLOT, hosts separated by @ (e.g. "
                          "worker-0:0,1@worker-1).",
                          flag, pythonRepr(node)));
      }
      host = std::string(node.substr(0, colon));
      std::string_view list = node.substr(colon + 1);
      std::size_t s = 0;
      for (;;) {
        std::size_t comma = list.find(',', s);
        std::string_view item =
            list.substr(s, comma == std::string_view::npos ? std::string_view::npos : comma - s);
        auto v = pythonInt(item);
        if (!v) {
          raise("ValueError", "invalid literal for int() with base 10: " + pythonRepr(item), flag,
                fmt::format("Slot ids are whole numbers separated by commas ({}'s {}): HOST:0,1@HOST2.", flag,
                            pythonRepr(node)));
        }
        slots.push_back(*v);
        if (comma == std::string_view::npos) break;
        s = comma + 1;
      }
    }
    auto it = std::find_if(configs.begin(), configs.end(), [&](const auto& c) { return c.first == host; });
    if (it == configs.end()) {
      configs.emplace_back(host, slots);
    } else {
      it->second.insert(it->second.end(), slots.begin(), slots.end());
    }
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  for (auto& [_, slots] : configs) {
    std::sort(slots.begin(), slots.end());
    slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  }
  return configs;
}

std::string slotRange(const std::vector<long long>& slots) {
  if (slots.empty()) return "no slots";
  return fmt::format("slots {}", fmt::join(slots, ","));
}

// parse_resource_filter(host_info, include_str, exclude_str).
ActiveResources parseResourceFilter(const ActiveResources& hostInfo, std::string_view include,
                                    std::string_view exclude) {
  if (!include.empty() && !exclude.empty()) {
    raise("ValueError", "include_str and exclude_str are mutually exclusive.", "--include/--exclude",
          "Give --include (the hosts and slots to use) or --exclude (those to leave out), not both.");
  }
  if (include.empty() && exclude.empty()) return hostInfo;
  const bool inc = !include.empty();
  const std::string flag = inc ? "--include" : "--exclude";
  ActiveResources filtered;
  if (!inc) filtered = hostInfo;
  auto find = [](ActiveResources& r, const std::string& h) {
    return std::find_if(r.begin(), r.end(), [&](const auto& e) { return e.first == h; });
  };
  ActiveResources info = hostInfo;
  for (const auto& [host, slots] : parseNodeConfigList(inc ? include : exclude, flag)) {
    auto known = find(info, host);
    if (known == info.end()) {
      raise("ValueError", fmt::format("Hostname '{}' not found in hostfile", host), flag,
            fmt::format(
                "{} names {}, which the hostfile does not list; use a name exactly as the hostfile writes "
                "it (names are compared as text: worker-1 and worker-1.cluster differ). The hostfile lists: "
                "{}.",
                flag, host.empty() ? "an empty host (a stray or doubled @?)" : "'" + host + "'",
                hostList(hostInfo)));
    }
    for (long long s : slots) {
      if (std::find(known->second.begin(), known->second.end(), s) == known->second.end()) {
        raise("ValueError", fmt::format("No slot '{}' specified on host '{}'", s, host), flag,
              fmt::format("Host '{}' has {} in the hostfile; {} can only name those.", host,
                          slotRange(known->second), flag));
      }
    }
    auto f = find(filtered, host);
    if (inc) {
      std::vector<long long> chosen = slots.empty() ? known->second : slots;
      if (f == filtered.end()) {
        filtered.emplace_back(host, chosen);
      } else {
        f->second = chosen;
      }
    } else if (slots.empty()) {
      f->second.clear();
    } else {
      for (long long s : slots) f->second.erase(std::find(f->second.begin(), f->second.end(), s));
    }
  }
  // In the hostfile's order, without empty hosts.
  ActiveResources ordered;
  for (const auto& [host, _] : hostInfo) {
    auto f = find(filtered, host);
    if (f != filtered.end() && !f->second.empty()) ordered.emplace_back(host, f->second);
  }
  return ordered;
}

// A `.deepspeed_env` value or a variable as PDSHRunner.add_export writes it.
std::string exportValue(std::string_view raw) {
  std::string_view v = pyStrip(raw);
  for (std::size_t i = 0; i < v.size();) {
    char32_t c;
    std::size_t n = codePoint(v, i, c);
    i += n;
    bool word = c >= 0x80 ? !pySpace(c) : (std::isalnum(static_cast<int>(c)) != 0 || c == '_');
    if (!word && std::string_view("@%+=:,./-").find(static_cast<char>(c)) == std::string_view::npos) {
      return fmt::format("\"{}\"", v);
    }
  }
  return std::string(v);
}

void addExport(std::vector<RunnerExport>& exports, std::string_view key, std::string_view value,
               std::string source) {
  std::string k(pyStrip(key));
  std::string v = exportValue(value);
  auto it = std::find_if(exports.begin(), exports.end(), [&](const auto& e) { return e.key == k; });
  if (it == exports.end()) {
    exports.push_back({k, v, std::move(source)});
  } else {
    it->value = v;
    it->source = std::move(source);
  }
}

void readEnvFile(const EnvFileCandidate& f, RunnerPlan& plan) {
  std::string bytes = readForPython(f.resolved, "`.deepspeed_env` file");
  checkUtf8(bytes, f.path, "`.deepspeed_env` file");
  int line = 0;
  for (std::string_view l : pyLines(bytes)) {
    ++line;
    auto eq = l.find('=');
    if (eq == std::string_view::npos) {
      raise("ValueError", "not enough values to unpack (expected 2, got 1)",
            fmt::format("{}:{}", f.path, line),
            fmt::format(
                "Line {} of {} has no '=' ({}): DeepSpeed takes every line as KEY=VALUE, so a blank line "
                "or a comment stops the launch; remove it.",
                line, f.path, pythonRepr(l)));
    }
    addExport(plan.exports, l.substr(0, eq), l.substr(eq + 1), fmt::format("{}:{}", f.path, line));
  }
}


// json.dumps(str) with ensure_ascii: \uXXXX for everything outside ' '..'~'.
std::string pyJsonString(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    char32_t c;
    i += codePoint(s, i, c);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\b') {
      out += "\\b";
    } else if (c == '\f') {
      out += "\\f";
    } else if (c >= 0x20 && c <= 0x7E) {
      out += static_cast<char>(c);
    } else if (c > 0xFFFF) {
      char32_t v = c - 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    } else {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    }
  }
  return out + "\"";
}

std::string base64Url(std::string_view in) {
  static constexpr char kAlpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                 static_cast<unsigned char>(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlpha[(v >> k) & 0x3F];
  }
  if (std::size_t rest = in.size() - i; rest > 0) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += kAlpha[(v >> 18) & 0x3F];
    out += kAlpha[(v >> 12) & 0x3F];
    out += rest == 2 ? kAlpha[(v >> 6) & 0x3F] : '=';
    out += '=';
  }
  return out;
}

std::string lowerAscii(std::string_view s) {
  std::string out(s);
  for (char& ch : out) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return out;
}

// Python's repr() of a list of ints: [0, 2].
std::string pyIntList(const std::vector<long long>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// SlurmRunner.validate_active_resources: srun places tasks by count, so only slots 0..N-1 and the same N
// on every host.
void validateSlurmResources(const ActiveResources& active) {
  std::vector<std::size_t> counts;
  for (const auto& [host, slots] : active) {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] != static_cast<long long>(i)) {
        raise("ValueError",
              fmt::format("slurm backend cannot select specific device ids, got {} on {}. Filter whole "
                          "hosts, or keep the first N slots on every host.",
                          pyIntList(slots), host),
              "--launcher slurm",
              fmt::format("srun starts a count of tasks per host and cannot pin them to slots {} on {}: "
                          "filter whole hosts (--include {}), or use --launcher pdsh.",
                          fmt::join(slots, ","), host, host));
      }
    }
    counts.push_back(slots.size());
  }
  if (std::any_of(counts.begin(), counts.end(), [&](std::size_t n) { return n != counts.front(); })) {
    std::vector<std::string> parts;
    for (const auto& [host, slots] : active) parts.push_back(fmt::format("{}: {}", pythonRepr(host), slots.size()));
    raise("ValueError",
          fmt::format("slurm backend needs the same slot count on every host, got {{{}}}.", fmt::join(parts, ", ")),
          "--launcher slurm",
          "srun gives every host the same number of tasks: give the hosts equal slots (a host with slots=0 "
          "counts too), or use --launcher pdsh.");
  }
}

// The per-node process count of the MPI launchers (mpich, impi, mvapich): the first host's slots,
// and every host must have as many.
long long perNode(const std::vector<std::pair<std::string, long long>>& pool, const std::string& text) {
  long long ppn = pool.front().second;
  for (const auto& [host, n] : pool) {
    if (n != ppn) {
      raise("ValueError", text, "--launcher",
            fmt::format("This launcher starts the same number of ranks on every host (-ppn {}), but {} has "
                        "slots={}: give every hostfile line the same slots, or use --launcher pdsh or openmpi.",
                        ppn, host, n));
    }
  }
  return ppn;
}

// get_cmd of the launcher `name` (lowercase, one DeepSpeed knows).
void buildLauncherCommand(const std::string& name, const RunnerFlags& flags, const RunnerContext& ctx,
                          const std::vector<std::pair<std::string, long long>>& pool, RunnerPlan& plan) {
  const std::string master = plan.masterFromHost.empty() ? plan.masterAddr : runnerMasterPlaceholder(plan.masterFromHost);
  std::vector<std::string> largs = pythonShlexSplit(flags.launcherArgs, "--launcher_args");
  auto& cmd = plan.command;
  auto append = [&](std::initializer_list<std::string> a) { cmd.insert(cmd.end(), a); };
  auto appendAll = [&](const std::vector<std::string>& a) { cmd.insert(cmd.end(), a.begin(), a.end()); };
  auto pythonExec = [&] {
    if (flags.noPython) return;
    append({ctx.python, "-u"});
    if (flags.module) cmd.push_back("-m");
  };
  long long total = 0;
  for (const auto& [_, n] : pool) total += n;
  std::vector<std::string> hostNames;
  for (const auto& [h, _] : pool) hostNames.push_back(h);
  const std::string hosts = fmt::format("{}", fmt::join(hostNames, ","));
  if (name == "pdsh") {
    plan.commandEnv.emplace_back("PDSH_RCMD_TYPE", "ssh");
    if (flags.sshPort) {
      std::string before = ctx.env != nullptr ? ctx.env->get("PDSH_SSH_ARGS_APPEND").value_or("") : "";
      // DeepSpeed's f-string continues over a backslash-newline and keeps the next line's indent.
      plan.commandEnv.emplace_back("PDSH_SSH_ARGS_APPEND",
                                   fmt::format("{} {}-p {}", before, std::string(12, ' '), *flags.sshPort));
    }
    std::vector<std::string> active;
    for (const auto& [h, _] : plan.active) active.push_back(h);
    append({"pdsh", "-S", "-f", "1024", "-w", fmt::format("{}", fmt::join(active, ","))});
    appendAll(largs);
    std::string exports;
    for (const auto& e : plan.exports) exports += fmt::format("export {}={}; ", e.key, e.value);
    append({exports, fmt::format("cd {};", ctx.cwd), ctx.python, "-u", "-m", "deepspeed.launcher.launch",
            "--world_info=" + encodeWorldInfo(plan.active), "--node_rank=%n", "--master_addr=" + master,
            fmt::format("--master_port={}", flags.masterPort)});
    if (flags.noPython) cmd.push_back("--no_python");
    if (flags.module) cmd.push_back("--module");
    cmd.push_back("--enable_each_rank_log=None");  // the flag's default is the string "None"
    cmd.push_back(flags.userScript);
    for (const auto& a : flags.userArgs) {
      if (a.find(' ') == std::string::npos) {
        cmd.push_back(a);
        continue;
      }
      std::string q;
      for (char ch : a) q += ch == '"' ? std::string("\\\"") : std::string(1, ch);
      cmd.push_back("\"" + q + "\"");
    }
    return;
  }
  if (name == "openmpi") {
    append({"mpirun", "-n", std::to_string(total), "-hostfile", flags.hostfile, "--mca", "btl", "^openib"});
    bool ownIf = false;
    for (std::size_t i = 0; i + 1 < largs.size(); ++i)
      ownIf = ownIf || ((largs[i] == "-mca" || largs[i] == "--mca") && largs[i + 1] == "btl_tcp_if_include");
    if (!ownIf) append({"--mca", "btl_tcp_if_include", "eth0"});
    appendAll(largs);
    for (const auto& e : plan.exports) append({"-x", e.key + "=" + e.value});
    pythonExec();
  } else if (name == "mpich" || name == "impi") {
    long long ppn = perNode(pool, name == "mpich" ? "MPICH requires same number of devices per node"
                                                  : "Intel MPI requires same number of devices per node");
    if (name == "mpich") {
      append({"mpirun", "-n", std::to_string(total), "-ppn", std::to_string(ppn)});
    } else {
      append({"mpirun", "-ppn", std::to_string(ppn)});
    }
    appendAll(largs);
    for (const auto& e : plan.exports) {
      if (name == "mpich") {
        append({"-genv", e.key + "=" + e.value});
      } else {
        append({"-genv", e.key, e.value});
      }
    }
    append({"-genv", "MASTER_ADDR", master, "-genv", "MASTER_PORT", std::to_string(flags.masterPort), "-genv",
            "WORLD_SIZE", std::to_string(total), "-genv", "LOCAL_SIZE", std::to_string(ppn)});
    if (name == "impi") append({"-genv", "I_MPI_PIN", "0"});
    append({"-hosts", hosts});
    if (name == "mpich") {
      pythonExec();
      append({ctx.deepspeedDir + "/launcher_helper.py", "--launcher", name});
      if (flags.noPython) {
        cmd.push_back("--no_python");
      } else if (flags.module) {
        cmd.push_back("--module");
      }
    } else {
      for (long long i = 0; i < total; ++i) {
        if (i > 0) cmd.push_back(":");
        append({"-n", "1", "-env", "RANK", std::to_string(i), "-env", "LOCAL_RANK", std::to_string(i % ppn)});
        pythonExec();
        cmd.push_back(flags.userScript);
        appendAll(flags.userArgs);
      }
      return;
    }
  } else if (name == "mvapich") {
    long long ppn = perNode(pool, "mvapich requires same number of devices per node");
    plan.launcherFile = "/tmp/deepspeed_mvapich_hostfile";
    for (const auto& h : hostNames) plan.launcherFileText += h + "\n";
    append({"mpirun", "-np", std::to_string(total), "-ppn", std::to_string(ppn), "--hostfile", plan.launcherFile});
    appendAll(largs);
    for (const auto& e : plan.exports) append({"-env", e.key + "=" + e.value});
    pythonExec();
  } else {  // slurm
    validateSlurmResources(plan.active);
    long long tasks = 0;
    std::vector<std::string> active;
    for (const auto& [h, slots] : plan.active) {
      tasks += static_cast<long long>(slots.size());
      active.push_back(h);
    }
    append({"srun", "-n", std::to_string(tasks)});
    appendAll(largs);
    if (!plan.include.empty() || !plan.exclude.empty())
      append({"--nodelist", fmt::format("{}", fmt::join(active, ",")), "--nodes", std::to_string(active.size())});
    if (flags.numNodes > 0) append({"--nodes", std::to_string(flags.numNodes)});
    if (flags.numGpus > 0) append({"--gpus-per-node", std::to_string(flags.numGpus)});
    std::string exports = "--export=ALL";
    for (const auto& e : plan.exports) exports += fmt::format(",{}={}", e.key, e.value);
    append({exports, ctx.python, "-u"});  // SlurmRunner ignores --no_python and --module
  }
  cmd.push_back(flags.userScript);
  appendAll(flags.userArgs);
}

}  // namespace

DeepSpeedRunnerError::DeepSpeedRunnerError(std::string type, std::string deepspeedText, std::string where,
                                           std::string remedy)
    : ConfigError(
          fmt::format("{}: DeepSpeed's runner stops with {}: {}. {}", where, type, deepspeedText, remedy)),
      type_(std::move(type)),
      text_(std::move(deepspeedText)),
      where_(std::move(where)),
      remedy_(std::move(remedy)) {}

Hostfile parseHostfile(std::string_view bytes, const std::string& path) {
  checkUtf8(bytes, path, "hostfile");
  Hostfile hf;
  hf.path = path;
  int lineNo = 0;
  for (std::string_view raw : pyLines(bytes)) {
    ++lineNo;
    std::string_view line = pyStrip(raw);
    if (line.empty() || line.front() == '#') continue;
    // re.search(r'^(\S+)\s+slots=(\d+)', line): the first word, whitespace, "slots=", ASCII digits.
    std::size_t hostEnd = 0;
    while (hostEnd < line.size()) {
      char32_t c;
      std::size_t n = codePoint(line, hostEnd, c);
      if (pySpace(c)) break;
      hostEnd += n;
    }
    std::size_t ws = spaceRun(line, hostEnd);
    std::size_t at = hostEnd + ws;
    std::size_t digits = 0;
    bool match = ws > 0 && line.substr(at, 6) == "slots=";
    if (match) {
      while (at + 6 + digits < line.size() && line[at + 6 + digits] >= '0' && line[at + 6 + digits] <= '9')
        ++digits;
      match = digits > 0;
    }
    const std::string where = fmt::format("{}:{}", path, lineNo);
    if (!match) {
      raise("ValueError",
            fmt::format("Hostfile contains a bad entry: {}, unable to proceed with launching", line), where,
            "Write each node as `HOST slots=N` (whitespace before slots=, N a whole number), or start the "
            "line with "
            "# to make it a comment.");
    }
    std::string host(line.substr(0, hostEnd));
    std::string_view num = line.substr(at + 6, digits);
    while (num.size() > 1 && num.front() == '0') num.remove_prefix(1);
    long long slots = 0;
    if (num.size() > 7 || (slots = std::stoll(std::string(num))) > kRunnerSlotLimit) {
      throw ConfigError(
          fmt::format("{}: {} has slots={}, more than dsperf checks ({}); DeepSpeed would build a "
                      "list of that many slot ids. Give the number of GPUs on the node.",
                      where, host, num, kRunnerSlotLimit));
    }
    for (const auto& e : hf.hosts) {
      if (e.host == host) {
        raise(
            "ValueError",
            fmt::format("Hostfile contains multiple entries for {}, unable to proceed with launching", host),
            where,
            fmt::format("{} is already on line {}: list each node once, with all its slots on one line.",
                        host, e.line));
      }
    }
    hf.hosts.push_back({host, slots, lineNo});
  }
  if (hf.hosts.empty()) {
    raise("ValueError", "Hostfile is empty or not formatted correctly, unable to proceed with launching.",
          path,
          "Add one `HOST slots=N` line per node, or remove the file (without one, DeepSpeed runs on this "
          "machine "
          "only).");
  }
  return hf;
}

std::optional<Hostfile> fetchHostfile(const std::string& path) {
  if (!isRegularFile(path)) return std::nullopt;
  return parseHostfile(readForPython(path, "hostfile"), path);
}

ActiveResources parseInclusionExclusion(const std::vector<std::pair<std::string, long long>>& pool,
                                        std::string_view include, std::string_view exclude) {
  ActiveResources active;
  for (const auto& [host, slots] : pool) {
    std::vector<long long> ids;
    for (long long s = 0; s < slots; ++s) ids.push_back(s);
    active.emplace_back(host, std::move(ids));
  }
  return parseResourceFilter(active, include, exclude);
}

ActiveResources applyNumNodesAndGpus(ActiveResources active, long long numNodes, long long numGpus) {
  if (numNodes > 0 && static_cast<long long>(active.size()) > numNodes)
    active.resize(static_cast<std::size_t>(numNodes));
  if (numGpus > 0) {
    std::vector<long long> ids;
    for (long long s = 0; s < std::min(numGpus, kRunnerSlotLimit); ++s) ids.push_back(s);
    for (auto& [_, slots] : active) slots = ids;
  }
  return active;
}

std::string_view runnerBackendProgram(std::string_view launcher) {
  if (launcher == "pdsh") return "pdsh";
  if (launcher == "openmpi") return "ompi_info";
  if (launcher == "mpich" || launcher == "impi") return "mpirun";
  if (launcher == "slurm") return "sinfo";
  if (launcher == "mvapich") return "mpiname";
  return "";
}

std::string runnerMasterPlaceholder(const std::string& host) {
  return fmt::format("<{}'s first `hostname -I` address>", host);
}

std::vector<std::string> pythonShlexSplit(std::string_view text, const std::string& where) {
  std::vector<std::string> out;
  std::string token;
  bool have = false;  // a token is open (quotes make an empty one)
  auto isSpace = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  auto fail = [&](const char* what) {
    raise("ValueError", what, where,
          fmt::format("DeepSpeed splits {} as a shell would (shlex.split) and stops at {}: close the quote or "
                      "escape, e.g. --launcher_args \"--mca btl_tcp_if_include eth1\".",
                      where, pythonRepr(text)));
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (isSpace(ch)) {
      if (have) out.push_back(std::move(token));
      token.clear();
      have = false;
    } else if (ch == '\\') {
      if (++i >= text.size()) fail("No escaped character");
      token += text[i];
      have = true;
    } else if (ch == '\'') {
      std::size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos) fail("No closing quotation");
      token += text.substr(i + 1, end - i - 1);
      i = end;
      have = true;
    } else if (ch == '"') {
      have = true;
      for (++i;; ++i) {
        if (i >= text.size()) fail("No closing quotation");
        if (text[i] == '"') break;
        if (text[i] == '\\') {
          if (i + 1 >= text.size()) fail("No escaped character");
          if (text[i + 1] == '"' || text[i + 1] == '\\') ++i;
        }
        token += text[i];
      }
    } else {
      token += ch;
      have = true;
    }
  }
  if (have) out.push_back(std::move(token));
  return out;
}

std::string encodeWorldInfo(const ActiveResources& active) {
  std::vector<std::string> parts;
  for (const auto& [host, slots] : active)
    parts.push_back(fmt::format("{}: [{}]", pyJsonString(host), fmt::join(slots, ", ")));
  return base64Url(fmt::format("{{{}}}", fmt::join(parts, ", ")));
}

std::vector<std::string> runnerExportPrefixes(std::string_view accelerator) {
  std::vector<std::string> out{"MLFLOW", "PYTHON", "MV2", "UCX"};
  static const std::map<std::string_view, std::vector<std::string>> kAccel = {
      {"cuda", {"NCCL"}},
      {"npu", {"ASCEND", "HCCL", "LD_LIBRARY", "PATH"}},
      {"mlu", {"NEUWARE_HOME", "CNCL", "LD_LIBRARY", "PATH"}},
      {"sdaa", {"NCCL", "LD_LIBRARY", "PATH"}},
      {"supa", {"BCCL", "BIREN", "SUPA", "LD_LIBRARY", "PATH"}},
      {"klxpu", {"BKCL", "XPU", "XMLIR", "LD_LIBRARY", "PATH"}},
  };
  if (auto it = kAccel.find(accelerator); it != kAccel.end())
    out.insert(out.end(), it->second.begin(), it->second.end());
  return out;
}

std::vector<EnvFileCandidate> deepspeedEnvFiles(const RunnerContext& ctx) {
  std::string name = ".deepspeed_env";
  if (ctx.env != nullptr) {
    if (auto v = ctx.env->get("DS_ENV_FILE")) name = *v;
  }
  // os.path.join: an absolute second part replaces the first; "" joins to the name alone.
  auto join = [](const std::string& a, const std::string& b) {
    if (!b.empty() && b.front() == '/') return b;
    if (a.empty()) return b;
    return a.back() == '/' ? a + b : a + "/" + b;
  };
  auto resolve = [&](const std::string& p) { return p.empty() || p.front() == '/' ? p : join(ctx.cwd, p); };
  std::vector<EnvFileCandidate> out;
  for (const std::string& dir : {ctx.home, std::string(".")}) {
    std::string p = join(dir, name);
    out.push_back({p, resolve(p)});
  }
  return out;
}

RunnerPlan planRunner(const RunnerFlags& flags, const RunnerContext& ctx) {
  RunnerPlan plan;
  plan.include = flags.include;
  plan.exclude = flags.exclude;
  plan.masterPort = flags.masterPort;
  plan.masterAddr = flags.masterAddr;
  plan.hostfile = fetchHostfile(flags.hostfile);
  if (!plan.hostfile) {
    plan.notes.push_back(
        fmt::format("No hostfile at {}: DeepSpeed warns \"Unable to find hostfile, will proceed "
                    "with training with local resources only.\"",
                    flags.hostfile));
  }
  // main(): respect CUDA_VISIBLE_DEVICES for a single node and no explicit resource filters.
  std::string visible;
  if (ctx.env != nullptr) visible = ctx.env->get("CUDA_VISIBLE_DEVICES").value_or("");
  if (!plan.hostfile && !visible.empty()) {
    if (!plan.include.empty() || !plan.exclude.empty() || flags.numNodes > 1 || flags.numGpus > 0) {
      plan.notes.push_back(
          fmt::format("DeepSpeed ignores CUDA_VISIBLE_DEVICES={} because "
                      "--include/--exclude/--num_gpus/--num_nodes was given",
                      visible));
    } else {
      plan.include = "localhost:" + visible;
      plan.notes.push_back(
          fmt::format("Detected VISIBLE_DEVICES={}: DeepSpeed sets --include={}", visible, plan.include));
    }
  }
  if ((flags.numNodes >= 0 || flags.numGpus >= 0) && (!plan.include.empty() || !plan.exclude.empty())) {
    bool fromVisible = flags.include.empty() && !plan.include.empty();
    raise("ValueError", "Cannot specify num_nodes/gpus with include/exclude", "--num_nodes/--num_gpus",
          fromVisible
              ? fmt::format("DeepSpeed turned CUDA_VISIBLE_DEVICES={} into --include={} (there is no "
                            "hostfile); unset CUDA_VISIBLE_DEVICES, or drop --num_nodes/--num_gpus (0 counts "
                            "as given; only -1 is the default).",
                            visible, plan.include)
              : "Use --num_nodes/--num_gpus or --include/--exclude, not both (0 counts as given; only -1, "
                "the default, does not).");
  }
  std::vector<std::pair<std::string, long long>> pool;
  bool multi = true;
  if (plan.hostfile) {
    for (const auto& e : plan.hostfile->hosts) pool.emplace_back(e.host, e.slots);
  } else {
    if (ctx.localDeviceCount <= 0) {
      raise("RuntimeError", "Unable to proceed, no GPU resources available", flags.hostfile,
            fmt::format("Without a hostfile DeepSpeed runs on this machine's {} devices and finds none: pass "
                        "--hostfile, or run where {} devices are visible.",
                        ctx.accelerator, ctx.accelerator));
    }
    pool.emplace_back("localhost", ctx.localDeviceCount);
    plan.masterAddr = "127.0.0.1";
    multi = false;
  }
  if (!multi && flags.numNodes > 1) {
    raise("ValueError", "Num nodes is >1 but no extra nodes available via hostfile", "--num_nodes",
          fmt::format("--num_nodes {} needs a hostfile that lists the nodes; there is none at {}.",
                      flags.numNodes, flags.hostfile));
  }
  plan.active = parseInclusionExclusion(pool, plan.include, plan.exclude);
  // The ssh check (skipped with --no_ssh) and `ssh HOST hostname -I` (without --master_addr) take the
  // first host.
  if (multi && plan.active.empty() && (!flags.noSsh || plan.masterAddr.empty())) {
    raise("IndexError", "list index out of range", plan.include.empty() ? "--exclude" : "--include",
          "The filter leaves no slot on any host, so there is no first host to ssh to: keep at least one.");
  }
  if (multi && plan.masterAddr.empty()) plan.masterFromHost = plan.active.front().first;
  plan.active = applyNumNodesAndGpus(std::move(plan.active), flags.numNodes, flags.numGpus);
  const std::string launcher = lowerAscii(flags.launcher);
  if (launcher == "slurm") validateSlurmResources(plan.active);
  if (flags.noSsh && (flags.nodeRank < 0 || flags.nodeRank >= static_cast<int>(plan.active.size()))) {
    raise("AssertionError", "Launching training without ssh, but --node_rank is not set correctly.",
          "--node_rank",
          fmt::format("With --no_ssh every host runs `deepspeed` itself with its own --node_rank, 0 to {} "
                      "(the hosts in the hostfile's order{}).",
                      static_cast<long long>(plan.active.size()) - 1,
                      plan.active.empty() ? "; none is left" : ""));
  }
  plan.multiNode = (flags.forceMulti || plan.active.size() > 1) && !flags.noSsh;
  if (flags.noSsh) {
    plan.notes.push_back(fmt::format(
        "--no_ssh: DeepSpeed starts node {}'s ranks ({}) here with launch.py; every other host must run the "
        "same command with its own --node_rank",
        flags.nodeRank, plan.active[static_cast<std::size_t>(flags.nodeRank)].first));
  } else if (multi && !plan.multiNode) {
    plan.notes.push_back(
        fmt::format("Only {} is left, so DeepSpeed starts its ranks here, with launch.py, not "
                    "over ssh on that host",
                    plan.active.front().first));
  }
  // launch.py: global ranks in host order; LOCAL_RANK = rank % (ranks on the host).
  int rank = 0;
  for (std::size_t n = 0; n < plan.active.size(); ++n) {
    const auto& [host, slots] = plan.active[n];
    for (std::size_t i = 0; i < slots.size(); ++i) {
      RunnerRank r;
      r.rank = rank++;
      r.localRank = r.rank % static_cast<int>(slots.size());
      r.indexOnHost = static_cast<int>(i);
      r.nodeRank = static_cast<int>(n);
      r.host = host;
      r.slot = slots[i];
      plan.ranks.push_back(r);
    }
  }
  plan.worldSize = rank;
  // main() deletes the visible-devices variable wherever it looked at it.
  if (!plan.hostfile && !visible.empty()) plan.commandEnvUnset.push_back("CUDA_VISIBLE_DEVICES");
  const std::string master =
      plan.masterFromHost.empty() ? plan.masterAddr : runnerMasterPlaceholder(plan.masterFromHost);
  if (!plan.multiNode) {
    plan.command = {ctx.python,
                    "-u",
                    "-m",
                    "deepspeed.launcher.launch",
                    "--world_info=" + encodeWorldInfo(plan.active),
                    "--master_addr=" + master,
                    fmt::format("--master_port={}", flags.masterPort)};
    if (flags.noSsh) plan.command.push_back(fmt::format("--node_rank={}", flags.nodeRank));
    if (flags.noPython) plan.command.push_back("--no_python");
    if (flags.module) plan.command.push_back("--module");
    plan.command.push_back("--enable_each_rank_log=None");  // the flag's default is the string "None"
    plan.command.push_back("--log_level=info");
    plan.command.push_back(flags.userScript);
    plan.command.insert(plan.command.end(), flags.userArgs.begin(), flags.userArgs.end());
    return plan;
  }
  // The multi-node launcher: its constructor (validate_args, its own exports), backend_exists(), then
  // the exported prefixes from the environment (PYTHONPATH with the cwd prepended) and every
  // `.deepspeed_env` found, later lines and files overriding earlier ones; then get_cmd.
  plan.launcher = launcher;
  plan.backendProgram = std::string(runnerBackendProgram(launcher));
  if (plan.backendProgram.empty()) {
    raise("NotImplementedError", "Unknown launcher " + launcher, "--launcher",
          fmt::format("--launcher takes {}; DeepSpeed only looks at it once it launches on several hosts.",
                      fmt::join(kRunnerLaunchers, ", ")));
  }
  if (launcher != "pdsh" && launcher != "slurm") {
    if (!plan.include.empty() || !plan.exclude.empty()) {
      bool fromVisible = flags.include.empty() && flags.exclude.empty();
      raise("ValueError", launcher + " backend does not support worker include/exclusion", "--launcher",
            fromVisible ? fmt::format("DeepSpeed turned CUDA_VISIBLE_DEVICES={} into --include={}: unset "
                                      "CUDA_VISIBLE_DEVICES, or use --launcher pdsh.",
                                      visible, plan.include)
                        : fmt::format("--launcher {} runs the hostfile's every host and slot: edit the hostfile "
                                      "instead of --include/--exclude, or use --launcher pdsh or slurm.",
                                      launcher));
    }
    if (flags.numNodes != -1 || flags.numGpus != -1) {
      raise("ValueError", launcher + " backend does not support limiting num nodes/gpus", "--launcher",
            fmt::format("--launcher {} runs the hostfile's every host and slot: drop --num_nodes/--num_gpus "
                        "(0 counts as given) and edit the hostfile, or use --launcher pdsh or slurm.",
                        launcher));
    }
  }
  const std::string own = fmt::format("DeepSpeed's {} launcher", launcher);
  if (launcher == "openmpi") addExport(plan.exports, "UCX_TLS", "tcp", own);
  if (launcher == "mvapich") {
    addExport(plan.exports, "MV2_SMP_USE_CMA", "0", own);
    addExport(plan.exports, "MV2_DEBUG_SHOW_BACKTRACE", "1", own);
    if (ctx.accelerator == "cuda") addExport(plan.exports, "MV2_USE_CUDA", "1", own);
    addExport(plan.exports, "MV2_SUPPORT_DL", "1", own);
    addExport(plan.exports, "MV2_ENABLE_AFFINITY", "0", own);
    addExport(plan.exports, "MV2_INTER_ALLGATHER_TUNING", "5", own);
    addExport(plan.exports, "MV2_CUDA_USE_NAIVE", "0", own);
  }
  if (ctx.backendExists && !ctx.backendExists(launcher)) {
    raise("RuntimeError", fmt::format("launcher '{}' not installed.", launcher), "--launcher",
          launcher == "mvapich"
              ? std::string("DeepSpeed's mvapich launcher needs `mpiname` on PATH printing MVAPICH2-GDR: install "
                            "MVAPICH2-GDR, or pick another --launcher.")
              : fmt::format("DeepSpeed looks for `{}` on PATH: install the {} launcher on this machine, or pick "
                            "another --launcher.",
                            plan.backendProgram, launcher));
  }
  plan.prefixes = runnerExportPrefixes(ctx.accelerator);
  const bool aisc = ctx.env != nullptr && ctx.env->get("AISC_JOB_NAME").has_value();
  std::vector<std::string> names = ctx.names;
  if (std::find(names.begin(), names.end(), "PYTHONPATH") == names.end()) names.push_back("PYTHONPATH");
  std::vector<std::string> seen;
  for (const auto& name : names) {
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    seen.push_back(name);
    if (name == "CUDA_VISIBLE_DEVICES" && !plan.hostfile && !visible.empty()) continue;  // deleted above
    std::optional<std::string> value = ctx.env != nullptr ? ctx.env->get(name) : std::nullopt;
    std::string source;
    if (name == "PYTHONPATH") {
      value = value ? ctx.cwd + ":" + *value : ctx.cwd;
      source = "PYTHONPATH: the runner prepends its working directory";
      plan.commandEnv.emplace_back("PYTHONPATH", *value);
    }
    if (!value) continue;
    auto prefix = std::find_if(plan.prefixes.begin(), plan.prefixes.end(),
                               [&](const auto& p) { return name.rfind(p, 0) == 0; });
    if (prefix == plan.prefixes.end()) continue;
    if (aisc && (name == "NCCL_IB_HCA" || name == "UCX_NET_DEVICES")) continue;
    addExport(plan.exports, name, *value,
              source.empty() ? fmt::format("the environment (prefix {})", *prefix) : source);
  }
  for (const auto& f : deepspeedEnvFiles(ctx)) {
    if (!ctx.readEnvFiles || !isRegularFile(f.resolved)) continue;
    plan.envFiles.push_back(f.path);
    readEnvFile(f, plan);
  }
  buildLauncherCommand(launcher, flags, ctx, pool, plan);
  return plan;
}

}  // namespace ds::env
