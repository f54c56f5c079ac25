#include "diag/hang/dump_reader.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "diag/hang/pickle.h"
#include "engine/common/error.h"
#include "engine/host/resources.h"

namespace ds::diag::hang {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::size_t kMaxDepth = 1000;               // FR nests 4 deep; copying json recurses
constexpr std::size_t kMaxEntries = 2'000'000;        // kept per dump: the newest, as FR's ring does
constexpr std::size_t kMaxTensorValues = 64'000'000;  // sizes and dtypes kept per dump, all entries
constexpr std::size_t kMaxJsonValues = 16'000'000;    // JSON values held at once besides one entry
constexpr int kWarningsPerField = 3;                  // then one summary per field

// "a string (\"x\")", "a list", ...: what a wrong-typed field holds, for a warning.
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      return fmt::format("a string (\"{}{}\")", s.substr(0, 40), s.size() > 40 ? "..." : "");
    }
    case json::value_t::array:
      return "a list";
    case json::value_t::object:
      return "a dict";
    case json::value_t::boolean:
      return v.get<bool>() ? "True" : "False";
    case json::value_t::number_float:
    case json::value_t::number_integer:
      return fmt::format("the number {}", v.dump());
    case json::value_t::number_unsigned:
      return fmt::format("the number {}{}", v.dump(),
                         v.get<std::uint64_t>() > INT64_MAX ? ", beyond int64" : "");
    default:
      return fmt::format("the value {}", v.dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

// torch's JSON writes some integers as text (pg_status, thread_id): "21", "-1".
std::optional<std::int64_t> asInt(const json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    std::int64_t i = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty() ? std::optional(i) : std::nullopt;
  }
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<std::int64_t>();
  if (v.is_number_unsigned() && v.get<std::uint64_t>() <= std::uint64_t{INT64_MAX})
    return v.get<std::int64_t>();
  return std::nullopt;
}

// "[0, 1]" or "[0,1]" -> {0, 1}; nullopt when malformed.
std::optional<std::vector<int>> parseRanks(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
  s = s.substr(1, s.size() - 2);
  std::vector<int> ranks;
  while (s.find_first_not_of(' ') != std::string_view::npos) {
    s.remove_prefix(s.find_first_not_of(' '));
    int r = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), r);
    if (ec != std::errc() || r < 0) return std::nullopt;
    ranks.push_back(r);
    s.remove_prefix(static_cast<std::size_t>(end - s.data()));
    s.remove_prefix(std::min(s.find_first_not_of(' '), s.size()));
    if (s.empty()) break;
    if (s.front() != ',') return std::nullopt;
    s.remove_prefix(1);
  }
  return ranks;
}

// Turns the generic form of a dump (from the pickle or the JSON) into a RankDump, one entry at a
// time. Entry fields without a slot in FrEntry (thread_id, thread_name, stack_id, ...) are dropped.
class Converter {
 public:
  explicit Converter(RankDump& dump) : d_(dump) {}

  // Reads typed fields of one dict. Missing and None fields stay unknown quietly; a field of the
  // wrong type stays unknown with a warning.
  class Fields {
   public:
    Fields(Converter& c, const json& obj, std::string where) : c_(c), obj_(obj), where_(std::move(where)) {}

    const json* find(const char* key) const {
      auto it = obj_.find(key);
      return it == obj_.end() || it->is_null() ? nullptr : &*it;
    }
    void wrong(const std::string& key, const json& v, std::string_view expected) {
      c_.wrong(where_, key, v, expected);
    }
    std::optional<std::int64_t> integer(const char* key) {
      const json* v = find(key);
      if (v == nullptr) return std::nullopt;
      if (auto i = asInt(*v)) return i;
      wrong(key, *v, "an integer");
      return std::nullopt;
    }
    std::optional<double> number(const char* key) {
      const json* v = find(key);
      if (v == nullptr) return std::nullopt;
      if (v->is_number()) return v->get<double>();
      wrong(key, *v, "a number");
      return std::nullopt;
    }
    std::optional<bool> flag(const char* key) {
      const json* v = find(key);
      if (v == nullptr) return std::nullopt;
      if (v->is_boolean()) return v->get<bool>();
      wrong(key, *v, "True or False");
      return std::nullopt;
    }
    std::string text(const char* key) {
      const json* v = find(key);
      if (v == nullptr) return {};
      if (v->is_string()) return v->get<std::string>();
      wrong(key, *v, "a string");
      return {};
    }
    // An id written as an int (torch) or a string: its text.
    std::string id(const char* key) {
      const json* v = find(key);
      if (v == nullptr) return {};
      if (v->is_string()) return v->get<std::string>();
      if (auto i = asInt(*v)) return std::to_string(*i);
      wrong(key, *v, "an id");
      return {};
    }

