#include "diag/hang/evidence_reader.h"

#include <fmt/format.h>
#include <glob.h>
#include <re2/re2.h>
#include <sys/stat.h>

#include <algorithm>
#include <initializer_list>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>

#include "engine/common/error.h"
#include "engine/host/resources.h"
#include "reports/diag/diag_schema.h"
#include "reports/diag/fleet_json.h"
#include "reports/diag/fleet_schema.h"
#include "reports/json_io.h"
#include "reports/schema/schema_version.h"

namespace ds::diag::hang {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kSourceTextChars = 300;
// Past this many problem sentences about the lines of one file, the rest are counted in one more.
constexpr int kMaxLineProblemsPerFile = 20;

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string_view trimView(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The line as a source shows it: trimmed, at most ~300 bytes, never cut inside a UTF-8 sequence.
std::string sourceText(std::string_view line) {
  line = trimView(line);
  if (line.size() <= kSourceTextChars) return std::string(line);
  std::size_t n = kSourceTextChars;
  while (n > 0 && (static_cast<unsigned char>(line[n]) & 0xC0) == 0x80) --n;
  return std::string(line.substr(0, n)) + "...";
}

std::string where(const Source& s) { return s.line > 0 ? fmt::format("{}:{}", s.file, s.line) : s.file; }

std::optional<int64_t> toInt64(std::string_view s) {
  int64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int> toInt(std::string_view s) {
  auto v = toInt64(s);
  if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) return std::nullopt;
  return static_cast<int>(*v);
}

std::unique_ptr<const RE2> compile(const char* pattern, bool capture = true) {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_never_capture(!capture);
  auto re = std::make_unique<const RE2>(pattern, o);
  DS_CHECK(re->ok(), "evidence pattern '{}' does not compile: {}", pattern, re->error());
  return re;
}

re2::StringPiece piece(std::string_view s) { return re2::StringPiece(s.data(), s.size()); }

bool isIpAddress(const std::string& h) {
  if (h.empty()) return false;
  if (h.find(':') != std::string::npos) return true;  // IPv6
  return std::all_of(h.begin(), h.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string shortName(const std::string& h) { return lower(h.substr(0, h.find('.'))); }

// "10.0.0.17<46329>" -> "10.0.0.17"; "gpu-1.cluster<45074>" -> "gpu-1.cluster"; trailing punctuation dropped.
std::string peerAddress(std::string s) {
  while (!s.empty() && (s.back() == ',' || s.back() == '.' || s.back() == ':' || s.back() == ';'))
    s.pop_back();
  auto lt = s.find('<');
  if (lt != std::string::npos && !s.empty() && s.back() == '>') s.erase(lt);
  return s;
}

// Problem sentences about the lines of one file, capped.
class FileProblems {
 public:
  FileProblems(std::vector<std::string>& problems, std::string file)
      : problems_(problems), file_(std::move(file)) {}
  FileProblems(const FileProblems&) = delete;
  FileProblems& operator=(const FileProblems&) = delete;
  ~FileProblems() {
    if (dropped_ > 0)
      problems_.push_back(fmt::format("{}: {} more lines like the above did not parse either (not listed).",
                                      file_, dropped_));
  }
  // lineNo 0: about the file as a whole (a JSON document).
  void line(int lineNo, const std::string& what) {
    if (count_++ < kMaxLineProblemsPerFile) {
      problems_.push_back(lineNo > 0 ? fmt::format("{}:{}: {}", file_, lineNo, what)
                                     : fmt::format("{}: {}", file_, what));
    } else {
      ++dropped_;
    }
  }

 private:
  std::vector<std::string>& problems_;
  std::string file_;
  int count_ = 0;
  int dropped_ = 0;
};

// addRankHost with one problem sentence per (rank, conflicting host) in a reading pass.
class HostJoiner {
 public:
  explicit HostJoiner(ExternalEvidence& out) : out_(out) {}
  void add(int rank, const std::string& host, const Source& source) {
    if (rank < 0 || host.empty()) return;
    auto it = out_.rankHost.find(rank);
    if (it != out_.rankHost.end()) {
      if (it->second == host || !seen_.insert({rank, host}).second) return;
    }
    addRankHost(out_, rank, host, source);
  }

 private:
  ExternalEvidence& out_;
  std::set<std::pair<int, std::string>> seen_;
};

// ---------------------------------------------------------------------------------------------
// Files

// A regular file's size, or a problem sentence. Throws ConfigError when the path does not exist.
std::optional<uint64_t> regularFileSize(const std::string& path, const char* what,
                                        std::vector<std::string>& problems) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR)
      throw ConfigError(
          fmt::format("The {} '{}' does not exist; give the path of a file that does.", what, path));
    problems.push_back(
        fmt::format("{}: cannot read this {} ({}); it was skipped.", path, what, errnoText(err)));
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    problems.push_back(fmt::format(
        "{}: not a regular file (a directory, FIFO or device), so it is not read as a {}.", path, what));
    return std::nullopt;
  }
  return static_cast<uint64_t>(st.st_size);
}

// The whole text of a file read whole (RAS, fleet JSON), refused with a sentence when larger than half
// the memory this process may still take (parsing JSON needs several times the text).
std::optional<std::string> readWhole(const std::string& path, const char* what,
                                     std::vector<std::string>& problems) {
  auto size = regularFileSize(path, what, problems);
  if (!size) return std::nullopt;
  const long long avail = sys::readMemoryInfo().available();
  if (avail > 0 && *size > static_cast<uint64_t>(avail / 2)) {
    problems.push_back(
        fmt::format("{}: {} is {}, more than half the memory available here ({}), so it was not read; a {} "
                    "is a few MiB at "
                    "most, so this is probably not one.",
                    path, what, sys::bytesText(static_cast<double>(*size)),
                    sys::bytesText(static_cast<double>(avail)), what));
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problems.push_back(
        fmt::format("{}: cannot open this {} ({}); it was skipped.", path, what, errnoText(errno)));
    return std::nullopt;
  }
  std::string text;
  text.resize(*size);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) {
    problems.push_back(fmt::format("{}: reading this {} failed part-way; it was skipped.", path, what));
    return std::nullopt;
  }
  return text;
}

// An istream over text already in memory, without the copy std::istringstream makes.
class TextStreamBuf : public std::streambuf {
 public:
  explicit TextStreamBuf(const std::string& text) {
    char* p = const_cast<char*>(text.data());  // read-only use: only the get area is set
    setg(p, p, p + text.size());
  }
};

// Natural order: "rank_2.log" before "rank_10.log".
bool naturalLess(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t i2 = i, j2 = j;
      while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
      while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
      std::string_view da(a.data() + i, i2 - i), db(b.data() + j, j2 - j);
      while (da.size() > 1 && da.front() == '0') da.remove_prefix(1);
      while (db.size() > 1 && db.front() == '0') db.remove_prefix(1);
      if (da.size() != db.size()) return da.size() < db.size();
      if (da != db) return da < db;
      i = i2;
      j = j2;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

void addDirectory(const std::string& dir, std::vector<std::string>& files,
                  std::vector<std::string>& problems) {
  std::vector<std::string> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    problems.push_back(
        fmt::format("{}: cannot list this log directory ({}); it was skipped.", dir, ec.message()));
    return;
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      problems.push_back(fmt::format("{}: listing stopped part-way ({}); the files listed so far are read.",
                                     dir, ec.message()));
      break;
    }
    std::error_code fec;
    if (it->is_regular_file(fec)) found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end(), naturalLess);
  files.insert(files.end(), found.begin(), found.end());
}

std::vector<std::string> expandLogPaths(const std::vector<std::string>& paths,
                                        std::vector<std::string>& problems) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        addDirectory(p, files, problems);
      } else {
        files.push_back(p);
      }
      continue;
    }
    const int err = errno;
    if (p.find_first_of("*?[") != std::string::npos) {
      glob_t g{};
      // glob(3) is not thread-safe (locale, environment): readers run on the caller's one thread.
      const int rc = ::glob(p.c_str(), 0, nullptr, &g);  // NOLINT(concurrency-mt-unsafe)
      if (rc == GLOB_NOMATCH) {
        globfree(&g);
        throw ConfigError(
            fmt::format("The log pattern '{}' matches no file; give files, directories or a glob "
                        "that matches the ranks' logs.",
                        p));
      }
      if (rc != 0) {
        globfree(&g);
        problems.push_back(
            fmt::format("{}: the pattern could not be expanded (glob error {}); it was skipped.", p, rc));
        continue;
      }
      std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + g.gl_pathc);
      globfree(&g);
      std::sort(matched.begin(), matched.end(), naturalLess);
      for (const auto& m : matched) {
        struct stat mst {};
        if (::stat(m.c_str(), &mst) == 0 && S_ISDIR(mst.st_mode)) {
          addDirectory(m, files, problems);
        } else {
          files.push_back(m);
        }
      }
      continue;
    }
    if (err == ENOENT || err == ENOTDIR)
      throw ConfigError(
          fmt::format("The log path '{}' does not exist; give files, directories or a glob of the "
                      "ranks' logs.",
                      p));
    problems.push_back(fmt::format("{}: cannot read this log path ({}); it was skipped.", p, errnoText(err)));
  }
  return files;
}

