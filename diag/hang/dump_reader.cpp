#include "diag/hang/dump_reader.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <tuple>

#include "diag/hang/pickle.h"
#include "engine/common/error.h"
#include "engine/common/unique_fd.h"
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

// parseRanks, remembering the last long texts this thread parsed: every dump of a job writes the
// same "[0, 1, ..., 16383]" for the world group, 110 KB that need not be parsed 16,384 times, and the
// members of the data-parallel group its rank is in (one of eight with tensor parallelism 8; a thread
// reads every other rank).
std::optional<std::vector<int>> parseRanksCached(const std::string& text) {
  constexpr std::size_t kWorth = 4096, kKept = 32;
  if (text.size() < kWorth) return parseRanks(text);
  thread_local std::vector<std::pair<std::string, std::optional<std::vector<int>>>> cache;
  for (std::size_t i = 0; i < cache.size(); ++i) {
    if (cache[i].first == text) {
      std::rotate(cache.begin(), cache.begin() + static_cast<std::ptrdiff_t>(i), cache.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return cache.front().second;
    }
  }
  auto parsed = parseRanks(text);
  if (cache.size() == kKept) cache.pop_back();
  cache.insert(cache.begin(), {text, parsed});
  return parsed;
}

// Whether n bytes at a and b are equal. Most texts compared are a few bytes: eight at a time here,
// the tail as an overlapping word, without a call to memcmp.
inline bool sameBytes(const char* a, const char* b, std::size_t n) {
  auto word = [](const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  };
  auto half = [](const char* p) {
    std::uint32_t w;
    std::memcpy(&w, p, 4);
    return w;
  };
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 <= n; i += 8)
      if (word(a + i) != word(b + i)) return false;
    return word(a + n - 8) == word(b + n - 8);
  }
  if (n >= 4) return half(a) == half(b) && half(a + n - 4) == half(b + n - 4);
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// dst = v, skipped when dst holds it already: an entry's slot is reused from an earlier dump's entry,
// which usually had the same group, op and state, and a comparison costs a fraction of an assignment.
void setText(std::string& dst, std::string_view v) {
  if (dst.size() == v.size() && sameBytes(dst.data(), v.data(), v.size())) return;
  dst.assign(v);
}

// The two forms a dump's values come in, read alike by the converter: nlohmann's JSON (the JSON
// dump, and the top level of a pickle) and the pickle reader's own nodes (the entries of a pickle,
// read in place without building JSON; pickle.h).
struct JsonNode {
  const json* j;
  bool absent() const { return j->is_null(); }
  bool isString() const { return j->is_string(); }
  std::string_view str() const { return j->get_ref<const std::string&>(); }
  std::optional<std::int64_t> asInt() const { return hang::asInt(*j); }
  bool isNumber() const { return j->is_number(); }
  double number() const { return j->get<double>(); }
  bool isBool() const { return j->is_boolean(); }
  bool boolean() const { return j->get<bool>(); }
  bool isArray() const { return j->is_array(); }
  bool isObject() const { return j->is_object(); }
  std::size_t size() const { return j->size(); }
  JsonNode item(std::size_t i) const { return {&(*j)[i]}; }
  std::optional<JsonNode> find(std::string_view key) const {
    auto it = j->find(key);
    return it == j->end() ? std::nullopt : std::optional<JsonNode>(JsonNode{&*it});
  }
  // f(key, handle, absent, stable) for each field; at(handle) is the field's value; `stable`: the
  // key's characters stay where they are for the whole file (never, for JSON: each entry is freed).
  using Handle = const json*;
  template <class F>
  void forEachField(F&& f) const {
    for (const auto& [k, v] : j->items()) f(std::string_view(k), &v, v.is_null(), false);
  }
  JsonNode at(Handle h) const { return {h}; }
  const json& toJson() const { return *j; }
};

struct PickleRef {
  PickleNode n;
  bool absent() const { return n.isNone(); }
  bool isString() const { return n.isString(); }
  std::string_view str() const { return n.str(); }
  // As asInt() above: torch's JSON writes some integers as text, and a pickle may too.
  std::optional<std::int64_t> asInt() const {
    if (n.isInteger()) return n.int64();
    if (!n.isString()) return std::nullopt;
    const std::string_view s = n.str();
    std::int64_t i = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty() ? std::optional(i) : std::nullopt;
  }
  bool isNumber() const { return n.isNumber(); }
  double number() const { return n.number(); }
  bool isBool() const { return n.isBool(); }
  bool boolean() const { return n.boolean(); }
  bool isArray() const { return n.isArray(); }
  bool isObject() const { return n.isDict(); }
  std::size_t size() const { return n.size(); }
  PickleRef item(std::size_t i) const { return {n.item(i)}; }
  std::optional<PickleRef> find(std::string_view key) const {
    auto v = n.find(key);
    return v ? std::optional<PickleRef>(PickleRef{*v}) : std::nullopt;
  }
  using Handle = std::uint32_t;  // the pair's index
  template <class F>
  void forEachField(F&& f) const {
    const std::size_t pairs = n.size();
    for (std::size_t i = 0; i < pairs; ++i) {
      const PickleNode k = n.key(i);
      f(k.str(), static_cast<Handle>(i), n.value(i).isNone(), k.inFile());
    }
  }
  PickleRef at(Handle h) const { return {n.value(h)}; }
  json toJson() const { return n.toJson(); }
};