   private:
    Converter& c_;
    const json& obj_;
    std::string where_;
  };

  void entry(const json& e) {
    const std::size_t index = seen_++;
    if (!e.is_object()) {
      warn("entries",
           fmt::format("{}: entry {} is {}, not a dict; it is skipped.", d_.file, index, describe(e)));
      return;
    }
    FrEntry out;
    const auto rid = e.find("record_id");
    const auto ridInt = rid != e.end() ? asInt(*rid) : std::nullopt;
    Fields f(
        *this, e,
        ridInt ? fmt::format("entry {} (record_id {})", index, *ridInt) : fmt::format("entry {}", index));
    out.recordId = f.integer("record_id");
    out.pgId = f.id("pg_id");
    if (const json* pg = f.find("process_group")) {
      if (pg->is_array() && pg->size() == 2 && (*pg)[0].is_string() && (*pg)[1].is_string()) {
        out.pgName = (*pg)[0].get<std::string>();
        out.pgDesc = (*pg)[1].get<std::string>();
      } else {
        f.wrong("process_group", *pg, "a (name, desc) pair of strings");
      }
    }
    out.collectiveSeqId = f.integer("collective_seq_id");
    out.p2pSeqId = f.integer("p2p_seq_id");
    out.opId = f.integer("op_id");
    out.profilingName = f.text("profiling_name");
    splitProfilingName(out, f);
    const bool keepTensors = tensorValues_ < kMaxTensorValues;
    if (keepTensors) {
      out.inputSizes = shapes(f, "input_sizes");
      out.outputSizes = shapes(f, "output_sizes");
      out.inputDtypes = strings(f, "input_dtypes");
      out.outputDtypes = strings(f, "output_dtypes");
    } else {
      ++tensorsDropped_;
    }
    out.state = f.text("state");
    out.timeCreatedNs = f.integer("time_created_ns");
    // The pickle has None where torch's JSON writes 0: neither is a time.
    out.timeDiscoveredStartedNs = f.integer("time_discovered_started_ns");
    out.timeDiscoveredCompletedNs = f.integer("time_discovered_completed_ns");
    if (out.timeDiscoveredStartedNs == 0) out.timeDiscoveredStartedNs.reset();
    if (out.timeDiscoveredCompletedNs == 0) out.timeDiscoveredCompletedNs.reset();
    out.durationMs = f.number("duration_ms");
    out.timeoutMs = f.integer("timeout_ms");
    out.isP2p = f.flag("is_p2p");
    out.retired = f.flag("retired");
    out.topFrame = topFrame(f);
    add(std::move(out));
  }

