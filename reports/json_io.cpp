#include "reports/json_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <chrono>
#include <ctime>
#include <optional>
#include <string_view>

#include "engine/common/error.h"
#include "reports/input_file.h"
#include "reports/schema/schema_version.h"

namespace ds::report {

std::string dumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

void writeTextAtomic(const std::string& path, const std::string& text) {
  std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw IoError(fmt::format("cannot write {}: {}. Check that the folder exists and is writable.", path,
                              errnoText(errno)));
  }
  auto fail = [&](int err, const char* hint) {
    ::unlink(tmp.c_str());
    return IoError(fmt::format("cannot write {}: {}{}", path, errnoText(err), hint));
  };
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw fail(err, " (disk full?)");
    }
    off += static_cast<std::size_t>(n);
  }
  // A failed fsync or close means the bytes may not be on disk: the old file stays in place.
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    throw fail(err, " (disk full?)");
  }
  if (::close(fd) != 0) throw fail(errno, " (disk full?)");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw IoError(fmt::format("cannot move the finished file into place at {}: {}", path, errnoText(err)));
  }
}

void writeJsonAtomic(const std::string& path, const nlohmann::json& j) {
  writeTextAtomic(path, dumpJson(j, 2) + "\n");
}

std::string textOr(const nlohmann::json& j, const char* key, const std::string& fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

namespace {

struct DocKind {
  std::string_view schema, what, remedy;
};
// What each kind of document is, and how to get a good one again.
constexpr DocKind kDocKinds[] = {
    {"dsperf.sweep", "dsperf sweep result", "regenerate it with `dsbench coll ... -J FILE`"},
    {"dsperf.train", "dsperf train result", "regenerate it with `dsbench train ... --json FILE`"},
    {"dsperf.diag", "dsdiag report", "regenerate it with `dsdiag --json FILE`"},
    {"dsperf.world", "dsperf world report", "regenerate it with `dsbench world --json FILE`"},
    {"dsperf.fleet", "dsdiag fleet report", "regenerate it with `dsdiag --world --json FILE`"},
    {"dsperf.hang", "dsdiag hang report", "regenerate it with `dsdiag hang DUMPS... --json FILE`"},
    {"dsperf.sweep.journal", "dsbench sweep journal", "rerun the sweep (`dsbench coll ... -J FILE`)"},
    {"dsperf.train.journal", "dsbench train journal", "rerun the benchmark (`dsbench train ... --json FILE`)"},
    {"nccl-tests", "nccl-tests -J result", "rerun nccl-tests with -J FILE, or import its text output instead"},
};
constexpr DocKind kAnyKind{"", "dsperf result", "regenerate it with the tool that wrote it"};

const DocKind& docKind(std::string_view schema) {
  for (const auto& k : kDocKinds) {
    if (k.schema == schema) return k;
  }
  return kAnyKind;
}

// "a number", "an object", "null".
std::string withArticle(std::string_view type) {
  if (type == "null") return "null";
  const bool vowel = !type.empty() && std::string_view("aeiou").find(type[0]) != std::string_view::npos;
  return fmt::format("{} {}", vowel ? "an" : "a", type);
}

// What sits at `pointer` in doc: "a string (\"fast\")", "a number (1e+60)", "an object"; empty when the
// pointer does not lead there.
std::string foundAt(const nlohmann::json& doc, const std::string& pointer) {
  try {
    const auto& v = doc.at(nlohmann::json::json_pointer(pointer));
    std::string t = withArticle(v.type_name());
    if (v.is_primitive() && !v.is_null()) {
      std::string shown = dumpJson(v);
      if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
      t += fmt::format(" ({})", shown);
    }
    return t;
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

// RFC 6901: inside a pointer's token, '~' is written "~0" and '/' "~1".
std::string pointerToken(std::string_view key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// The text of s between `before` and `after` (to the end when after is empty), or nullopt.
std::optional<std::string> between(const std::string& s, std::string_view before, std::string_view after) {
  auto b = s.find(before);
  if (b == std::string::npos) return std::nullopt;
  b += before.size();
  auto e = after.empty() ? s.size() : s.find(after, b);
  if (e == std::string::npos) return std::nullopt;
  return s.substr(b, e - b);
}

// nlohmann's what() without "[json.exception.type_error.302] ".
std::string withoutCode(std::string text) {
  if (text.rfind("[json.exception.", 0) == 0) {
    auto close = text.find("] ");
    if (close != std::string::npos) text.erase(0, close + 2);
  }
  return text;
}

// The sentence that ends a message about a document's content: a newer minor version of our schema
// may hold what this reader does not know; anything else was changed or damaged after it was written.
std::string adviceFor(const nlohmann::json& doc, std::string_view schema) {
  if (doc.is_object() && doc.contains("schema_version")) {
    try {
      SchemaVersion v = parseSchemaVersion(doc["schema_version"], "");
      if (v.major == kSchemaMajor && v.minor > kSchemaMinor) {
        return fmt::format(
            "It was written by a newer dsperf (schema version {}; this dsperf knows up to {}): upgrade dsperf "
            "to read it.",
            v.str(), kSchemaVersion);
      }
    } catch (const ConfigError&) {
    }
  }
  const DocKind& kind = docKind(schema);
  return fmt::format("It is not a valid {}: it was changed or damaged after it was written; {}.", kind.what,
                     kind.remedy);
}

// Follows a JSON text as nlohmann's parser reads it, to say where it stopped: the pointer of the value
// being read, and the top-level "schema" (what the file was meant to be).
class ParsePosition : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t& s) override {
    if (levels_.size() == 1 && levels_[0].hasKey && levels_[0].key == "schema") schema_ = s;
    return value();
  }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    levels_.push_back({});
    return true;
  }
  bool key(string_t& k) override {
    levels_.back().key = k;
    levels_.back().hasKey = true;
    return true;
  }
  bool end_object() override {
    levels_.pop_back();
    return value();
  }
  bool start_array(std::size_t) override {
    levels_.emplace_back().array = true;
    return true;
  }
  bool end_array() override {
    levels_.pop_back();
    return value();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    position_ = position;
    reason_ = withoutCode(e.what());
    return false;
  }

  // "/results/3/out_of_place": the value the parser was in when it stopped.
  std::string pointer() const {
    std::string p;
    for (const auto& l : levels_) {
      if (l.array) p += fmt::format("/{}", l.index);
      else if (l.hasKey) p += "/" + pointerToken(l.key);
    }
    return p;
  }
  std::size_t position() const { return position_; }
  // "invalid literal; last read: 'tru'", without "parse error at line 1, column 5: syntax error while
  // parsing value - ".
  std::string reason() const {
    std::string r = reason_;
    if (auto colon = r.find(": "); r.rfind("parse error", 0) == 0 && colon != std::string::npos) r.erase(0, colon + 2);
    if (auto dash = r.find(" - "); r.rfind("syntax error", 0) == 0 && dash != std::string::npos) r.erase(0, dash + 3);
    return r;
  }
  const std::string& schema() const { return schema_; }

 private:
  struct Level {
    bool array = false;
    std::size_t index = 0;  // arrays: the element being read
    bool hasKey = false;    // objects: a key was read, its value is being read
    std::string key;
  };
  // A value ended: an array moves to its next element, an object waits for its next key.
  bool value() {
    if (!levels_.empty()) {
      if (levels_.back().array) ++levels_.back().index;
      else levels_.back().hasKey = false;
    }
    return true;
  }
  std::vector<Level> levels_;
  std::size_t position_ = 0;
  std::string reason_, schema_;
};

}  // namespace

ConfigError jsonFieldError(const nlohmann::json::exception& e, const nlohmann::json& doc, const std::string& origin,
                           std::string_view schema) {
  // With JSON_DIAGNOSTICS, what() is "[json.exception.type_error.302] (/results/3/bus_bw) type must be
  // number, but is string"; the pointer is absent for the document itself.
  std::string text = withoutCode(e.what());
  std::string pointer;
  if (!text.empty() && text[0] == '(') {
    if (auto close = text.find(") "); close != std::string::npos) {
      pointer = text.substr(1, close - 1);
      text.erase(0, close + 2);
    }
  }
  std::string problem;
  const std::string found = foundAt(doc, pointer);
  if (auto expected = between(text, "type must be ", ", but is "); expected && text.rfind("type must be ", 0) == 0) {
    problem = fmt::format("expected {}, found {}", withArticle(*expected),
                          found.empty() ? withArticle(*between(text, ", but is ", "")) : found);
  } else if (auto key = between(text, "key '", "' not found")) {
    pointer += "/" + pointerToken(*key);
    problem = "expected a value, found nothing (the field is missing)";
  } else if (auto type = between(text, "cannot use at() with ", "")) {
    problem = fmt::format("expected an object, found {}", found.empty() ? withArticle(*type) : found);
  } else if (auto range = between(text, " does not fit an integer from ", "")) {  // readInt (json_io.h)
    problem = fmt::format("expected a whole number from {}, found {}", *range, found.empty() ? "a larger one" : found);
  } else {
    problem = text;
  }
  return ConfigError(fmt::format("{}: at {}: {}. {}", origin, pointer.empty() ? "the top level" : pointer, problem,
                                 adviceFor(doc, schema)));
}

ConfigError notJsonError(const std::string& text, const std::string& origin, std::string_view schema) {
  ParsePosition where;
  nlohmann::json::sax_parse(text, &where);
  const DocKind& kind = docKind(where.schema().empty() ? schema : std::string_view(where.schema()));
  // position(): how many characters the parser read, so the one it stopped at is position() - 1 (the
  // end of the text when it ran out).
  const std::size_t stop = std::min(where.position() > 0 ? where.position() - 1 : 0, text.size());
  const auto stopIt = text.begin() + static_cast<std::ptrdiff_t>(stop);
  const std::size_t line = 1 + static_cast<std::size_t>(std::count(text.begin(), stopIt, '\n'));
  const std::size_t lineStart = stop == 0 ? 0 : text.rfind('\n', stop - 1);
  const std::size_t column = lineStart == std::string::npos || stop == 0 ? stop + 1 : stop - lineStart;
  const std::string inside = where.pointer().empty() ? "" : fmt::format(", inside {}", where.pointer());
  if (text.find_first_not_of(" \t\r\n", stop) == std::string::npos) {
    return ConfigError(fmt::format(
        "{} is not valid JSON: it ends early, at line {} column {}{}. The file is cut short (the program "
        "that wrote it was stopped while writing, or the copy is incomplete); {}.",
        origin, line, column, inside, kind.remedy));
  }
  if (where.reason().find("number overflow") != std::string::npos) {  // valid syntax beyond a double
    return ConfigError(fmt::format(
        "{} cannot be read as JSON: at line {} column {}{}, a number is too large for a double ({}). The "
        "file is damaged or was not written by dsperf; {}.",
        origin, line, column, inside, where.reason(), kind.remedy));
  }
  return ConfigError(fmt::format(
      "{} is not valid JSON: at line {} column {}{}: {}. The file is damaged or was edited by hand; {}.", origin,
      line, column, inside, where.reason(), kind.remedy));
}

nlohmann::json readJson(const std::string& path) { return parseJsonText(readInputFile(path), path); }

nlohmann::json parseJsonText(const std::string& text, const std::string& origin) {
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw notJsonError(text, origin, "");
  return doc;
}

std::string fnv1a64Hex(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace ds::report