// The fields of an entry that FrEntry has a slot for; the others (thread_id, thread_name, ...) are
// dropped.
enum Field : std::uint8_t {
  kRecordId, kPgId, kProcessGroup, kCollectiveSeqId, kP2pSeqId, kOpId, kProfilingName, kInputSizes,
  kOutputSizes, kInputDtypes, kOutputDtypes, kState, kTimeCreatedNs, kTimeStartedNs, kTimeCompletedNs,
  kDurationMs, kTimeoutMs, kIsP2p, kRetired, kFrames, kFieldCount
};
constexpr std::string_view kFieldNames[kFieldCount] = {
    "record_id",      "pg_id",         "process_group", "collective_seq_id", "p2p_seq_id",
    "op_id",          "profiling_name", "input_sizes",  "output_sizes",      "input_dtypes",
    "output_dtypes",  "state",         "time_created_ns", "time_discovered_started_ns",
    "time_discovered_completed_ns", "duration_ms", "timeout_ms", "is_p2p", "retired", "frames"};

// By name length, the fields of that length (at most 4 share one): a key is compared with those only.
constexpr std::size_t kLongestField = 32;
constexpr auto kFieldsBySize = [] {
  std::array<std::array<std::int8_t, 4>, kLongestField + 1> t{};
  for (auto& row : t) row.fill(-1);
  for (int f = 0; f < kFieldCount; ++f) {
    auto& row = t[kFieldNames[f].size()];
    *std::find(row.begin(), row.end(), std::int8_t{-1}) = static_cast<std::int8_t>(f);
  }
  return t;
}();

int fieldOf(std::string_view key) {
  if (key.size() > kLongestField) return -1;
  for (std::int8_t f : kFieldsBySize[key.size()]) {
    if (f < 0) return -1;
    if (key == kFieldNames[f]) return f;
  }
  return -1;
}

// Turns the generic form of a dump (from the pickle or the JSON) into a RankDump, one entry at a
// time.
class Converter {
 public:
  explicit Converter(RankDump& dump) : d_(dump) {}

  // Reads typed fields of one dict. Missing and None fields stay unknown quietly; a field of the
  // wrong type stays unknown with a warning. `where` names the dict in warnings; it is made only
  // when one is written.
  template <class Node>
  class Fields {
   public:
    Fields(Converter& c, const Node& obj, std::function<std::string()> where)
        : c_(c), obj_(obj), where_(std::move(where)) {}

    std::optional<Node> find(const char* key) const {
      auto v = obj_.find(key);
      return v && !v->absent() ? v : std::nullopt;
    }
    void wrong(const std::string& key, const Node& v, std::string_view expected) {
      c_.wrong(where_(), key, v.toJson(), expected);
    }
    std::optional<std::int64_t> integer(const char* key) { return integerOf(key, find(key)); }
    std::optional<std::int64_t> integerOf(const char* key, const std::optional<Node>& v) {
      if (!v) return std::nullopt;
      if (auto i = v->asInt()) return i;
      wrong(key, *v, "an integer");
      return std::nullopt;
    }
    std::optional<double> numberOf(const char* key, const std::optional<Node>& v) {
      if (!v) return std::nullopt;
      if (v->isNumber()) return v->number();
      wrong(key, *v, "a number");
      return std::nullopt;
    }
    std::optional<bool> flagOf(const char* key, const std::optional<Node>& v) {
      if (!v) return std::nullopt;
      if (v->isBool()) return v->boolean();
      wrong(key, *v, "True or False");
      return std::nullopt;
    }
    std::string text(const char* key) { return textOf(key, find(key)); }
    std::string textOf(const char* key, const std::optional<Node>& v) {
      if (!v) return {};
      if (v->isString()) return std::string(v->str());
      wrong(key, *v, "a string");
      return {};
    }
    // An id written as an int (torch) or a string: its text.
    std::string idOf(const char* key, const std::optional<Node>& v) {
      if (!v) return {};
      if (v->isString()) return std::string(v->str());
      if (auto i = v->asInt()) return std::to_string(*i);
      wrong(key, *v, "an id");
      return {};
    }

   private:
    Converter& c_;
    Node obj_;
    std::function<std::string()> where_;
  };

  // An entry's fields, found in one pass over its keys (a later duplicate key wins, as in Python).
  template <class Node>
  class EntryFields {
   public:
    EntryFields(Converter& c, const Node& e, std::size_t index) : c_(c), e_(e), index_(index) {
      e.forEachField([this](std::string_view key, typename Node::Handle h, bool absent, bool stable) {
        const int f = stable ? c_.cachedFieldOf(key) : fieldOf(key);
        if (f < 0) return;
        h_[f] = h;
        if (absent)  // None is as good as missing; a later key of the same name wins
          has_ &= ~(1u << f);
        else
          has_ |= 1u << f;
      });
      if (auto r = (*this)[kRecordId]) recordId_ = r->asInt();
    }
    std::optional<Node> operator[](Field f) const {
      return (has_ >> f) & 1u ? std::optional<Node>(e_.at(h_[f])) : std::nullopt;
    }
    std::string where() const {
      return recordId_ ? fmt::format("entry {} (record_id {})", index_, *recordId_) : fmt::format("entry {}", index_);
    }
    void wrong(Field f, const Node& v, std::string_view expected) {
      c_.wrong(where(), std::string(kFieldNames[f]), v.toJson(), expected);
    }
    std::optional<std::int64_t> integer(Field f) {
      if (!((has_ >> f) & 1u)) return std::nullopt;
      const Node v = e_.at(h_[f]);
      if (auto i = v.asInt()) return i;
      wrong(f, v, "an integer");
      return std::nullopt;
    }
    std::optional<double> number(Field f) {
      const auto v = (*this)[f];
      if (!v) return std::nullopt;
      if (v->isNumber()) return v->number();
      wrong(f, *v, "a number");
      return std::nullopt;
    }
    std::optional<bool> flag(Field f) {
      const auto v = (*this)[f];
      if (!v) return std::nullopt;
      if (v->isBool()) return v->boolean();
      wrong(f, *v, "True or False");
      return std::nullopt;
    }
    std::string text(Field f) {
      const auto v = (*this)[f];
      if (!v) return {};
      if (v->isString()) return std::string(v->str());
      wrong(f, *v, "a string");
      return {};
    }
    std::string id(Field f) {
      const auto v = (*this)[f];
      if (!v) return {};
      if (v->isString()) return std::string(v->str());
      if (auto i = v->asInt()) return std::to_string(*i);
      wrong(f, *v, "an id");
      return {};
    }