  // The top-level dict, its "entries" already given to entry() (or still in it, if the reader
  // could not stream them).
  void top(const json& t) {
    Fields f(*this, t, "top level");
    d_.version = f.text("version");
    d_.commLibVersion = f.text("comm_lib_version");
    if (d_.commLibVersion.empty()) d_.commLibVersion = f.text("nccl_version");
    if (const json* e = f.find("entries")) {
      if (e->is_array()) {
        for (const json& x : *e) entry(x);
      } else {
        f.wrong("entries", *e, "a list");
      }
    }
    if (const json* cfg = f.find("pg_config")) groups(f, *cfg);
    if (const json* st = f.find("pg_status")) pgStatus(f, *st);
    for (const auto& [key, value] : t.items()) {
      static constexpr std::string_view kKnown[] = {"version", "comm_lib_version", "nccl_version",
                                                    "entries", "pg_config",        "pg_status"};
      if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) d_.extra[key] = value;
    }
  }

  void finish() {
    if (d_.entries.size() > kMaxEntries) {
      dropped_ += d_.entries.size() - kMaxEntries;
      d_.entries.erase(d_.entries.begin(), d_.entries.end() - kMaxEntries);
    }
    if (dropped_ > 0) {
      d_.warnings.push_back(
          fmt::format("{}: the dump holds {} entries; dsdiag kept the newest {} and dropped the "
                      "oldest {}.",
                      d_.file, dropped_ + d_.entries.size(), d_.entries.size(), dropped_));
    }
    if (tensorsDropped_ > 0) {
      d_.warnings.push_back(
          fmt::format("{}: the entries' tensor sizes and dtypes pass {} values; those of the last "
                      "{} entries were not kept.",
                      d_.file, kMaxTensorValues, tensorsDropped_));
    }
    for (const auto& [field, count] : warned_) {
      if (count > kWarningsPerField) {
        d_.warnings.push_back(
            fmt::format("{}: '{}' was unreadable in {} more places, treated as unknown as above.", d_.file,
                        field, count - kWarningsPerField));
      }
    }
  }

 private:
  void wrong(const std::string& where, const std::string& key, const json& v, std::string_view expected) {
    warn(key, fmt::format("{}: {}: '{}' is {}, not {}; it is treated as unknown.", d_.file, where, key,
                          describe(v), expected));
  }

  // A dump can repeat the same fault in every entry: a few sentences per field, then a count.
  void warn(const std::string& field, std::string sentence) {
    if (++warned_[field] <= kWarningsPerField) d_.warnings.push_back(std::move(sentence));
  }

  // The newest kMaxEntries are kept; the oldest are dropped in batches, so adding stays O(1).
  void add(FrEntry&& e) {
    d_.entries.push_back(std::move(e));
    if (d_.entries.size() >= kMaxEntries + kMaxEntries / 4) {
      const std::size_t n = d_.entries.size() - kMaxEntries;
      d_.entries.erase(d_.entries.begin(), d_.entries.begin() + static_cast<std::ptrdiff_t>(n));
      dropped_ += n;
    }
  }

  // "nccl:all_reduce", "gloo:broadcast", "nccl:send 1->2", "nccl:recv 3<-0". The peer is b in "a->b"
  // and "a<-b"; torch writes both numbers as ranks within the group, not global ranks.
  void splitProfilingName(FrEntry& e, Fields& f) {
    const std::string& name = e.profilingName;
    const std::size_t colon = name.find(':');
    e.backend = colon == std::string::npos ? "" : name.substr(0, colon);
    const std::string rest = colon == std::string::npos ? name : name.substr(colon + 1);
    const std::size_t space = rest.find(' ');
    e.op = rest.substr(0, space);
    if (space == std::string::npos) return;
    std::size_t arrow = rest.find("->", space);
    if (arrow == std::string::npos) arrow = rest.find("<-", space);
    const char* end = rest.data() + rest.size();
    const char* b = arrow == std::string::npos ? end : rest.data() + arrow + 2;
    int peer = -1;
    if (auto [p, ec] = std::from_chars(b, end, peer); ec == std::errc() && p == end && peer >= 0) {
      e.p2pPeer = peer;
    } else {
      f.wrong("profiling_name", json(name), "a name such as 'nccl:send 1->2' with a peer rank");
    }
  }

  std::vector<std::vector<std::int64_t>> shapes(Fields& f, const char* key) {
    std::vector<std::vector<std::int64_t>> out;
    const json* v = f.find(key);
    if (v == nullptr) return out;
    const bool ok = v->is_array() && std::all_of(v->begin(), v->end(), [](const json& s) {
                      return s.is_array() && std::all_of(s.begin(), s.end(),
                                                         [](const json& n) { return asInt(n).has_value(); });
                    });
    if (!ok) {
      f.wrong(key, *v, "a list of lists of integers");
      return out;
    }
    for (const json& s : *v) {
      auto& shape = out.emplace_back();
      for (const json& n : s) shape.push_back(*asInt(n));
      tensorValues_ += s.size() + 1;
    }
    return out;
  }

  std::vector<std::string> strings(Fields& f, const char* key) {
    const json* v = f.find(key);
    if (v == nullptr) return {};
    if (!v->is_array() || !std::all_of(v->begin(), v->end(), [](const json& s) { return s.is_string(); })) {
      f.wrong(key, *v, "a list of strings");
      return {};
    }
    tensorValues_ += v->size();
    return v->get<std::vector<std::string>>();
  }

  // "name (filename:line)" of frames[0].
  std::string topFrame(Fields& f) {
    const json* v = f.find("frames");
    if (v == nullptr || (v->is_array() && v->empty())) return {};
    if (!v->is_array() || !(*v)[0].is_object()) {
      f.wrong("frames", *v, "a list of {name, filename, line} dicts");
      return {};
    }
    const json& top = (*v)[0];
    auto str = [&top](const char* k) {
      auto it = top.find(k);
      return it == top.end() ? std::string("?") : it->is_string() ? it->get<std::string>() : it->dump();
    };
    return fmt::format("{} ({}:{})", str("name"), str("filename"), str("line"));
  }

  // pg_config: {name: {name, desc, ranks}}, ranks a string "[0, 1]" or a list.
  void groups(Fields& f, const json& cfg) {
    if (!cfg.is_object()) return f.wrong("pg_config", cfg, "a dict");
    for (const auto& [key, value] : cfg.items()) {
      FrGroup g;
      if (!value.is_object()) {
        wrong("pg_config", key, value, "a dict");
        continue;
      }
      Fields gf(*this, value, fmt::format("pg_config['{}']", key));
      g.name = gf.text("name");
      if (g.name.empty()) g.name = key;
      g.desc = gf.text("desc");
      if (const json* r = gf.find("ranks")) {
        std::optional<std::vector<int>> ranks;
        if (r->is_string()) ranks = parseRanks(r->get_ref<const std::string&>());
        if (r->is_array() && std::all_of(r->begin(), r->end(), [](const json& n) {
              auto i = asInt(n);
              return i && *i >= 0 && *i <= INT32_MAX;
            })) {
          ranks = r->get<std::vector<int>>();
        }
        if (ranks)
          g.ranks = std::move(*ranks), g.ranksKnown = true;
        else
          gf.wrong("ranks", *r, "a list of ranks such as \"[0, 1]\"");
      }
      d_.groups[key] = std::move(g);
    }
  }

  // pg_status: {pg_id: {last_enqueued_collective, last_started_collective, last_completed_collective}}.
  // -1 (nothing yet) is kept as torch wrote it.
  void pgStatus(Fields& f, const json& st) {
    if (!st.is_object()) return f.wrong("pg_status", st, "a dict");
    for (const auto& [key, value] : st.items()) {
      if (!value.is_object()) {
        wrong("pg_status", key, value, "a dict");
        continue;
      }
      Fields sf(*this, value, fmt::format("pg_status['{}']", key));
      d_.pgStatus[key] =
          FrPgStatus{sf.integer("last_enqueued_collective"), sf.integer("last_started_collective"),
                     sf.integer("last_completed_collective")};
    }
  }

  RankDump& d_;
  std::size_t seen_ = 0;            // entries met, skipped ones included
  std::size_t dropped_ = 0;         // the oldest entries beyond kMaxEntries
  std::size_t tensorValues_ = 0;    // sizes and dtypes kept
  std::size_t tensorsDropped_ = 0;  // entries whose sizes and dtypes were not kept
  std::map<std::string, int> warned_;
};