// Lines of a stream, without building one longer than kMaxLogLineBytes: an overlong line is skipped to
// its newline, whatever its length.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in), buf_(1 << 16) {}

  bool next(std::string& line) {
    line.clear();
    bool overlong = false;
    bool any = false;
    for (;;) {
      if (pos_ == end_) {
        if (eof_) break;
        in_.read(buf_.data(), static_cast<std::streamsize>(buf_.size()));
        end_ = static_cast<std::size_t>(in_.gcount());
        pos_ = 0;
        if (end_ == 0) {
          eof_ = true;
          break;
        }
      }
      any = true;
      const char* start = buf_.data() + pos_;
      const char* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
      const std::size_t n = nl ? static_cast<std::size_t>(nl - start) : end_ - pos_;
      if (!overlong) {
        if (line.size() + n > kMaxLogLineBytes) {
          overlong = true;
          line.clear();
        } else {
          line.append(start, n);
        }
      }
      pos_ += n;
      if (nl) {
        ++pos_;
        ++lineNo_;
        if (overlong) {
          ++skipped_;
          overlong = false;
          any = false;
          continue;
        }
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
    }
    if (!any) return false;
    ++lineNo_;  // a last line without a newline
    if (overlong) {
      ++skipped_;
      return false;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }
  int lineNo() const { return lineNo_; }
  long long skipped() const { return skipped_; }
  bool failed() const { return in_.bad(); }

 private:
  std::istream& in_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  int lineNo_ = 0;
  long long skipped_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Log lines

struct LogPatterns {
  // Any line worth a closer look (no captures: one DFA pass over every line of a large log).
  std::unique_ptr<const RE2> trigger = compile(
      R"(Watchdog caught|detected by watchdog|Timeout at \w+ work|dump signal|global timeout from another rank|)"
      R"(NCCL (?:WARN|INFO|TRACE)|Got completion from peer|Got async|Connection closed by remote peer|)"
      R"(Call to recv from|Proxy Service|ncclRemoteError|remote process exited|^\s*(?:\d+:\s*)?host\s+:\s|)"
      R"(Connection closed by peer|Timed out waiting \d+ms for|)"
      R"(\(local_rank: ?\d+\)|^[A-Za-z0-9][\w.-]*: \[\w+?\d+\]:)",
      false);

  // Leading prefixes, consumed in a loop (anchored).
  std::unique_ptr<const RE2> rayPrefix = compile(R"(\(\w+ pid=\d+(?:, ip=([0-9A-Fa-f.:]+))?\)\s*)");
  std::unique_ptr<const RE2> mpiLabel = compile(R"(\[\d+,(\d+)\]<std(?:out|err)>:\s?)");
  std::unique_ptr<const RE2> srunLabel = compile(R"(\s*(\d+): )");
  std::unique_ptr<const RE2> roleLabel = compile(R"(\[([A-Za-z_][\w-]*?)(\d+)\]:)");
  std::unique_ptr<const RE2> pdshHost = compile(R"(([A-Za-z0-9][\w.-]*): (?:\[\w+?\d+\]:))");
  // c10's "[rank3]:" anywhere (a progress bar without a newline may come first).
  std::unique_ptr<const RE2> c10Rank = compile(R"(\[rank(\d+)\]:)");

  // Group prefixes in the message.
  std::unique_ptr<const RE2> pgId =
      compile(R"(\[PG ID (\d+) PG GUID ([^\s()\]]+)(?:\(([^)]*)\))? Rank (\d+)\])");
  std::unique_ptr<const RE2> pgGuid = compile(R"(\[PG GUID ([^\s()\]]+)(?:\(([^)]*)\))? Rank (\d+)\])");
  std::unique_ptr<const RE2> pgOld = compile(R"(\[PG ([^\s()\]]+)(?: \(([^)]*)\))? Rank (\d+)\])");
  std::unique_ptr<const RE2> rankOnly = compile(R"(\[Rank (\d+)\])");
  std::unique_ptr<const RE2> tcRank = compile(R"(\[TC\]\[rank=(\d+)\])");

  std::unique_ptr<const RE2> ncclHeader =
      compile(R"(([A-Za-z0-9][\w.-]*):(\d+):(\d+) \[(\d+)\](?: [^ ]+){0,2} NCCL (WARN|INFO|TRACE))");

  std::unique_ptr<const RE2> ranFor = compile(R"((\d+) milliseconds)");
  // A Python traceback's frame and its exception line.
  std::unique_ptr<const RE2> pyFrame = compile(R"re(^\s*File "([^"]*)", line (\d+), in (.*?)\s*$)re");
  std::unique_ptr<const RE2> pyException = compile(R"(^([A-Za-z_][\w.]*)(?::\s?(.*))?$)");
  std::unique_ptr<const RE2> seqNum = compile(R"(SeqNum=(\d+))");
  std::unique_ptr<const RE2> opType = compile(R"(OpType=(\w+))");
  std::unique_ptr<const RE2> timeoutMs = compile(R"(Timeout\(ms\)=(\d+))");
  std::unique_ptr<const RE2> wdFailure = compile(
      R"(failure detected by watchdog at work sequence id: (\d+) PG status: last enqueued work: (-?\d+), )"
      R"(last completed work: (-?\d+))");
  std::unique_ptr<const RE2> wdException = compile(
      R"(Exception \(either an error or timeout\) detected by watchdog at work: (\d+), last enqueued \w+ work: )"
      R"((-?\d+), last completed \w+ work: (-?\d+))");
  std::unique_ptr<const RE2> wdTimeoutAt = compile(
      R"(Timeout at \w+ work: (\d+), last enqueued \w+ work: (-?\d+), last completed \w+ work: (-?\d+))");
  std::unique_ptr<const RE2> dumpSignal = compile(
      R"(Received a dump signal due to a collective timeout from\s+(?:this local rank|rank\s+(\d+)))");
  std::unique_ptr<const RE2> dumpLocal = compile(R"(Received a dump signal from this local rank)", false);
  std::unique_ptr<const RE2> dumpGlobal = compile(R"(Received a global timeout from another rank)", false);
  std::unique_ptr<const RE2> dumpCounts =
      compile(R"([Ll]ast enqueued \w+ work: (-?\d+), last completed \w+ work: (-?\d+))");

  std::unique_ptr<const RE2> ibCompletion =
      compile(R"(NET/IB\w*(?:/GIN)?\s*:\s*Got completion from peer (\S+) with (?:status=|error )([^\s,]+))");
  std::unique_ptr<const RE2> hca = compile(R"(\bhca (\S+))");
  std::unique_ptr<const RE2> ibAsync =
      compile(R"(NET/IB\w*\s*:\s*(?:(\S+?):\d+ )?Got async (?:error )?event\s*:)");
  std::unique_ptr<const RE2> sockClosed = compile(R"(Connection closed by remote peer (\S+))");
  std::unique_ptr<const RE2> sockRecv = compile(R"(Call to recv from (\S+) failed)");
  std::unique_ptr<const RE2> proxy =
      compile(R"(\[Proxy Service (\d+)\] Failed to execute operation (\S+) from rank (\d+), retcode (\d+))");
  // gloo's transport errors, as a rank's exception prints them: "[.../tcp/pair.cc:561] Connection closed by
  // peer [127.0.0.1]:13716", "[.../tcp/unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation".
  std::unique_ptr<const RE2> glooClosed = compile(R"(gloo/transport/\w+/pair\.cc:\d+\] Connection closed by peer (\S+))");
  std::unique_ptr<const RE2> glooTimeout =
      compile(R"(gloo/\S*\] Timed out waiting (\d+)ms for (send|recv) operation to complete)");
  std::unique_ptr<const RE2> remoteError =
      compile(R"(ncclRemoteError|remote process exited or there was a network error)", false);

  std::unique_ptr<const RE2> summaryHost = compile(R"(^\s*host\s+:\s*(\S+)\s*$)");
  std::unique_ptr<const RE2> summaryRank = compile(R"(^\s*rank\s+:\s*(\d+)\s*\(local_rank:\s*(\d+)\))");
};

const LogPatterns& logPatterns() {
  static const LogPatterns p;
  return p;
}

struct Prefixes {
  std::optional<int> c10Rank;
  std::optional<int> launcherRank;
  std::optional<int> localRank;
  std::string host;       // pdsh "host: " or Ray's "ip="
  std::string_view rest;  // the line after its leading prefixes
};

Prefixes parsePrefixes(std::string_view line) {
  const auto& pat = logPatterns();
  Prefixes out;
  re2::StringPiece in = piece(line);
  for (int i = 0; i < 6 && !in.empty(); ++i) {
    std::string a, b;
    // Each form starts with a character of its own; the regex runs only where one could match.
    const char c0 = in[0];
    const bool digitOrSpace = std::isdigit(static_cast<unsigned char>(c0)) || c0 == ' ';
    if (c0 == '(' && RE2::Consume(&in, *pat.rayPrefix, &a)) {
      if (!a.empty() && out.host.empty()) out.host = a;
    } else if ((c0 == '[' && RE2::Consume(&in, *pat.mpiLabel, &a)) ||
               (digitOrSpace && RE2::Consume(&in, *pat.srunLabel, &a))) {
      if (!out.launcherRank) out.launcherRank = toInt(a);
    } else if (re2::StringPiece probe = in;
               std::isalnum(static_cast<unsigned char>(c0)) &&
               std::string_view(in.data(), std::min<std::size_t>(in.size(), 256)).find(": [") !=
                   std::string_view::npos &&
               RE2::Consume(&probe, *pat.pdshHost, &a)) {
      // Consume the host only; the role/rank label that follows is read in the next round.
      in.remove_prefix(a.size() + 2);
      if (out.host.empty()) out.host = a;
    } else if (c0 == '[' && RE2::Consume(&in, *pat.roleLabel, &a, &b)) {
      // "[rank3]:" is c10's logging prefix (RANK: global); "[default3]:" is torchrun's role + LOCAL rank.
      if (a == "rank") {
        if (!out.c10Rank) out.c10Rank = toInt(b);
      } else if (!out.localRank) {
        out.localRank = toInt(b);
      }
    } else {
      break;
    }
  }
  out.rest = std::string_view(in.data(), in.size());
  if (!out.c10Rank && line.find("[rank") != std::string_view::npos) {
    std::string r;
    if (RE2::PartialMatch(piece(line), *pat.c10Rank, &r)) out.c10Rank = toInt(r);
  }
  return out;
}

struct GroupPrefix {
  bool found = false;      // a "[PG ...]" prefix
  bool isDefault = false;  // PG ID 0 / PG 0 / (default_pg)
  std::string pgId;
  std::optional<int> groupRank;
};

GroupPrefix parseGroupPrefix(std::string_view line) {
  const auto& pat = logPatterns();
  GroupPrefix g;
  std::string id, guid, desc, rank;
  re2::StringPiece s = piece(line);
  const bool pg = line.find("[PG ") != std::string_view::npos;
  if (pg && (RE2::PartialMatch(s, *pat.pgId, &id, &guid, &desc, &rank) ||
             RE2::PartialMatch(s, *pat.pgGuid, &guid, &desc, &rank) ||
             RE2::PartialMatch(s, *pat.pgOld, &id, &desc, &rank))) {
    g.found = true;
    g.pgId = id;  // "" for the GUID-only form
  } else if ((line.find("[Rank ") != std::string_view::npos && RE2::PartialMatch(s, *pat.rankOnly, &rank)) ||
             (line.find("[TC]") != std::string_view::npos && RE2::PartialMatch(s, *pat.tcRank, &rank))) {
    g.groupRank = toInt(rank);
    return g;
  } else {
    return g;
  }
  g.groupRank = toInt(rank);
  g.isDefault = g.pgId == "0" || desc == "default_pg";
  return g;
}

struct LogReaderState {
  const std::string& file;
  std::optional<int> fileRank;
  ExternalEvidence& out;
  HostJoiner& hosts;
  FileProblems& problems;
  std::map<std::string, std::size_t> seen;  // fact key -> index in out.logs
  std::set<int> tied;                       // ranks whose host an NCCL INFO line of this file gave
  // A file named after a host ("node01.log", srun --output=%N) holds several ranks: NCCL's "[dev]" shows
  // more than one GPU, and the number in its name is then no rank (facts and ties already made from it
  // are taken back).
  std::string firstDev;
  std::size_t firstFact = 0;
  std::vector<int> fileNameTies;
  // torchrun's error summary: the "host :" line waiting for its "rank :" line.
  std::string summaryHost;
  int summaryHostLine = 0;
  // Python tracebacks (and C++ terminations) being read, per rank of their lines (-1: rank unknown),
  // so that the lines of several ranks may interleave in one console log.
  struct OpenTraceback {
    int line = 0;      // its first line
    bool cxx = false;  // "terminate called after throwing an instance of 'X'": its "what():" line follows
    std::string rankFrom;
    std::size_t indent = 0;  // where "Traceback" stood after the line's prefixes ("[rank3]: " adds one space)
    std::string exception;
    std::string frame;
  };
  std::map<int, OpenTraceback> tracebacks;
};


struct LineRank {
  std::optional<int> rank;
  std::string from;
  bool global = false;  // may tie a rank to a host
};

// The "[dev]" of an NCCL header that ends where " NCCL " starts (at `q`), without a regex.
std::string_view ncclDevice(std::string_view line, std::size_t q) {
  if (q == 0 || line[q - 1] != ']') return {};
  const auto open = line.rfind('[', q - 1);
  if (open == std::string_view::npos) return {};
  return line.substr(open + 1, q - 1 - open - 1);
}

LineRank resolveRank(const Prefixes& pre, const GroupPrefix& g, const std::optional<int>& fileRank) {
  if (pre.c10Rank) return {pre.c10Rank, "log_prefix", true};
  if (g.found && g.isDefault && g.groupRank) return {g.groupRank, "default_group", true};
  if (pre.launcherRank) return {pre.launcherRank, "launcher_label", true};
  if (fileRank) return {fileRank, "file_name", true};
  if (!g.found && g.groupRank) return {g.groupRank, "group_rank", false};
  if (pre.localRank) return {pre.localRank, "local_rank", false};
  return {};
}

std::string factKey(const LogFact& f) {
  auto o = [](const auto& v) { return v ? std::to_string(*v) : std::string("-"); };
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}", static_cast<int>(f.kind), o(f.rank), o(f.seq), o(f.fromRank),
                                f.peerAddr, f.hca, o(f.peerRank));
  // Each exception is its own fact (a chained traceback has several); one printed twice is one.
  if (f.kind == LogFact::Kind::kException) key += fmt::format("|{}|{}|{}", f.exception, f.message, f.frame);
  return key;
}

// Called with the GPU of each NCCL line of a file whose name gives its rank; see LogReaderState.
void noteDevice(LogReaderState& st, std::string_view dev) {
  if (!st.fileRank || dev.empty()) return;
  if (st.firstDev.empty()) {
    st.firstDev = std::string(dev);
    return;
  }
  if (dev == st.firstDev) return;
  st.out.problems.push_back(fmt::format(
      "{}: NCCL lines of GPUs {} and {} in one file, so it holds several ranks and the number in its name is "
      "not taken as their rank.",
      st.file, st.firstDev, dev));
  st.seen.clear();
  for (std::size_t i = st.firstFact; i < st.out.logs.size(); ++i) {
    LogFact& f = st.out.logs[i];
    if (f.rankFrom == "file_name") {
      f.rank.reset();
      f.rankFrom.clear();
    }
    st.seen.emplace(factKey(f), i);
  }
  for (int r : st.fileNameTies) {
    auto it = st.out.rankHostSource.find(r);
    if (it != st.out.rankHostSource.end() && it->second.file == st.file) {
      st.out.rankHostSource.erase(it);
      st.out.rankHost.erase(r);
    }
  }
  st.fileNameTies.clear();
  st.fileRank.reset();
}

template <class T>
void fillIfEmpty(T& into, const T& from) {
  if (!into) into = from;
}

void addFact(LogReaderState& st, LogFact f) {
  const std::string key = factKey(f);
  auto [it, inserted] = st.seen.emplace(key, st.out.logs.size());
  if (inserted) {
    st.out.logs.push_back(std::move(f));
    return;
  }
  // The same fact again (the exception text repeats the log line): keep the first, fill what it lacked.
  LogFact& first = st.out.logs[it->second];
  if (first.pgId.empty()) first.pgId = f.pgId;
  if (first.opType.empty()) first.opType = f.opType;
  if (first.host.empty()) first.host = f.host;
  fillIfEmpty(first.groupRank, f.groupRank);
  fillIfEmpty(first.lastEnqueued, f.lastEnqueued);
  fillIfEmpty(first.lastCompleted, f.lastCompleted);
  fillIfEmpty(first.timeoutMs, f.timeoutMs);
  fillIfEmpty(first.ranForMs, f.ranForMs);
}

// One number of a fact: a value that does not fit is a problem, never a wrapped number.
bool number(LogReaderState& st, int lineNo, const std::string& text, const char* what,
            std::optional<int64_t>& into) {
  into = toInt64(text);
  if (!into)
    st.problems.line(
        lineNo,
        fmt::format("the {} '{}' is not a number this reader can hold; the line was skipped.", what, text));
  return into.has_value();
}

// Whether an exception is one that a hang itself raises on the ranks that wait: a collective's or
// the store's timeout, a peer's closed connection, the watchdog's abort, the launcher's SIGTERM, gloo
// killing a rank whose peer sent another size. Such an error says the rank waited, not why.
bool isHangConsequence(std::string_view type, std::string_view message) {
  auto any = [](std::string_view text, std::initializer_list<std::string_view> parts) {
    return std::any_of(parts.begin(), parts.end(), [text](std::string_view p) { return text.find(p) != std::string_view::npos; });
  };
  // The launcher's signals, and the process group's and the store's own failures.
  if (any(type, {"SignalException", "KeyboardInterrupt", "DistNetworkError", "DistStoreError"})) return true;
  if (any(message, {"Watchdog caught", "closed by peer", "closed by remote peer", "reset by peer", "Broken pipe",
                    "was aborted", "remote process exited", "ncclRemoteError", "op.preamble.length <= op.nbytes",
                    "Connection refused", "got signal"})) {
    return true;
  }
  // A timeout is a consequence when it is one of communication: a data loader, a lock or a request of
  // the rank's own that timed out is the rank's own fault, and may be why its peers wait.
  const bool timeout = type.find("TimeoutError") != std::string_view::npos ||
                       any(message, {"timed out", "Timed out", "Timeout", "timeout"});
  if (!timeout || any(message, {"DataLoader", "dataloader", "data loader"})) return false;
  return any(message, {"Watchdog", "collective", "Work", "ProcessGroup", "NCCL", "nccl", "Gloo", "gloo", "store",
                       "Store", "socket", "Socket", "barrier", "rendezvous", "c10d", "send", "recv", "all_reduce",
                       "allreduce", "broadcast", "all_gather", "reduce_scatter", "connect", "peer"});
}

// One line of a Python traceback or a C++ termination, if one is being read for the line's rank or
// this line starts one. Returns true when the line is used up (a frame, source text); an exception's
// line is also read as any other line (it may be a watchdog's message).
// `prefixes` is the line's, parsed here when it is first needed and kept for the caller.
bool readTracebackLine(LogReaderState& st, std::string_view line, int lineNo, std::optional<Prefixes>& prefixes) {
  constexpr std::string_view kPython = "Traceback (most recent call last):";
  constexpr std::string_view kCxx = "terminate called after throwing an instance of '";
  const bool starts = line.find(kPython) != std::string_view::npos || line.find(kCxx) != std::string_view::npos;
  if (st.tracebacks.empty() && !starts) return false;
  if (!prefixes) prefixes = parsePrefixes(line);
  const Prefixes& pre = *prefixes;
  const LineRank lr = resolveRank(pre, GroupPrefix{}, st.fileRank);
  const int key = lr.rank.value_or(-1);
  std::string_view body = pre.rest;
  if (const auto at = body.find(kPython); at != std::string_view::npos && trimView(body.substr(0, at)).empty()) {
    st.tracebacks[key] = {lineNo, false, lr.from, at, "", ""};
    return true;
  }
  if (const auto at = body.find(kCxx); at != std::string_view::npos) {
    const std::string_view rest = body.substr(at + kCxx.size());
    st.tracebacks[key] = {lineNo, true, lr.from, 0, std::string(rest.substr(0, rest.find('\''))), ""};
    return true;
  }
  const auto it = st.tracebacks.find(key);
  if (it == st.tracebacks.end()) return false;
  LogReaderState::OpenTraceback& t = it->second;
  if (body.size() >= t.indent && trimView(body.substr(0, t.indent)).empty()) body.remove_prefix(t.indent);
  LogFact f;
  f.kind = LogFact::Kind::kException;
  f.rank = lr.rank;
  f.rankFrom = lr.from;
  f.host = pre.host;
  f.source = Source{st.file, lineNo, sourceText(line)};
  if (t.cxx) {
    // "  what():  [enforce fail at .../pair.cc:464] op.preamble.length <= op.nbytes. 12 vs 8"
    constexpr std::string_view kWhat = "what():";
    const auto at = body.find(kWhat);
    f.exception = t.exception;
    if (at != std::string_view::npos) f.message = std::string(trimView(body.substr(at + kWhat.size())));
    st.tracebacks.erase(it);
    f.hangConsequence = isHangConsequence(f.exception, f.message);
    if (at == std::string_view::npos) f.source.line = t.line;
    addFact(st, std::move(f));
    return false;  // the message may be a watchdog's line too
  }
  // '  File "train.py", line 88, in load_batch'; its source line and Python 3.11's ^^^ markers below it.
  const std::string_view trimmed = trimView(body);
  if (body.empty() || body.front() == ' ' || body.front() == '\t' || trimmed.empty()) {
    std::string file, func;
    int frameLine = 0;
    if (trimmed.rfind("File \"", 0) == 0 && RE2::FullMatch(piece(body), *logPatterns().pyFrame, &file, &frameLine, &func))
      t.frame = fmt::format("{} ({}:{})", func, file, frameLine);
    return true;
  }
  // The exception: "ValueError: bad batch", "torch.distributed.DistBackendError: ...", "KeyboardInterrupt".
  std::string type, message;
  const int start = t.line;
  const std::string frame = std::move(t.frame);
  st.tracebacks.erase(it);
  if (!RE2::FullMatch(piece(trimmed), *logPatterns().pyException, &type, &message)) {
    st.problems.line(start, "a Python traceback starts here but no exception line ends it; it was skipped.");
    return false;
  }
  f.exception = type;
  f.message = std::string(trimView(message));
  f.frame = frame;
  f.hangConsequence = isHangConsequence(f.exception, f.message);
  addFact(st, std::move(f));
  return false;
}

void readLogLine(LogReaderState& st, std::string_view line, int lineNo) {
  const auto& pat = logPatterns();
  std::optional<Prefixes> prefixes;  // parsed once, by whichever reading needs them first
  if (readTracebackLine(st, line, lineNo, prefixes)) return;
  if (!RE2::PartialMatch(piece(line), *pat.trigger)) return;

  if (!prefixes) prefixes = parsePrefixes(line);
  const Prefixes& pre = *prefixes;
  const re2::StringPiece s = piece(line);
  auto has = [&](const char* text) { return line.find(text) != std::string_view::npos; };

  // NCCL_DEBUG=INFO writes most of a large log: such a line can only tie its rank to its host, once.
  if (has(" NCCL INFO ") && !has("Got completion") && !has("Got async") && !has("Connection closed") &&
      !has("Call to recv") && !has("Proxy Service") && !has("ncclRemoteError") &&
      !has("remote process exited")) {
    LineRank lr = resolveRank(pre, GroupPrefix{}, st.fileRank);
    if (lr.from == "file_name") {
      noteDevice(st, ncclDevice(line, line.find(" NCCL INFO ")));
      lr = resolveRank(pre, GroupPrefix{}, st.fileRank);
    }
    if (!lr.global || !lr.rank || st.tied.count(*lr.rank)) return;
    std::string host, pid, tid, dev, level;
    if (RE2::PartialMatch(s, *pat.ncclHeader, &host, &pid, &tid, &dev, &level)) {
      if (lr.from == "file_name") st.fileNameTies.push_back(*lr.rank);
      st.hosts.add(*lr.rank, host, Source{st.file, lineNo, sourceText(line)});
      st.tied.insert(*lr.rank);
    }
    return;
  }

  const GroupPrefix group = parseGroupPrefix(line);
  std::string ncclHost, pid, tid, dev, level;
  const bool isNccl = line.find(" NCCL ") != std::string_view::npos &&
                      RE2::PartialMatch(s, *pat.ncclHeader, &ncclHost, &pid, &tid, &dev, &level);
  if (isNccl) noteDevice(st, dev);
  const LineRank lr = resolveRank(pre, group, st.fileRank);
  const std::string host = isNccl ? ncclHost : pre.host;
  const Source src{st.file, lineNo, sourceText(line)};

  if (lr.global && lr.rank && !host.empty()) {
    if (lr.from == "file_name") st.fileNameTies.push_back(*lr.rank);
    st.hosts.add(*lr.rank, host, src);
  }

  // torchrun's error summary: "host      : gpu-017" then "rank      : 12 (local_rank: 4)".
  {
    std::string a, b;
    const re2::StringPiece rest = piece(pre.rest);
    if (pre.rest.find("host") != std::string_view::npos && RE2::PartialMatch(rest, *pat.summaryHost, &a)) {
      st.summaryHost = a;
      st.summaryHostLine = lineNo;
      return;
    }
    if (pre.rest.find("local_rank") != std::string_view::npos &&
        RE2::PartialMatch(rest, *pat.summaryRank, &a, &b)) {
      if (st.summaryHostLine == lineNo - 1 && !st.summaryHost.empty()) {
        if (auto r = toInt(a))
          st.hosts.add(*r, st.summaryHost,
                       Source{st.file, lineNo,
                              sourceText(fmt::format("host : {} / {}", st.summaryHost, trimView(pre.rest)))});
      }
      st.summaryHost.clear();
      return;
    }
  }

  LogFact f;
  f.rank = lr.rank;
  f.rankFrom = lr.from;
  f.groupRank = group.groupRank;
  f.pgId = group.pgId;
  f.host = host;
  f.source = src;

  std::string a, b, c, d;
  // PyTorch's watchdog.
  constexpr std::string_view kWatchdog = "Watchdog caught collective operation timeout: ";
  if (const auto at = line.find(kWatchdog); at != std::string_view::npos) {
    f.kind = LogFact::Kind::kWatchdogTimeout;
    // "Work<Backend>(<fields>) ran for <N> milliseconds": cut by hand, since a regex capturing the fields
    // (which hold "Timeout(ms)=..." parentheses) costs ~10 us a line.
    const std::string_view after = line.substr(at + kWatchdog.size());
    constexpr std::string_view kRanFor = ") ran for ";
    const auto open = after.find('(');
    const auto close = after.find(kRanFor);
    if (after.rfind("Work", 0) == 0 && open != std::string_view::npos && close != std::string_view::npos &&
        open < close) {
      const re2::StringPiece in = piece(after.substr(open + 1, close - open - 1));
      std::string ran;
      re2::StringPiece tail = piece(after.substr(close + kRanFor.size()));
      if (!RE2::Consume(&tail, *pat.ranFor, &ran)) {
        st.problems.line(lineNo, "a watchdog timeout line that does not parse (cut short?): " + src.text);
        return;
      }
      if (RE2::PartialMatch(in, *pat.seqNum, &a) && !number(st, lineNo, a, "SeqNum", f.seq)) return;
      if (RE2::PartialMatch(in, *pat.opType, &b)) f.opType = b;
      if (RE2::PartialMatch(in, *pat.timeoutMs, &c) && !number(st, lineNo, c, "Timeout(ms)", f.timeoutMs))
        return;
      if (!number(st, lineNo, ran, "duration", f.ranForMs)) return;
      addFact(st, std::move(f));
    } else if (after.rfind("NCCL operation timed out", 0) == 0) {
      addFact(st, std::move(f));  // torch 2.15's nccl2 backend: no Work(...) details
    } else {
      st.problems.line(lineNo, "a watchdog timeout line that does not parse (cut short?): " + src.text);
    }
    return;
  }
  if (line.find("detected by watchdog") != std::string_view::npos ||
      line.find("Timeout at ") != std::string_view::npos) {
    if (RE2::PartialMatch(s, *pat.wdFailure, &a, &b, &c) ||
        RE2::PartialMatch(s, *pat.wdException, &a, &b, &c) ||
        RE2::PartialMatch(s, *pat.wdTimeoutAt, &a, &b, &c)) {
      f.kind = LogFact::Kind::kWatchdogFailure;
      if (!number(st, lineNo, a, "work sequence id", f.seq) ||
          !number(st, lineNo, b, "last enqueued work", f.lastEnqueued) ||
          !number(st, lineNo, c, "last completed work", f.lastCompleted))
        return;
      addFact(st, std::move(f));
    } else if (line.find("detected by watchdog at work") != std::string_view::npos ||
               line.find("Timeout at NCCL work") != std::string_view::npos) {
      st.problems.line(lineNo, "a watchdog failure line that does not parse (cut short?): " + src.text);
    }
    return;
  }
  if (line.find("dump signal") != std::string_view::npos ||
      line.find("global timeout from another rank") != std::string_view::npos) {
    f.kind = LogFact::Kind::kDumpSignal;
    bool matched = false;
    if (RE2::PartialMatch(s, *pat.dumpSignal, &a)) {
      matched = true;
      if (!a.empty()) {
        f.fromRank = toInt(a);
        if (!f.fromRank) {
          st.problems.line(
              lineNo,
              fmt::format("the rank '{}' is not a number this reader can hold; the line was skipped.", a));
          return;
        }
      } else {
        f.fromRank = f.rank;  // "from this local rank": this rank timed out first
      }
    } else if (RE2::PartialMatch(s, *pat.dumpLocal)) {
      matched = true;
      f.fromRank = f.rank;
    } else if (RE2::PartialMatch(s, *pat.dumpGlobal)) {
      matched = true;  // another rank, not named
    }
    if (matched) {
      if (RE2::PartialMatch(s, *pat.dumpCounts, &b, &c) &&
          (!number(st, lineNo, b, "last enqueued work", f.lastEnqueued) ||
           !number(st, lineNo, c, "last completed work", f.lastCompleted)))
        return;
      addFact(st, std::move(f));
    } else if (line.find("Received a dump signal") != std::string_view::npos) {
      st.problems.line(lineNo, "a dump-signal line that does not parse (cut short?): " + src.text);
    }
    return;
  }

  // NCCL's network faults.
  f.kind = LogFact::Kind::kNcclNetError;
  if (line.find("Got completion from peer") != std::string_view::npos &&
      line.find("NET/IB") != std::string_view::npos && level != "INFO" && level != "TRACE") {
    if (RE2::PartialMatch(s, *pat.ibCompletion, &a, &b)) {
      f.peerAddr = peerAddress(a);
      if (RE2::PartialMatch(s, *pat.hca, &c)) f.hca = c;
      addFact(st, std::move(f));
    } else {
      st.problems.line(lineNo, "an NCCL completion error that does not parse (cut short?): " + src.text);
    }
    return;
  }
  if (has("Got async") && level != "INFO" && level != "TRACE" && RE2::PartialMatch(s, *pat.ibAsync, &a)) {
    f.hca = a;
    addFact(st, std::move(f));
    return;
  }
  if ((has("Connection closed by remote peer") && RE2::PartialMatch(s, *pat.sockClosed, &a)) ||
      (has("Call to recv from") && RE2::PartialMatch(s, *pat.sockRecv, &a))) {
    f.peerAddr = peerAddress(a);
    addFact(st, std::move(f));
    return;
  }
  if (has("Proxy Service") && RE2::PartialMatch(s, *pat.proxy, &a, &b, &c, &d)) {
    f.peerRank = toInt(c);
    addFact(st, std::move(f));
    return;
  }
  if ((has("ncclRemoteError") || has("remote process exited")) && RE2::PartialMatch(s, *pat.remoteError)) {
    f.kind = LogFact::Kind::kNcclRemoteError;
    addFact(st, std::move(f));
    return;
  }
  // gloo's transport errors (no NCCL header: the rank comes from the line's prefix or the file name).
  if (has("Connection closed by peer") && RE2::PartialMatch(s, *pat.glooClosed, &a)) {
    f.kind = LogFact::Kind::kGlooPeerClosed;
    f.peerAddr = peerAddress(a);
    addFact(st, std::move(f));
    return;
  }
  if (has("Timed out waiting") && RE2::PartialMatch(s, *pat.glooTimeout, &a, &b)) {
    f.kind = LogFact::Kind::kGlooTimeout;
    if (!number(st, lineNo, a, "gloo timeout", f.timeoutMs)) return;
    f.opType = b;
    addFact(st, std::move(f));
    return;
  }
}

// ---------------------------------------------------------------------------------------------
// NCCL RAS

struct RasPatterns {
  std::unique_ptr<const RE2> totalsHeader = compile(R"(\(total\))", false);
  std::unique_ptr<const RE2> numbersRow = compile(R"(^\s*\d+(?:\s+\d+)*\s*$)", false);
  std::unique_ptr<const RE2> lastNumber = compile(R"((\d+)\s*$)");
  std::unique_ptr<const RE2> groupHeader = compile(R"(^Group\s+Comms)", false);
  std::unique_ptr<const RE2> groupRow =
      compile(R"(^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z,]+)\s*$)");
  std::unique_ptr<const RE2> commHeader = compile(R"(^#(\d+)-(\d+) \(([0-9A-Fa-fx]+)\) ([A-Z,]+)\s*$)");
  std::unique_ptr<const RE2> process =
      compile(R"(Process (\d+) on node (\S+) managing GPUs? (\d+)[\d,]*(?: \(NVML [\d,]+\))?)");
  std::unique_ptr<const RE2> missingRanks = compile(R"(^\s*The missing ranks?: ([\d,\s-]*)$)");
  std::unique_ptr<const RE2> differentStatus =
      compile(R"(^\s*Communicator ranks have different status)", false);
  std::unique_ptr<const RE2> differentCounts =
      compile(R"(^\s*Communicator ranks have different (\w+) operation counts)");
  std::unique_ptr<const RE2> launchedGroup = compile(R"(^\s*\d+ ranks have launched up to operation (\d+))");
  std::unique_ptr<const RE2> notLaunchedGroup =
      compile(R"(^\s*\d+ ranks have not launched any operations)", false);
  std::unique_ptr<const RE2> statusGroup = compile(R"(^\s*\d+ ranks have status (\w+))");
  std::unique_ptr<const RE2> errorsOn = compile(R"(^\s*(Initialization|Asynchronous) errors? on \d+ ranks?)");
  std::unique_ptr<const RE2> reportedGroup = compile(R"(^\s*\d+ ranks reported (.+?)\s*$)");
  std::unique_ptr<const RE2> rankLine = compile(
      R"(^\s*Rank (\d+)(?: has status (\w+)| has launched up to operation (\d+)|( has not launched any operations)| )"
      R"(reported (.+?))? -- (?:GPU (\d+)(?: \(NVML \d+\))? managed by process (\d+) on node (\S+)|)"
      R"(\[process information not found\])\s*$)");
};

const RasPatterns& rasPatterns() {
  static const RasPatterns p;
  return p;
}

// After a RAS answer is read: which communicators span the job, process entries joined to their ranks,
// and rank->host from the job-wide communicator.
void finishRas(ExternalEvidence& out, std::size_t first, std::optional<int> totalGpus, HostJoiner& hosts) {
  std::set<std::tuple<std::string, int, int>> gpus;  // host, pid, gpu of every rank named
  int largest = 0;
  for (std::size_t i = first; i < out.ras.size(); ++i) {
    const RasRank& r = out.ras[i];
    if (r.commSize) largest = std::max(largest, *r.commSize);
    if (!r.host.empty() && r.pid && r.gpu) gpus.emplace(r.host, *r.pid, *r.gpu);
  }
  int world = totalGpus.value_or(0);
  if (world <= 0) world = std::max(static_cast<int>(gpus.size()), largest);
  for (std::size_t i = first; i < out.ras.size(); ++i) {
    RasRank& r = out.ras[i];
    r.worldComm = !r.comm.empty() && r.commSize && *r.commSize == world && world > 0;
  }
  // A process RAS names without a rank: the rank of the same process and GPU in the job-wide communicator.
  for (std::size_t i = first; i < out.ras.size(); ++i) {
    RasRank& p = out.ras[i];
    if (p.rank >= 0 || !p.pid) continue;
    for (std::size_t j = first; j < out.ras.size(); ++j) {
      const RasRank& r = out.ras[j];
      if (r.worldComm && r.rank >= 0 && r.pid == p.pid && r.host == p.host &&
          (!p.gpu || !r.gpu || r.gpu == p.gpu)) {
        p.rank = r.rank;
        if (!p.gpu) p.gpu = r.gpu;
        break;
      }
    }
  }
  for (std::size_t i = first; i < out.ras.size(); ++i) {
    const RasRank& r = out.ras[i];
    if (r.worldComm && r.rank >= 0 && !r.host.empty()) hosts.add(r.rank, r.host, r.source);
  }
}

void readRasTextLines(const std::string& text, const std::string& file, ExternalEvidence& out,
                      HostJoiner& hosts) {
  const auto& pat = rasPatterns();
  FileProblems problems(out.problems, file);
  const std::size_t first = out.ras.size();
  std::map<int, int> groupCommSize;
  std::optional<int> totalGpus;
  bool expectTotals = false, inGroupTable = false;
  std::string procState;  // "incomplete" / "dead" under those headers
  std::string comm, commKind, sub, groupValue;
  int commGroup = -1;
  std::optional<int64_t> launched;
  bool sawRas = false;

  auto resetBlock = [&] {
    procState.clear();
    comm.clear();
    commKind.clear();
    sub.clear();
    groupValue.clear();
    launched.reset();
    commGroup = -1;
  };

  TextStreamBuf buf(text);
  std::istream in(&buf);
  LineReader reader(in);
  std::string raw;
  while (reader.next(raw)) {
    const int lineNo = reader.lineNo();
    const std::string_view line = trimView(raw);
    const re2::StringPiece s = piece(raw);
    std::string a, b, c, d, e, g, h, k;
    if (line.empty()) {
      inGroupTable = false;
      continue;
    }
    if (expectTotals && RE2::FullMatch(s, *pat.numbersRow)) {
      if (RE2::PartialMatch(s, *pat.lastNumber, &a)) totalGpus = toInt(a);
      expectTotals = false;
      continue;
    }
    if (RE2::PartialMatch(s, *pat.totalsHeader)) {
      expectTotals = true;
      continue;
    }
    if (line == "Job summary" || line == "Errors" || line == "Warnings" ||
        line.rfind("Communicators", 0) == 0 || line.find_first_not_of('=') == std::string_view::npos) {
      if (line.find_first_not_of('=') != std::string_view::npos) sawRas = true;
      resetBlock();
      continue;
    }
    if (RE2::PartialMatch(s, *pat.groupHeader)) {
      inGroupTable = true;
      sawRas = true;
      continue;
    }
    if (inGroupTable) {
      std::string cols[8];
      if (RE2::FullMatch(s, *pat.groupRow, &cols[0], &cols[1], &cols[2], &cols[3], &cols[4], &cols[5],
                         &cols[6], &cols[7])) {
        auto g0 = toInt(cols[0]);
        auto size = toInt(cols[4]);
        if (g0 && size) groupCommSize[*g0] = *size;
      }
      continue;  // the header's second line and the rows
    }
    if (line == "INCOMPLETE" || line == "DEAD" || line == "TIMEOUT") {
      resetBlock();
      if (line != "TIMEOUT") procState = lower(std::string(line));
      continue;
    }
    if (line.rfind("The missing process", 0) == 0) {  // VERBOSE STATUS: processes missing from the RAS data
      resetBlock();
      procState = "incomplete";
      continue;
    }
    if (RE2::FullMatch(s, *pat.commHeader, &a, &b, &c, &d)) {
      resetBlock();
      sawRas = true;
      commGroup = toInt(a).value_or(-1);
      comm = fmt::format("#{}-{} ({})", a, b, c);
      commKind = d;
      continue;
    }
    if (RE2::PartialMatch(s, *pat.process, &a, &b, &c)) {
      const bool peerDead = line.find("PEER_DEAD") != std::string_view::npos;
      if (!peerDead && procState.empty()) continue;
      RasRank r;
      r.host = b;
      r.pid = toInt(a);
      r.gpu = toInt(c);
      r.state = peerDead ? "dead" : procState;
      if (peerDead) r.detail = "PEER_DEAD";
      r.source = Source{file, lineNo, sourceText(line)};
      out.ras.push_back(std::move(r));
      sawRas = true;
      continue;
    }
    auto newRank = [&](int rank) {
      RasRank r;
      r.rank = rank;
      r.comm = comm;
      if (auto it = groupCommSize.find(commGroup); it != groupCommSize.end()) r.commSize = it->second;
      r.source = Source{file, lineNo, sourceText(line)};
      // The block says what a rank listed in it is: a missing rank of an INCOMPLETE communicator, an
      // outlier of a MISMATCH (status or operation counts), a rank that reported an ERROR.
      if (sub.find("error") != std::string::npos || (sub.empty() && commKind == "ERROR")) {
        r.state = "error";
      } else if (!sub.empty() || commKind == "MISMATCH") {
        r.state = "mismatch";
      } else {
        r.state = "missing";
      }
      return r;
    };
    if (RE2::FullMatch(s, *pat.missingRanks, &a)) {
      if (comm.empty()) {
        problems.line(lineNo, "a list of missing ranks outside a communicator block: " + std::string(line));
        continue;
      }
      std::stringstream list(a);
      std::string item;
      while (std::getline(list, item, ',')) {
        const std::string_view t = trimView(item);
        if (t.empty()) continue;
        auto dash = t.find('-');
        auto lo = toInt(t.substr(0, dash));
        auto hi = dash == std::string_view::npos ? lo : toInt(t.substr(dash + 1));
        if (!lo || !hi || *hi < *lo || *hi - *lo > 1'000'000) {
          problems.line(lineNo, fmt::format("'{}' is not a rank or a range of ranks; it was skipped.", t));
          continue;
        }
        for (int r = *lo; r <= *hi; ++r) {
          RasRank rr = newRank(r);
          rr.state = "missing";
          out.ras.push_back(std::move(rr));
        }
      }
      continue;
    }
    if (RE2::PartialMatch(s, *pat.differentStatus)) {
      sub = "status";
      groupValue.clear();
      launched.reset();
      continue;
    }
    if (RE2::PartialMatch(s, *pat.differentCounts, &a)) {
      sub = a + " operation counts";
      groupValue.clear();
      launched.reset();
      continue;
    }
    if (RE2::PartialMatch(s, *pat.launchedGroup, &a)) {
      launched = toInt64(a);
      continue;
    }
    if (RE2::PartialMatch(s, *pat.notLaunchedGroup)) {
      launched = 0;
      continue;
    }
    if (RE2::PartialMatch(s, *pat.statusGroup, &a)) {
      groupValue = a;
      continue;
    }
    if (RE2::PartialMatch(s, *pat.errorsOn, &a)) {
      sub = lower(a) + " error";
      groupValue.clear();
      continue;
    }
    if (RE2::FullMatch(s, *pat.reportedGroup, &a)) {
      groupValue = a;
      continue;
    }
    if (line.rfind("Rank ", 0) == 0) {
      if (!RE2::FullMatch(s, *pat.rankLine, &a, &b, &c, &d, &e, &g, &h, &k)) {
        problems.line(lineNo, "a RAS rank line that does not parse: " + sourceText(line));
        continue;
      }
      if (comm.empty()) {
        problems.line(lineNo, "a RAS rank line outside a communicator block: " + sourceText(line));
        continue;
      }
      auto rank = toInt(a);
      if (!rank) {
        problems.line(lineNo, fmt::format("the rank '{}' is not a number this reader can hold.", a));
        continue;
      }
      RasRank r = newRank(*rank);
      if (!k.empty()) {
        r.host = k;
        r.pid = toInt(h);
        r.gpu = toInt(g);
      }
      const std::string status = !b.empty() ? b : groupValue;
      if (!c.empty()) {
        r.launchedUpTo = toInt64(c);
      } else if (!d.empty()) {
        r.launchedUpTo = 0;
      } else if (sub.find("operation counts") != std::string::npos) {
        r.launchedUpTo = launched;
      }
      if (r.state == "mismatch") {
        r.detail = sub == "status" ? "status " + status : sub;
      } else if (r.state == "error") {
        r.detail = sub + ": " + (!e.empty() ? e : groupValue);
      }
      sawRas = true;
      out.ras.push_back(std::move(r));
      continue;
    }
  }
  if (reader.skipped() > 0)
    out.problems.push_back(fmt::format("{}: {} lines longer than {} KiB were skipped.", file,
                                       reader.skipped(), kMaxLogLineBytes / 1024));
  if (!sawRas)
    out.problems.push_back(
        fmt::format("{}: no NCCL RAS status found (no \"Job summary\", communicator table or RAS "
                    "block); is it the output of `ncclras` or of STATUS on port 28028?",
                    file));
  finishRas(out, first, totalGpus, hosts);
}

std::string rasJsonDetail(const json& counts) {
  std::string d;
  if (!counts.is_object()) return d;
  for (const auto& [op, n] : counts.items()) {
    if (!n.is_number_integer() && !n.is_number_unsigned()) continue;
    if (n.get<int64_t>() == 0) continue;
    d += fmt::format("{}{} {}", d.empty() ? "" : ", ", op, n.get<int64_t>());
  }
  return d;
}

// One JSON document of a RAS answer: the STATUS dump ("communicators") or a MONITOR event.
void readRasJsonDoc(const json& j, const std::string& file, int docNo, ExternalEvidence& out,
                    FileProblems& problems) {
  if (!j.is_object()) {
    problems.line(0, fmt::format("JSON document {} is not an object; it was skipped.", docNo));
    return;
  }
  if (j.contains("event")) {
    if (report::textOr(j, "event", "") != "PEER_DEAD") return;
    const json& peer = j.value("peer", json::object());
    RasRank r;
    r.state = "dead";
    r.detail = "PEER_DEAD";
    r.host = report::textOr(peer, "host", report::textOr(peer, "addr", ""));
    try {
      if (peer.contains("pid")) r.pid = report::readInt<int>(peer.at("pid"));
      if (peer.contains("cuda_devs") && peer.at("cuda_devs").is_array() && !peer.at("cuda_devs").empty())
        r.gpu = report::readInt<int>(peer.at("cuda_devs").at(0));
    } catch (const json::exception& e) {
      problems.line(
          0, fmt::format("a PEER_DEAD event with a bad field ({}); it was read without it.", e.what()));
    }
    r.source = Source{file, 0, fmt::format("PEER_DEAD event: process {} on {}", r.pid.value_or(-1), r.host)};
    out.ras.push_back(std::move(r));
    return;
  }
  auto comms = j.find("communicators");
  if (comms == j.end() || !comms->is_array()) {
    problems.line(
        0,
        fmt::format("JSON document {} has no \"communicators\" list; it is not an NCCL RAS answer.", docNo));
    return;
  }
  for (std::size_t ci = 0; ci < comms->size(); ++ci) {
    const json& c = (*comms)[ci];
    const std::string hash = report::textOr(c, "hash", fmt::format("communicators[{}]", ci));
    std::optional<int> size;
    try {
      if (c.contains("size")) size = report::readInt<int>(c.at("size"));
    } catch (const json::exception& e) {
      problems.line(0, fmt::format("communicator {}: bad \"size\" ({}).", hash, e.what()));
    }
    auto readRanks = [&](const char* key, bool missing) {
      auto list = c.find(key);
      if (list == c.end()) return;
      if (!list->is_array()) {
        problems.line(0, fmt::format("communicator {}: \"{}\" is not a list; it was skipped.", hash, key));
        return;
      }
      for (std::size_t ri = 0; ri < list->size(); ++ri) {
        const json& x = (*list)[ri];
        try {
          RasRank r;
          r.rank = report::readInt<int>(x.at("rank"));
          r.host = report::textOr(x, "host", "");
          if (x.contains("pid")) r.pid = report::readInt<int>(x.at("pid"));
          if (x.contains("cuda_dev")) r.gpu = report::readInt<int>(x.at("cuda_dev"));
          r.comm = hash;
          r.commSize = size;
          const json& st = x.contains("status") ? x.at("status") : json::object();
          if (missing) {
            const bool dead = st.value("considered_dead", false);
            r.state = dead ? "dead" : "missing";
            if (!dead && st.value("unresponsive", false)) r.detail = "unresponsive";
          } else {
            const int init = report::readIntOr(st, "init_state", 0);
            const int async = report::readIntOr(st, "async_error", 0);
            const bool abort = st.value("abort_flag", false);
            std::vector<std::string> notes;
            if (init != 0 && init != 7) notes.push_back(fmt::format("init_state {}", init));
            if (init == 7) notes.push_back("initializing");
            if (async != 0 && async != 7) notes.push_back(fmt::format("async_error {}", async));
            if (abort) notes.push_back("abort_flag");
            if (st.value("finalize_called", false) || st.value("destroy_flag", false))
              notes.push_back("finalize");
            const bool error = (init != 0 && init != 7) || (async != 0 && async != 7) || abort;
            r.state = error ? "error" : "ok";
            int64_t total = 0;
            bool any = false;
            if (x.contains("collective_counts") && x.at("collective_counts").is_object()) {
              for (const auto& [op, n] : x.at("collective_counts").items()) {
                total += report::readInt<int64_t>(n);
                any = true;
              }
              const std::string counts = rasJsonDetail(x.at("collective_counts"));
              if (!counts.empty()) notes.push_back(counts);
            }
            if (any) r.launchedUpTo = total;
            for (const auto& n : notes) r.detail += (r.detail.empty() ? "" : "; ") + n;
          }
          r.source = Source{file, 0, fmt::format("communicator {} {}[{}] (rank {})", hash, key, ri, r.rank)};
          out.ras.push_back(std::move(r));
        } catch (const json::exception& e) {
          problems.line(0, fmt::format("communicator {}: {}[{}] has a bad field ({}); it was skipped.", hash,
                                       key, ri, e.what()));
        }
      }
    };
    readRanks("ranks", false);
    readRanks("missing_ranks", true);
  }
}

void readRasJson(const std::string& text, const std::string& file, ExternalEvidence& out, HostJoiner& hosts) {
  FileProblems problems(out.problems, file);
  const std::size_t first = out.ras.size();
  TextStreamBuf buf(text);
  std::istream in(&buf);
  int docNo = 0;
  for (;;) {
    in >> std::ws;
    if (in.peek() == std::char_traits<char>::eof()) break;
    json j;
    try {
      in >> j;
    } catch (const json::exception& e) {
      out.problems.push_back(
          fmt::format("{}: JSON document {} does not parse ({}); what came before it was read.", file,
                      docNo + 1, e.what()));
      break;
    }
    readRasJsonDoc(j, file, ++docNo, out, problems);
  }
  finishRas(out, first, std::nullopt, hosts);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

bool addRankHost(ExternalEvidence& out, int rank, const std::string& host, const Source& source) {
  if (rank < 0 || host.empty()) return false;
  auto it = out.rankHost.find(rank);
  if (it == out.rankHost.end()) {
    out.rankHost[rank] = host;
    out.rankHostSource[rank] = source;
    return true;
  }
  const std::string& known = it->second;
  if (known == host) return false;
  const bool ipKnown = isIpAddress(known), ipNew = isIpAddress(host);
  if (ipNew && !ipKnown && !out.rankAddress.count(rank)) out.rankAddress[rank] = {host, source};
  if (!ipNew && ipKnown && !out.rankName.count(rank)) out.rankName[rank] = {host, source};
  const bool differ = ipKnown == ipNew && (ipKnown ? known != host : shortName(known) != shortName(host));
  if (differ) {
    out.problems.push_back(
        fmt::format("{} puts rank {} on {}, but {} already put it on {}; the first is kept. Check which file "
                    "belongs to this job.",
                    where(source), rank, host, where(out.rankHostSource[rank]), known));
  }
  return false;
}

std::string hostOfAddress(const ExternalEvidence& ev, const std::string& address) {
  std::string a = peerAddress(address);
  if (!a.empty() && a.front() == '[') {  // "[fe80::1]:43121"
    auto close = a.find(']');
    a = close == std::string::npos ? a.substr(1) : a.substr(1, close - 1);
  } else if (std::count(a.begin(), a.end(), ':') == 1) {  // "10.0.0.7:43121"
    a.erase(a.find(':'));
  }
  auto it = ev.addressHost.find(a);
  return it == ev.addressHost.end() ? "" : it->second;
}

void joinAddresses(ExternalEvidence& out) {
  for (auto& [rank, host] : out.rankHost) {
    if (!isIpAddress(host)) continue;
    const std::string name = hostOfAddress(out, host);
    if (name.empty()) continue;
    const std::string addr = host;
    const std::string byFleet = where(out.addressHostSource[peerAddress(addr)]);
    Source& src = out.rankHostSource[rank];
    const std::string first = where(src);
    src.text = fmt::format("{} (address {} is {}'s: {})", src.text, addr, name, byFleet);
    host = name;
    auto claim = out.rankName.find(rank);
    if (claim != out.rankName.end() && shortName(claim->second.first) != shortName(name)) {
      out.problems.push_back(fmt::format(
          "{} put rank {} on {}, which {} gives to {}, but {} puts it on {}; {} is kept. Check which file "
          "belongs to this job.",
          first, rank, addr, byFleet, name, where(claim->second.second), claim->second.first, name));
    }
  }
  for (const auto& [rank, claim] : out.rankAddress) {
    const std::string name = hostOfAddress(out, claim.first);
    auto known = out.rankHost.find(rank);
    if (name.empty() || known == out.rankHost.end() || isIpAddress(known->second)) continue;
    if (shortName(name) != shortName(known->second)) {
      out.problems.push_back(fmt::format(
          "{} puts rank {} on {}, which {} gives to {}, but {} already put it on {}; the first is kept. Check "
          "which file belongs to this job.",
          where(claim.second), rank, claim.first, where(out.addressHostSource[peerAddress(claim.first)]), name,
          where(out.rankHostSource[rank]), known->second));
    }
  }
}

void readLogs(const std::vector<std::string>& paths, ExternalEvidence& out) {
  const std::vector<std::string> files = expandLogPaths(paths, out.problems);
  std::set<std::pair<dev_t, ino_t>> read;
  for (const auto& file : files) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
      out.problems.push_back(
          fmt::format("{}: cannot read this log ({}); it was skipped.", file, errnoText(errno)));
      continue;
    }
    if (!read.insert({st.st_dev, st.st_ino}).second) continue;
    if (!S_ISREG(st.st_mode)) {
      out.problems.push_back(
          fmt::format("{}: not a regular file (a FIFO or device), so it is not read as a log.", file));
      continue;
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      out.problems.push_back(
          fmt::format("{}: cannot open this log ({}); it was skipped.", file, errnoText(errno)));
      continue;
    }
    detail::readLogStream(in, file, out);
  }
}

void readRas(const std::string& path, ExternalEvidence& out) {
  auto text = readWhole(path, "NCCL RAS answer", out.problems);
  if (text) detail::readRasText(*text, path, out);
}

void readFleetJson(const std::string& path, ExternalEvidence& out) {
  auto text = readWhole(path, "dsdiag fleet report", out.problems);
  if (!text) return;
  report::FleetReport fleet;
  try {
    json j;
    try {
      j = json::parse(*text);
    } catch (const json::parse_error&) {
      throw report::notJsonError(*text, path, report::kDiagSchemaName);
    }
    const std::string schema = report::textOr(j, "schema", "");
    if (schema == report::kDiagSchemaName) {
      report::checkSchemaVersion(j, report::kDiagSchemaName, path);
      if (!j.contains("fleet") || j.at("fleet").is_null()) {
        out.problems.push_back(
            fmt::format("{} is a dsdiag report without a \"fleet\" object (it was not made by `dsdiag "
                        "--world` across hosts), so "
                        "it gives no host verdicts.",
                        path));
        return;
      }
      fleet = report::fleetFromJsonAt(j.at("fleet"), path, "/fleet");
    } else if (schema == report::kFleetSchemaName) {
      fleet = report::fleetFromJson(j, path);
    } else {
      out.problems.push_back(
          fmt::format("{} is not a dsdiag report (schema '{}', expected '{}' or '{}'); write one "
                      "with `dsdiag --world --json FILE`.",
                      path, schema, report::kDiagSchemaName, report::kFleetSchemaName));
      return;
    }
  } catch (const Error& e) {  // ConfigError from the fleet reader: names the file and the field
    out.problems.push_back(e.what());
    return;
  } catch (const json::exception& e) {
    out.problems.push_back(fmt::format("{}: not a readable dsdiag report ({}).", path, e.what()));
    return;
  }
  for (const auto& r : fleet.input.ranks) {
    for (const auto& iface : r.ifaces) {
      if (iface.addr.empty() || r.host.empty()) continue;
      const Source src{path, 0, fmt::format("fleet rank {} on {}: {} {}", r.rank, r.host, iface.name, iface.addr)};
      auto [it, added] = out.addressHost.emplace(iface.addr, r.host);
      if (!added && it->second.empty()) continue;  // already found on two hosts
      if (added) {
        out.addressHostSource[iface.addr] = src;
      } else if (shortName(it->second) != shortName(r.host)) {
        out.problems.push_back(fmt::format(
            "{} gives address {} to both {} and {}; it is not used to name hosts. Two hosts with one address "
            "(a private network reused per node?) cannot be told apart by it.",
            path, iface.addr, it->second, r.host));
        it->second.clear();
      }
    }
  }
  HostJoiner hosts(out);
  for (std::size_t i = 0; i < fleet.judgement.hosts.size(); ++i) {
    const auto& h = fleet.judgement.hosts[i];
    FleetHostFact f;
    f.host = h.host;
    f.state = report::hostStateName(h.state);
    f.ranks = h.ranks;
    if (!h.evidence.empty()) f.evidence = h.evidence.front().text;
    f.source = Source{path, 0,
                      fmt::format("fleet host {} ({}): {}", h.host, f.state,
                                  f.evidence.empty() ? "no evidence" : f.evidence)};
    for (int r : h.ranks) hosts.add(r, h.host, f.source);
    out.fleet.push_back(std::move(f));
  }
}

namespace detail {

std::optional<int> rankFromFileName(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  if (name.rfind("slurm-", 0) == 0) return std::nullopt;
  // Drop non-numeric extensions (".log", ".err", ".txt.gz"): "rank_3.log" -> "rank_3", "log.3" stays.
  for (;;) {
    auto dot = name.rfind('.');
    if (dot == std::string::npos || dot == 0) break;
    const std::string ext = name.substr(dot + 1);
    if (!ext.empty() && std::all_of(ext.begin(), ext.end(), [](unsigned char c) { return std::isdigit(c); }))
      break;
    name.erase(dot);
  }
  std::size_t end = name.size(), start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(name[start - 1]))) --start;
  if (start == end || end - start > 6) return std::nullopt;
  return toInt(std::string_view(name).substr(start));
}