   private:
    Converter& c_;
    const Node& e_;
    std::size_t index_;
    std::optional<std::int64_t> recordId_;
    typename Node::Handle h_[kFieldCount];
    std::uint32_t has_ = 0;  // bit f: field f is present and not None
  };

  template <class Node>
  void entry(const Node& e) {
    const std::size_t index = seen_++;
    if (!e.isObject()) {
      warn("entries", fmt::format("{}: entry {} is {}, not a dict; it is skipped.", d_.file, index,
                                  describe(e.toJson())));
      return;
    }
    EntryFields<Node> f(*this, e, index);
    // A slot of a dump read before may be reused (parseDumpInto): every field is set below, and
    // strings and vectors keep their buffers, so that a dump of 2,000 entries allocates nothing.
    FrEntry& out = next();
    out.recordId = f.integer(kRecordId);
    out.pgId = f.id(kPgId);
    out.pgName.clear();
    out.pgDesc.clear();
    if (const auto pg = f[kProcessGroup]) {
      if (pg->isArray() && pg->size() == 2 && pg->item(0).isString() && pg->item(1).isString()) {
        out.pgName = pg->item(0).str();
        out.pgDesc = pg->item(1).str();
      } else {
        f.wrong(kProcessGroup, *pg, "a (name, desc) pair of strings");
      }
    }
    out.collectiveSeqId = f.integer(kCollectiveSeqId);
    out.p2pSeqId = f.integer(kP2pSeqId);
    out.opId = f.integer(kOpId);
    out.profilingName = f.text(kProfilingName);
    if (!splitProfilingName(out))
      wrong(f.where(), "profiling_name", json(out.profilingName), "a name such as 'nccl:send 1->2' with a peer rank");
    const bool keepTensors = tensorValues_ < kMaxTensorValues;
    if (keepTensors) {
      shapes(f, kInputSizes, out.inputSizes);
      shapes(f, kOutputSizes, out.outputSizes);
      strings(f, kInputDtypes, out.inputDtypes);
      strings(f, kOutputDtypes, out.outputDtypes);
    } else {
      out.inputSizes.clear(), out.outputSizes.clear(), out.inputDtypes.clear(), out.outputDtypes.clear();
      ++tensorsDropped_;
    }
    out.state = f.text(kState);
    out.timeCreatedNs = f.integer(kTimeCreatedNs);
    // The pickle has None where torch's JSON writes 0: neither is a time.
    out.timeDiscoveredStartedNs = f.integer(kTimeStartedNs);
    out.timeDiscoveredCompletedNs = f.integer(kTimeCompletedNs);
    if (out.timeDiscoveredStartedNs == 0) out.timeDiscoveredStartedNs.reset();
    if (out.timeDiscoveredCompletedNs == 0) out.timeDiscoveredCompletedNs.reset();
    out.durationMs = f.number(kDurationMs);
    out.timeoutMs = f.integer(kTimeoutMs);
    out.isP2p = f.flag(kIsP2p);
    out.retired = f.flag(kRetired);
    topFrame(f, out.topFrame);
  }