void parsePickle(std::string_view bytes, const std::string& name, Converter& conv) {
  PickleOptions options;
  options.streamKey = "entries";
  options.onElement = [&conv](json&& e) { conv.entry(e); };
  options.maxDepth = kMaxDepth;
  const json top = readPickle(bytes, name, options);
  if (!top.is_object()) {
    throw ConfigError(
        fmt::format("{}: the pickle holds {}, not the dict of a Flight Recorder dump; is it the right "
                    "file?",
                    name, describe(top)));
  }
  conv.top(top);
}

// nlohmann's parser callback hands each complete element of the top-level "entries" list to the
// converter and discards it, so only one entry is held at a time.
void parseJson(std::string_view bytes, const std::string& name, Converter& conv) {
  std::string topKey;
  bool inEntries = false;
  std::size_t held = 0;
  auto onEvent = [&](int depth, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (static_cast<std::size_t>(depth) > kMaxDepth) {
      throw ConfigError(fmt::format(
          "{}: the JSON nests deeper than {} levels; it is not a Flight Recorder dump.", name, kMaxDepth));
    }
    if (depth == 1 && event == E::key) topKey = parsed.get<std::string>();
    if (depth == 1 && (event == E::array_start || event == E::object_start)) {
      inEntries = topKey == "entries" && event == E::array_start;
    }
    if (inEntries && depth == 2 && (event == E::object_end || event == E::array_end || event == E::value)) {
      conv.entry(parsed);
      held = 0;
      return false;
    }
    if (++held > kMaxJsonValues) {
      throw ConfigError(
          fmt::format("{}: the JSON holds more than {} values besides its entries; dsdiag refuses it "
                      "rather than exhaust this node's memory.",
                      name, kMaxJsonValues));
    }
    return true;
  };
  json top;
  try {
    top = json::parse(bytes.begin(), bytes.end(), onEvent);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e9999
    throw ConfigError(
        fmt::format("{}: not valid JSON ({}); the file is truncated or is not a Flight Recorder JSON "
                    "dump.",
                    name, e.what()));
  }
  if (!top.is_object()) {
    throw ConfigError(
        fmt::format("{}: the JSON holds {}, not the object of a Flight Recorder dump; is it the right "
                    "file?",
                    name, describe(top)));
  }
  conv.top(top);
}