void readLogStream(std::istream& in, const std::string& file, ExternalEvidence& out) {
  FileProblems problems(out.problems, file);
  HostJoiner hosts(out);
  LogReaderState st{
      .file = file, .fileRank = rankFromFileName(file), .out = out, .hosts = hosts, .problems = problems};
  st.firstFact = out.logs.size();
  LineReader reader(in);
  std::string line;
  while (reader.next(line)) readLogLine(st, line, reader.lineNo());
  for (const auto& [rank, t] : st.tracebacks) {
    st.problems.line(t.line, t.cxx ? fmt::format("the process was terminated by a C++ exception ({}), but the file "
                                                 "ends before its message; it is noted without one.",
                                                 t.exception)
                                   : std::string("the file ends inside a Python traceback, before its exception; "
                                                 "the traceback was skipped."));
    if (t.cxx) {
      LogFact f;
      f.kind = LogFact::Kind::kException;
      f.rank = rank >= 0 ? std::optional<int>(rank) : std::nullopt;
      f.rankFrom = t.rankFrom;
      f.exception = t.exception;
      f.source = Source{file, t.line, "terminate called after throwing an instance of '" + t.exception + "'"};
      addFact(st, std::move(f));
    }
  }
  if (reader.failed())
    out.problems.push_back(fmt::format(
        "{}: reading stopped at line {} (I/O error); the lines before it were read.", file, reader.lineNo()));
  if (reader.skipped() > 0)
    out.problems.push_back(
        fmt::format("{}: {} lines longer than {} KiB were skipped (no log line of interest is that "
                    "long; is it a binary file?).",
                    file, reader.skipped(), kMaxLogLineBytes / 1024));
}

void readRasText(const std::string& text, const std::string& file, ExternalEvidence& out) {
  HostJoiner hosts(out);
  const auto firstChar = text.find_first_not_of(" \t\r\n");
  if (firstChar != std::string::npos && text[firstChar] == '{') {
    readRasJson(text, file, out, hosts);
  } else {
    readRasTextLines(text, file, out, hosts);
  }
}

}  // namespace detail
}  // namespace ds::diag::hang