  // The top-level dict, its "entries" already given to entry() (or still in it, if the reader
  // could not stream them).
  void top(const json& t) {
    Fields<JsonNode> f(*this, JsonNode{&t}, [] { return std::string("top level"); });
    d_.version = f.text("version");
    d_.commLibVersion = f.text("comm_lib_version");
    if (d_.commLibVersion.empty()) d_.commLibVersion = f.text("nccl_version");
    if (const auto e = f.find("entries")) {
      if (e->isArray()) {
        for (const json& x : t.at("entries")) entry(JsonNode{&x});
      } else {
        f.wrong("entries", *e, "a list");
      }
    }
    if (const auto cfg = f.find("pg_config")) groups(f, *cfg->j);
    if (const auto st = f.find("pg_status")) pgStatus(f, *st->j);
    for (const auto& [key, value] : t.items()) {
      static constexpr std::string_view kKnown[] = {"version", "comm_lib_version", "nccl_version",
                                                    "entries", "pg_config",        "pg_status"};
      if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) d_.extra[key] = value;
    }
  }

  void finish() {
    d_.entries.resize(count_);  // slots of an earlier dump beyond this one's entries
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

  // The slot of the next entry. The newest kMaxEntries are kept; the oldest are dropped in batches,
  // so adding stays O(1).
  FrEntry& next() {
    FrEntry& e = slot();
    ++count_;
    return e;
  }
  // The slot next() returns, not yet taken.
  FrEntry& slot() {
    if (count_ >= kMaxEntries + kMaxEntries / 4) {
      const std::size_t n = count_ - kMaxEntries;
      d_.entries.erase(d_.entries.begin(), d_.entries.begin() + static_cast<std::ptrdiff_t>(n));
      count_ -= n;
      dropped_ += n;
    }
    if (count_ == d_.entries.size()) d_.entries.emplace_back();
    return d_.entries[count_];
  }

  // "nccl:all_reduce", "gloo:broadcast", "nccl:send 1->2", "nccl:recv 3<-0". The peer is b in "a->b"
  // and "a<-b"; torch writes both numbers as ranks within the group, not global ranks.
  // False when a p2p name has no readable peer (the caller warns).
  static bool splitProfilingName(FrEntry& e) {
    const std::string_view name = e.profilingName;
    e.p2pPeer.reset();
    const std::size_t colon = name.find(':');
    setText(e.backend, colon == std::string::npos ? "" : name.substr(0, colon));
    const std::string_view rest = colon == std::string::npos ? name : name.substr(colon + 1);
    const std::size_t space = rest.find(' ');
    setText(e.op, rest.substr(0, space));
    if (space == std::string::npos) return true;
    std::size_t arrow = rest.find("->", space);
    if (arrow == std::string::npos) arrow = rest.find("<-", space);
    const char* end = rest.data() + rest.size();
    const char* b = arrow == std::string::npos ? end : rest.data() + arrow + 2;
    int peer = -1;
    if (auto [p, ec] = std::from_chars(b, end, peer); ec == std::errc() && p == end && peer >= 0) {
      e.p2pPeer = peer;
      return true;
    }
    return false;
  }

  template <class Node>
  void shapes(EntryFields<Node>& f, Field key, std::vector<std::vector<std::int64_t>>& out) {
    const auto v = f[key];
    if (!v) return out.clear();
    // One pass: read as it comes; a value of the wrong type drops what was read.
    bool ok = v->isArray();
    const std::size_t n = ok ? v->size() : 0;
    out.resize(n);  // shrinking keeps the outer buffer; each shape keeps its own
    std::size_t values = 0;
    for (std::size_t i = 0; ok && i < n; ++i) {
      const Node s = v->item(i);
      auto& shape = out[i];
      shape.clear();
      ok = s.isArray();
      const std::size_t dims = ok ? s.size() : 0;
      for (std::size_t k = 0; ok && k < dims; ++k) {
        const auto d = s.item(k).asInt();
        ok = d.has_value();
        if (ok) shape.push_back(*d);
      }
      values += dims + 1;
    }
    if (!ok) {
      out.clear();
      f.wrong(key, *v, "a list of lists of integers");
      return;
    }
    tensorValues_ += values;
  }

  template <class Node>
  void strings(EntryFields<Node>& f, Field key, std::vector<std::string>& out) {
    const auto v = f[key];
    if (!v) return out.clear();
    bool ok = v->isArray();
    const std::size_t n = ok ? v->size() : 0;
    out.resize(n);
    for (std::size_t i = 0; ok && i < n; ++i) {
      const Node x = v->item(i);
      ok = x.isString();
      if (ok) out[i] = x.str();
    }
    if (!ok) {
      out.clear();
      f.wrong(key, *v, "a list of strings");
      return;
    }
    tensorValues_ += n;
  }

  // "name (filename:line)" of frames[0]. Entries of one call site share their frames: the text of the
  // last one is kept and reused when the same frame comes again.
  template <class Node>
  void topFrame(EntryFields<Node>& f, std::string& out) {
    out.clear();
    const auto v = f[kFrames];
    if (!v || (v->isArray() && v->size() == 0)) return;
    if (!v->isArray() || !v->item(0).isObject()) {
      f.wrong(kFrames, *v, "a list of {name, filename, line} dicts");
      return;
    }
    const Node top = v->item(0);
    auto part = [&top](const char* k, std::string& text) -> std::string_view {
      const auto x = top.find(k);
      if (!x) return "?";
      if (x->isString()) return x->str();
      if (const auto i = x->asInt()) return text = std::to_string(*i);
      return text = x->toJson().dump();
    };
    std::string t1, t2, t3;
    const std::string_view name = part("name", t1), file = part("filename", t2), line = part("line", t3);
    frameText(name, file, line, out);
  }

  // out = "name (file:line)", the text of the last frame kept for the next entry of the same call site.
  void frameText(std::string_view name, std::string_view file, std::string_view line, std::string& out) {
    lastFrame_.valid = false;  // fastEntry sets it again when it called
    if (name != frameName_ || file != frameFile_ || line != frameLine_) {
      frameText_ = fmt::format("{} ({}:{})", name, file, line);
      frameName_ = name, frameFile_ = file, frameLine_ = line;
    }
    setText(out, frameText_);
  }

 public:
  // entry() for an entry of a pickle, in one pass over its pairs, when every field it reads is of the
  // type entry() expects (torch's and Python's every entry). Returns false otherwise, having changed
  // nothing but the contents of the slot entry() then fills (entry() applies the rules and warns).
  bool fastEntry(const PickleNode& e) {
    if (!e.isDict() || tensorValues_ >= kMaxTensorValues) return false;
    const std::size_t pairs = e.size();
    // Each field's last pair (index + 1; 0: none), as Python keeps the last of a repeated key.
    std::array<std::uint32_t, kFieldCount> at{};
    for (std::size_t i = 0; i < pairs; ++i) {
      const PickleNode k = e.key(i);
      const std::string_view key = k.str();
      int f;
      if (i < keyAt_.size() && keyAt_[i].ptr == key.data() && keyAt_[i].len == key.size() && k.inFile()) {
        f = keyAt_[i].field;  // torch writes the keys of every entry in one order: one comparison each
      } else {
        f = k.inFile() ? cachedFieldOf(key) : fieldOf(key);
        if (i < keyAt_.size() && k.inFile()) keyAt_[i] = {key.data(), key.size(), f};
      }
      if (f >= 0) at[static_cast<std::size_t>(f)] = static_cast<std::uint32_t>(i + 1);
    }
    // The value of field f, nullopt when absent or None.
    auto value = [&](Field f) -> std::optional<PickleNode> {
      if (at[f] == 0) return std::nullopt;
      const PickleNode x = e.value(at[f] - 1);
      return x.isNone() ? std::nullopt : std::optional<PickleNode>(x);
    };
    auto integer = [&](Field f, std::optional<std::int64_t>& dst) {
      if (at[f] == 0) return dst.reset(), true;
      const PickleNode x = e.value(at[f] - 1);
      if (x.isNone()) return dst.reset(), true;
      dst = x.int64();
      return x.isInteger() && dst.has_value();
    };
    auto text = [&](Field f, std::string& dst) {
      const auto x = value(f);
      if (!x) return dst.clear(), true;
      return x->isString() && (setText(dst, x->str()), true);
    };
    auto flag = [&](Field f, std::optional<bool>& dst) {
      const auto x = value(f);
      if (!x) return dst.reset(), true;
      return x->isBool() && (dst = x->boolean(), true);
    };
    std::size_t tensorValues = 0;
    // A list field: each item into dst[i] by `read`, which says false when it is not what entry()
    // expects.
    auto list = [&](Field f, auto& dst, auto&& read) {
      const auto x = value(f);
      if (!x) return dst.clear(), true;
      if (!x->isArray()) return false;
      const std::size_t n = x->size();
      dst.resize(n);
      for (std::size_t i = 0; i < n; ++i)
        if (!read(x->item(i), dst[i])) return false;
      return true;
    };
    auto shapes = [&](Field f, std::vector<std::vector<std::int64_t>>& dst) {
      return list(f, dst, [&](const PickleNode& s, std::vector<std::int64_t>& shape) {
        if (!s.isArray()) return false;
        const std::size_t dims = s.size();
        shape.resize(dims);
        for (std::size_t k = 0; k < dims; ++k) {
          const PickleNode d = s.item(k);
          const auto v = d.int64();
          if (!d.isInteger() || !v) return false;
          shape[k] = *v;
        }
        tensorValues += dims + 1;
        return true;
      });
    };
    auto strings = [&](Field f, std::vector<std::string>& dst) {
      return list(f, dst, [&](const PickleNode& s, std::string& text) {
        if (!s.isString()) return false;
        setText(text, s.str());
        ++tensorValues;
        return true;
      });
    };
    FrEntry& out = slot();
    if (!integer(kRecordId, out.recordId)) return false;
    if (const auto id = value(kPgId)) {
      if (id->isString()) {
        setText(out.pgId, id->str());
      } else if (const auto i = id->int64(); id->isInteger() && i) {
        char digits[24];  // formatted without a new string: the slot's text is usually this already
        const auto end = std::to_chars(digits, digits + sizeof digits, *i).ptr;
        setText(out.pgId, std::string_view(digits, static_cast<std::size_t>(end - digits)));
      } else {
        return false;
      }
    } else {
      out.pgId.clear();
    }
    if (const auto pg = value(kProcessGroup)) {
      if (!pg->isArray() || pg->size() != 2 || !pg->item(0).isString() || !pg->item(1).isString()) return false;
      setText(out.pgName, pg->item(0).str());
      setText(out.pgDesc, pg->item(1).str());
    } else {
      out.pgName.clear();
      out.pgDesc.clear();
    }
    if (!integer(kCollectiveSeqId, out.collectiveSeqId) || !integer(kP2pSeqId, out.p2pSeqId) ||
        !integer(kOpId, out.opId) || !text(kProfilingName, out.profilingName) || !splitProfilingName(out) ||
        !shapes(kInputSizes, out.inputSizes) || !shapes(kOutputSizes, out.outputSizes) ||
        !strings(kInputDtypes, out.inputDtypes) || !strings(kOutputDtypes, out.outputDtypes) ||
        !text(kState, out.state) || !integer(kTimeCreatedNs, out.timeCreatedNs) ||
        !integer(kTimeStartedNs, out.timeDiscoveredStartedNs) ||
        !integer(kTimeCompletedNs, out.timeDiscoveredCompletedNs) || !integer(kTimeoutMs, out.timeoutMs) ||
        !flag(kIsP2p, out.isP2p) || !flag(kRetired, out.retired)) {
      return false;
    }
    if (out.timeDiscoveredStartedNs == 0) out.timeDiscoveredStartedNs.reset();
    if (out.timeDiscoveredCompletedNs == 0) out.timeDiscoveredCompletedNs.reset();
    if (const auto d = value(kDurationMs)) {
      if (!d->isNumber()) return false;
      out.durationMs = d->number();
    } else {
      out.durationMs.reset();
    }
    out.topFrame.clear();
    if (const auto frames = value(kFrames); frames && !(frames->isArray() && frames->size() == 0)) {
      if (!frames->isArray() || !frames->item(0).isDict()) return false;
      const PickleNode top = frames->item(0);
      // name, filename and line in one pass over the pairs (the last of a repeated key wins).
      std::optional<PickleNode> name, file, line;
      for (std::size_t i = 0, n = top.size(); i < n; ++i) {
        const std::string_view key = top.key(i).str();
        auto is = [&key](std::string_view word) { return key.size() == word.size() && sameBytes(key.data(), word.data(), word.size()); };
        if (is("name")) name = top.value(i);
        else if (is("filename")) file = top.value(i);
        else if (is("line")) line = top.value(i);
      }
      if ((name && !name->isString()) || (file && !file->isString()) || !line || !line->isInteger() || !line->int64())
        return false;  // entry() says what it makes of them
      const std::string_view nameText = name ? name->str() : "?", fileText = file ? file->str() : "?";
      const std::int64_t lineNo = *line->int64();
      // The call site of the last entry, its strings where the file holds them: compared by address.
      const bool stable = (!name || name->inFile()) && (!file || file->inFile());
      if (stable && lastFrame_.valid && lastFrame_.name.data() == nameText.data() &&
          lastFrame_.name.size() == nameText.size() && lastFrame_.file.data() == fileText.data() &&
          lastFrame_.file.size() == fileText.size() && lastFrame_.line == lineNo) {
        setText(out.topFrame, frameText_);
      } else {
        frameText(nameText, fileText, std::to_string(lineNo), out.topFrame);
        lastFrame_ = {stable, nameText, fileText, lineNo};
      }
    }
    ++seen_, ++count_;
    tensorValues_ += tensorValues;
    return true;
  }

 private:

  // pg_config: {name: {name, desc, ranks}}, ranks a string "[0, 1]" or a list.
  void groups(Fields<JsonNode>& f, const json& cfg) {
    if (!cfg.is_object()) return f.wrong("pg_config", JsonNode{&cfg}, "a dict");
    for (const auto& [key, value] : cfg.items()) {
      FrGroup g;
      if (!value.is_object()) {
        wrong("pg_config", key, value, "a dict");
        continue;
      }
      const std::string where = fmt::format("pg_config['{}']", key);
      Fields<JsonNode> gf(*this, JsonNode{&value}, [&where] { return where; });
      g.name = gf.text("name");
      if (g.name.empty()) g.name = key;
      g.desc = gf.text("desc");
      if (const auto rn = gf.find("ranks")) {
        const json& r = *rn->j;
        std::optional<std::vector<int>> ranks;
        if (r.is_string()) ranks = parseRanksCached(r.get_ref<const std::string&>());
        if (r.is_array() && std::all_of(r.begin(), r.end(), [](const json& n) {
              auto i = asInt(n);
              return i && *i >= 0 && *i <= INT32_MAX;
            })) {
          ranks = r.get<std::vector<int>>();
        }
        if (ranks)
          g.ranks = std::move(*ranks), g.ranksKnown = true;
        else
          gf.wrong("ranks", *rn, "a list of ranks such as \"[0, 1]\"");
      }
      d_.groups[key] = std::move(g);
    }
  }

  // pg_status: {pg_id: {last_enqueued_collective, last_started_collective, last_completed_collective}}.
  // -1 (nothing yet) is kept as torch wrote it.
  void pgStatus(Fields<JsonNode>& f, const json& st) {
    if (!st.is_object()) return f.wrong("pg_status", JsonNode{&st}, "a dict");
    for (const auto& [key, value] : st.items()) {
      if (!value.is_object()) {
        wrong("pg_status", key, value, "a dict");
        continue;
      }
      const std::string where = fmt::format("pg_status['{}']", key);
      Fields<JsonNode> sf(*this, JsonNode{&value}, [&where] { return where; });
      d_.pgStatus[key] =
          FrPgStatus{sf.integer("last_enqueued_collective"), sf.integer("last_started_collective"),
                     sf.integer("last_completed_collective")};
    }
  }

  // fieldOf for a key whose characters stay put in the file: torch writes every key once and refers
  // back to it, so the same 20-odd pointers come in every entry and are compared once each.
  int cachedFieldOf(std::string_view key) {
    // A few probes into a table much larger than the keys in use, so that two keys rarely evict each
    // other (a 61-slot table missed on a few keys of every entry).
    const std::size_t h =
        static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(key.data()) * 0x9E3779B97F4A7C15ull) >> 55);
    for (std::size_t probe = 0; probe < 4; ++probe) {
      KeyCache& k = keyCache_[(h + probe) % keyCache_.size()];
      if (k.ptr == key.data() && k.len == key.size()) return k.field;
      if (k.ptr == nullptr) return (k = {key.data(), key.size(), fieldOf(key)}).field;
    }
    KeyCache& k = keyCache_[h % keyCache_.size()];
    k = {key.data(), key.size(), fieldOf(key)};
    return k.field;
  }

  RankDump& d_;
  struct KeyCache {
    const char* ptr = nullptr;
    std::size_t len = 0;
    int field = -1;
  };
  std::array<KeyCache, 512> keyCache_{};
  std::array<KeyCache, 32> keyAt_{};  // fastEntry: the key met at each position of the last entry
  struct LastFrame {
    bool valid = false;  // its strings are the file's own (they stay put while it is read)
    std::string_view name, file;
    std::int64_t line = 0;
  } lastFrame_;  // fastEntry: the top frame whose text frameText_ holds
  std::size_t seen_ = 0;            // entries met, skipped ones included
  std::size_t count_ = 0;           // entries written to d_.entries
  std::size_t dropped_ = 0;         // the oldest entries beyond kMaxEntries
  std::size_t tensorValues_ = 0;    // sizes and dtypes kept
  std::size_t tensorsDropped_ = 0;  // entries whose sizes and dtypes were not kept
  std::map<std::string, int> warned_;
  std::string frameName_, frameFile_, frameLine_, frameText_;  // the last top frame read
};