std::string readFile(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec)
    throw IoError(fmt::format("cannot read {}: {}. Check the path and its permissions.", path, ec.message()));
  if (!fs::is_regular_file(st)) {
    throw ConfigError(
        fmt::format("{} is not a regular file; a Flight Recorder dump is a file written by torch.", path));
  }
  const auto size = fs::file_size(path, ec);
  if (ec) throw IoError(fmt::format("cannot read {}: {}.", path, ec.message()));
  sys::checkMemory(static_cast<double>(size), sys::readMemoryInfo(), fmt::format("reading the dump {}", path),
                   "Read it on a node with more free memory.");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot open {}: {}. Check its permissions.", path, errnoText(errno)));
  std::string bytes(size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  bytes.resize(static_cast<std::size_t>(in.gcount()));  // a file that shrank meanwhile reads as truncated
  return bytes;
}

// Two dumps of one rank hold the same records when the ops and watermarks agree (JSON has no
// frames, so those are not compared).
bool sameRecords(const RankDump& a, const RankDump& b) {
  auto key = [](const FrEntry& e) {
    return std::tie(e.recordId, e.pgId, e.collectiveSeqId, e.p2pSeqId, e.profilingName, e.state);
  };
  auto status = [](const FrPgStatus& s) { return std::tie(s.lastEnqueued, s.lastStarted, s.lastCompleted); };
  return a.version == b.version && a.entries.size() == b.entries.size() &&
         a.pgStatus.size() == b.pgStatus.size() &&
         std::equal(a.entries.begin(), a.entries.end(), b.entries.begin(),
                    [&](const FrEntry& x, const FrEntry& y) { return key(x) == key(y); }) &&
         std::equal(a.pgStatus.begin(), a.pgStatus.end(), b.pgStatus.begin(),
                    [&](const auto& x, const auto& y) {
                      return x.first == y.first && status(x.second) == status(y.second);
                    });
}

// The dump files a directory or glob names: regular files whose names end in a rank.
std::vector<std::string> dumpFilesIn(const std::string& arg, bool isDirectory) {
  std::vector<std::string> paths;
  if (isDirectory) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(arg, ec)) paths.push_back(e.path().string());
  } else {
    glob_t g{};
    if (::glob(arg.c_str(), 0, nullptr, &g) == 0) paths.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    ::globfree(&g);
  }
  std::erase_if(paths, [](const std::string& p) {
    std::error_code ec;
    return !fs::is_regular_file(p, ec) || !rankFromFileName(fs::path(p).filename().string());
  });
  return paths;
}

}  // namespace

std::optional<int> rankFromFileName(std::string_view name) {
  for (std::string_view suffix : {".json", ".pickle", ".pkl"}) {
    if (name.ends_with(suffix)) {
      name.remove_suffix(suffix.size());
      break;
    }
  }
  std::size_t digits = 0;
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[name.size() - 1 - digits])))
    ++digits;
  int rank = 0;
  const char* b = name.data() + name.size() - digits;
  if (digits == 0 || std::from_chars(b, name.data() + name.size(), rank).ec != std::errc())
    return std::nullopt;
  return rank;
}