void parsePickle(std::string_view bytes, const std::string& name, Converter& conv, EntryPath path) {
  PickleOptions options;
  options.streamKey = "entries";
  options.lightElements = path == EntryPath::kFast;
  if (path == EntryPath::kFast) {
    options.onNode = [&conv](const PickleNode& e) {
      if (!conv.fastEntry(e)) conv.entry(PickleRef{e});
    };
  } else {
    options.onNode = [&conv](const PickleNode& e) { conv.entry(PickleRef{e}); };
  }
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
      conv.entry(JsonNode{&parsed});
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

// A file's bytes, held at the start of a page. The kernel copies a file out of the page cache with
// `rep movsb`, which runs about six times slower when the destination sits a few bytes past a page
// boundary the source is on (x86's 4K aliasing): exactly where malloc puts a block it maps for itself
// (offset 16), as it does for any buffer over 128 KiB. Measured on this VM reading 460 KB dumps: 1.3-1.5
// GB/s at offset 16, 8-9 GB/s at offset 0; on 16,384 dumps it was 4 s of the run's system time.
class FileBuffer {
 public:
  std::string_view view() const { return {data_.get(), size_}; }
  // Room for n bytes at the start of a page; keeps the storage when it is large enough.
  char* reserve(std::size_t n) {
    if (n > capacity_ || !data_) {
      const std::size_t page = 4096;
      const std::size_t want = std::max<std::size_t>(page, (n + page - 1) / page * page);
      data_.reset(static_cast<char*>(std::aligned_alloc(page, want)));
      if (!data_) throw std::bad_alloc();
      capacity_ = want;
    }
    size_ = 0;
    return data_.get();
  }
  void setSize(std::size_t n) { size_ = n; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  std::size_t capacity_ = 0, size_ = 0;
};

// The file's bytes into `buffer` (its storage reused from one file to the next).
void readFileInto(const std::string& path, FileBuffer& buffer) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec)
    throw IoError(fmt::format("cannot read {}: {}. Check the path and its permissions.", path, ec.message()));
  if (!fs::is_regular_file(st)) {
    throw ConfigError(
        fmt::format("{} is not a regular file; a Flight Recorder dump is a file written by torch.", path));
  }
  const UniqueFd owned(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const int fd = owned.get();
  if (fd < 0) throw IoError(fmt::format("cannot open {}: {}. Check its permissions.", path, errnoText(errno)));
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw IoError(fmt::format("cannot read {}: {}.", path, errnoText(errno)));
  const auto size = static_cast<std::size_t>(info.st_size);
  // /proc/meminfo is read only for a file that could matter: 16,384 dumps of 460 KB would read it
  // 16,384 times.
  if (size >= (std::size_t{64} << 20)) {
    sys::checkMemory(static_cast<double>(size), sys::readMemoryInfo(), fmt::format("reading the dump {}", path),
                     "Read it on a node with more free memory.");
  }
  char* data = buffer.reserve(size);
  std::size_t got = 0;
  while (got < size) {  // a file that shrank meanwhile reads as truncated; one that grew, as it was
    const ssize_t n = ::read(fd, data + got, size - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(fmt::format("cannot read {} (stopped after {} of its {} bytes): {}. Check the disk and "
                                "the file system it is on.",
                                path, got, size, errnoText(errno)));
    }
    got += static_cast<std::size_t>(n);
  }
  buffer.setSize(got);
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

RankDump parseDump(std::string_view bytes, const std::string& name, int rank, EntryPath path) {
  RankDump dump;
  parseDumpInto(bytes, name, rank, dump, path);
  return dump;
}

void parseDumpInto(std::string_view bytes, const std::string& name, int rank, RankDump& dump, EntryPath path) {
  dump.rank = rank;
  dump.file = name;
  dump.format.clear();
  dump.version.clear();
  dump.commLibVersion.clear();
  dump.groups.clear();
  dump.pgStatus.clear();
  dump.extra = json::object();
  dump.warnings.clear();
  const std::size_t start = bytes.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) {
    throw ConfigError(
        fmt::format("{} is empty: the rank was probably killed before it finished writing its dump "
                    "(with TORCH_NCCL_ASYNC_ERROR_HANDLING=1 torch aborts first; use 3).",
                    name));
  }
  const auto first = static_cast<std::uint8_t>(bytes[start]);
  // A torch pickle takes 150-250 bytes an entry; growing the vector from empty would move every
  // entry a dozen times. Bounded, so that a huge file does not reserve what it may not hold.
  dump.entries.reserve(std::min<std::size_t>(bytes.size() / 160, 1 << 16));
  Converter conv(dump);
  if (start == 0 && (first == 0x80 || first == '(' || first == '}')) {  // PROTO, or protocol 0/1's dict
    dump.format = "pickle";
    parsePickle(bytes, name, conv, path);
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
}

RankDump readDump(const std::string& path, int rank) {
  FileBuffer bytes;
  readFileInto(path, bytes);
  return parseDump(bytes.view(), path, rank);
}

DumpFiles findDumpFiles(const std::vector<std::string>& args) {
  DumpFiles out;
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
      out.problems.push_back(fmt::format("{} does not exist; check the path.", arg));
      continue;
    }
    std::vector<std::string> found = dumpFilesIn(arg, isDirectory);
    if (found.empty()) {
      out.problems.push_back(
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
      out.problems.push_back(
          fmt::format("{}: its name does not end in a rank number (torch names dumps "
                      "<prefix><rank>), so dsdiag cannot tell whose dump it is; rename it, e.g. "
                      "to rank_3.",
                      file));
      continue;
    }
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    out.byRank[*rank].push_back({file, ec ? 0 : static_cast<std::uint64_t>(size)});
  }
  return out;
}

namespace {

struct RankRead {
  RankDump dump;     // a dump object reused from rank to rank (its buffers are kept)
  bool read = false; // whether `dump` holds this rank's dump
  std::vector<std::string> problems;
};

// One rank's files, in name order, into out.dump: the first readable one is kept; a second is a
// problem naming both, except that a pickle and a JSON with the same records are only a note and the
// pickle is kept. At most two dumps of the rank are held at once. `bytes` is the file buffer.
void readRank(int rank, const std::vector<DumpFiles::File>& files, RankRead& out, FileBuffer& bytes) {
  out.read = false;
  out.problems.clear();
  for (const auto& f : files) {
    RankDump other;
    RankDump& dump = out.read ? other : out.dump;
    try {
      readFileInto(f.path, bytes);
      parseDumpInto(bytes.view(), f.path, rank, dump);
    } catch (const ds::Error& e) {
      out.problems.push_back(e.what());
      continue;
    }
    if (!out.read) {
      out.read = true;
      continue;
    }
    RankDump& kept = out.dump;
    if (kept.format != dump.format && sameRecords(kept, dump)) {
      out.problems.push_back(
          fmt::format("note: {} and {} are the same dump of rank {} in two formats; dsdiag uses "
                      "the pickle.",
                      kept.file, dump.file, rank));
      if (dump.format == "pickle") kept = std::move(dump);
    } else {
      out.problems.push_back(
          fmt::format("{} and {} are both dumps of rank {}; dsdiag uses {} (the first by name) "
                      "and ignores {}.",
                      kept.file, dump.file, rank, kept.file, dump.file));
    }
  }
}

// The reading threads of forEachDump: rank i+1, i+2, ... are read while the caller digests rank i,
// never more than `window` ranks or `budget` bytes of files ahead of it (at least one rank).
class ReadAhead {
 public:
  ReadAhead(const DumpFiles& files, const ReadOptions& options) : options_(options) {
    for (const auto& [rank, list] : files.byRank) {
      std::uint64_t bytes = 0;
      for (const auto& f : list) bytes += f.bytes;
      tasks_.push_back({rank, &list, bytes});
    }
    slots_.resize(tasks_.size());
    const int threads = std::max(1, std::min<int>(options.threads, static_cast<int>(tasks_.size())));
    window_ = static_cast<std::size_t>(2 * threads);
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
  }

  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  std::size_t size() const { return tasks_.size(); }
  int rank(std::size_t i) const { return tasks_[i].rank; }

  // Blocks until rank i (in order) is read and takes it; rethrows what its reading threw beyond a
  // ds::Error (which is a problem sentence already). Give it back with recycle() when done.
  RankRead take(std::size_t i) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return slots_[i].done; });
    Slot& s = slots_[i];
    if (s.error) std::rethrow_exception(s.error);
    RankRead out = std::move(s.read);
    s.read = {};
    inFlight_ -= tasks_[i].bytes;
    consumed_ = i + 1;
    lock.unlock();
    cv_.notify_all();
    return out;
  }

  // A read the caller is done with: its dump's buffers serve a later rank.
  void recycle(RankRead&& r) {
    std::lock_guard<std::mutex> lock(m_);
    if (spare_.size() < window_ + workers_.size()) spare_.push_back(std::move(r));
  }

 private:
  struct Task {
    int rank;
    const std::vector<DumpFiles::File>* files;
    std::uint64_t bytes;
  };
  struct Slot {
    bool done = false;
    RankRead read;
    std::exception_ptr error;
  };

  void work() {
    FileBuffer bytes;  // this thread's file buffer
    for (;;) {
      std::size_t i = 0;
      Slot result;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] {
          if (stop_ || next_ >= tasks_.size()) return true;
          const bool nothingAhead = next_ == consumed_;
          return nothingAhead ||
                 (next_ - consumed_ < window_ && inFlight_ + tasks_[next_].bytes <= options_.maxBytesInFlight);
        });
        if (stop_ || next_ >= tasks_.size()) return;
        i = next_++;
        inFlight_ += tasks_[i].bytes;
        if (!spare_.empty()) {
          result.read = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      try {
        readRank(tasks_[i].rank, *tasks_[i].files, result.read, bytes);
      } catch (...) {
        result.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(m_);
        slots_[i].read = std::move(result.read);
        slots_[i].error = result.error;
        slots_[i].done = true;
      }
      cv_.notify_all();
    }
  }

  const ReadOptions& options_;
  std::vector<Task> tasks_;
  std::vector<Slot> slots_;
  std::vector<RankRead> spare_;  // reads given back, their buffers reused
  std::mutex m_;
  std::condition_variable cv_;
  std::size_t next_ = 0, consumed_ = 0, window_ = 2;
  std::uint64_t inFlight_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

int defaultReadThreads() { return std::clamp(sys::affinityCpuCount(), 1, 8); }

std::size_t forEachDump(const DumpFiles& files, const std::function<void(RankDump&&)>& sink,
                        std::vector<std::string>& problems, const ReadOptions& options) {
  std::size_t handed = 0;
  auto deliver = [&](RankRead& r) {
    problems.insert(problems.end(), r.problems.begin(), r.problems.end());
    if (r.read) {
      sink(std::move(r.dump));
      ++handed;
    }
  };
  if (options.threads <= 1 || files.byRank.size() <= 1) {
    RankRead r;
    FileBuffer bytes;
    for (const auto& [rank, list] : files.byRank) {
      readRank(rank, list, r, bytes);
      deliver(r);
    }
    return handed;
  }
  ReadAhead ahead(files, options);
  for (std::size_t i = 0; i < ahead.size(); ++i) {
    RankRead r = ahead.take(i);
    deliver(r);
    ahead.recycle(std::move(r));
  }
  return handed;
}

}  // namespace ds::diag::hang