RankDump parseDump(std::string_view bytes, const std::string& name, int rank) {
  RankDump dump;
  dump.rank = rank;
  dump.file = name;
  const std::size_t start = bytes.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) {
    throw ConfigError(
        fmt::format("{} is empty: the rank was probably killed before it finished writing its dump "
                    "(with TORCH_NCCL_ASYNC_ERROR_HANDLING=1 torch aborts first; use 3).",
                    name));
  }
  const auto first = static_cast<std::uint8_t>(bytes[start]);
  Converter conv(dump);
  if (start == 0 && (first == 0x80 || first == '(' || first == '}')) {  // PROTO, or protocol 0/1's dict
    dump.format = "pickle";
    parsePickle(bytes, name, conv);
  } else if (first == '{') {
    dump.format = "json";
    parseJson(bytes.substr(start), name, conv);
  } else {
    throw ConfigError(
        fmt::format("{} is neither a pickle nor JSON (it starts with byte 0x{:02x}); a Flight Recorder "
                    "dump is one of those. Is it the right file?",
                    name, first));
  }
  conv.finish();
  return dump;
}

RankDump readDump(const std::string& path, int rank) { return parseDump(readFile(path), path, rank); }

DumpSet loadDumps(const std::vector<std::string>& args) {
  DumpSet set;
  std::vector<std::string> files;
  for (const std::string& arg : args) {
    std::error_code ec;
    const auto st = fs::status(arg, ec);
    const bool isDirectory = fs::is_directory(st);
    if (fs::exists(st) && !isDirectory) {
      files.push_back(arg);
      continue;
    }
    if (!isDirectory && arg.find_first_of("*?[") == std::string::npos) {
      set.problems.push_back(fmt::format("{} does not exist; check the path.", arg));
      continue;
    }
    std::vector<std::string> found = dumpFilesIn(arg, isDirectory);
    if (found.empty()) {
      set.problems.push_back(
          fmt::format("{} {} no file whose name ends in a rank number, as torch names its dumps.", arg,
                      isDirectory ? "holds" : "matches"));
    }
    files.insert(files.end(), found.begin(), found.end());
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  if (files.empty()) {
    std::string where;
    for (const auto& a : args) where += (where.empty() ? "" : ", ") + a;
    throw ConfigError(fmt::format(
        "no Flight Recorder dumps found in {}; torch writes them to ${{TORCH_FR_DUMP_TEMP_FILE}}<rank> "
        "(default "
        "~/.cache/torch/comm_lib_trace_rank_<rank>; older torch: ${{TORCH_NCCL_DEBUG_INFO_TEMP_FILE}}, "
        "default "
        "/tmp/nccl_trace_rank_<rank>) when TORCH_FR_DUMP_ON_TIMEOUT=1 (or TORCH_NCCL_DUMP_ON_TIMEOUT=1) and "
        "TORCH_FR_BUFFER_SIZE are set. Give the files, their directory or a glob such as 'dumps/*rank_*'.",
        where.empty() ? "(no paths given)" : where));
  }
  for (const std::string& file : files) {
    const auto rank = rankFromFileName(fs::path(file).filename().string());
    if (!rank) {
      set.problems.push_back(
          fmt::format("{}: its name does not end in a rank number (torch names dumps "
                      "<prefix><rank>), so dsdiag cannot tell whose dump it is; rename it, e.g. "
                      "to rank_3.",
                      file));
      continue;
    }
    RankDump dump;
    try {
      dump = readDump(file, *rank);
    } catch (const ds::Error& e) {
      set.problems.push_back(e.what());
      continue;
    }
    auto [it, fresh] = set.ranks.try_emplace(*rank, std::move(dump));
    if (fresh) continue;
    RankDump& kept = it->second;
    if (kept.format != dump.format && sameRecords(kept, dump)) {
      set.problems.push_back(
          fmt::format("note: {} and {} are the same dump of rank {} in two formats; dsdiag uses "
                      "the pickle.",
                      kept.file, dump.file, *rank));
      if (dump.format == "pickle") kept = std::move(dump);
    } else {
      set.problems.push_back(
          fmt::format("{} and {} are both dumps of rank {}; dsdiag uses {} (the first by name) "
                      "and ignores {}.",
                      kept.file, dump.file, *rank, kept.file, dump.file));
    }
  }
  return set;
}

}  // namespace ds::diag::hang
