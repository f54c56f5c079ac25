#include "engine/common/cli.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <utility>

#include "engine/common/error.h"

namespace ds::cli {

namespace {

// "{:g}" without the exponent for everyday bounds (3600, 0.5) and with it for huge ones (1e+15).
std::string bound(double v) { return fmt::format("{:g}", v); }

std::string range(double lo, double hi, bool loOpen) {
  return loOpen ? fmt::format("greater than {} and at most {}", bound(lo), bound(hi))
                : fmt::format("from {} to {}", bound(lo), bound(hi));
}

std::string parentOf(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// What kind of non-regular file `st` is, for "is a FIFO" messages.
const char* kindOf(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string shown(const std::string& value) {
  constexpr std::size_t kMax = 40;
  std::string out = "'";
  for (std::size_t i = 0; i < value.size() && i < kMax; ++i) {
    auto c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c >= 0x7f || c == '\'')
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  out += value.size() > kMax ? fmt::format("'... ({} characters)", value.size()) : "'";
  return out;
}

CLI::Validator integer(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const std::string want = fmt::format("give a whole number from {} to {}", lo, hi);
        if (text.empty()) return "the value is empty; " + want + ".";
        const char* b = text.data();
        const char* e = b + text.size();
        if (*b == '+') ++b;
        long long v = 0;
        auto [end, ec] = std::from_chars(b, e, v);
        if (ec == std::errc::result_out_of_range)
          return fmt::format("{} is out of range; {}.", shown(text), want);
        if (ec != std::errc() || end != e)
          return fmt::format("{} is not a whole number; {}.", shown(text), want);
        if (v < lo || v > hi) return fmt::format("{} is out of range; {}.", shown(text), want);
        text = std::to_string(v);
        return "";
      },
      fmt::format("INT {}..{}", lo, hi));
}

CLI::Validator number(double lo, double hi, bool loOpen) {
  return CLI::Validator(
      [lo, hi, loOpen](std::string& text) -> std::string {
        const std::string want = "give a number " + range(lo, hi, loOpen);
        if (text.empty()) return "the value is empty; " + want + ".";
        const char* b = text.data();
        const char* e = b + text.size();
        if (*b == '+') ++b;
        double v = 0;
        auto [end, ec] = std::from_chars(b, e, v, std::chars_format::general);
        if (ec == std::errc::result_out_of_range)
          return fmt::format("{} is out of range; {}.", shown(text), want);
        if (ec != std::errc() || end != e) return fmt::format("{} is not a number; {}.", shown(text), want);
        if (!std::isfinite(v)) return fmt::format("{} is not a finite number; {}.", shown(text), want);
        if (v < lo || v > hi || (loOpen && v == lo))
          return fmt::format("{} is out of range; {}.", shown(text), want);
        text = fmt::format("{}", v);  // shortest text that reads back as v
        return "";
      },
      loOpen ? fmt::format("NUMBER >{}..{}", bound(lo), bound(hi))
             : fmt::format("NUMBER {}..{}", bound(lo), bound(hi)));
}

CLI::Validator oneOf(std::vector<std::string> names, bool commaList) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  return CLI::Validator(
      [names = std::move(names), list, commaList](std::string& text) -> std::string {
        if (text.empty())
          return fmt::format("the value is empty; choose {} of {}.", commaList ? "one or more" : "one", list);
        std::vector<std::string> items;
        if (commaList) {
          std::stringstream ss(text);
          for (std::string item; std::getline(ss, item, ',');) {
            auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
            if (b != std::string::npos) items.push_back(item.substr(b, e - b + 1));
          }
          if (items.empty()) return fmt::format("the list is empty; choose one or more of {}.", list);
        } else {
          items.push_back(text);
        }
        for (const auto& item : items) {
          if (std::find(names.begin(), names.end(), item) == names.end())
            return fmt::format("{} is not one of {}{}.", shown(item), list,
                               commaList ? " (a comma-separated list)" : "");
        }
        return "";
      },
      "{" + list + "}");
}

CLI::Validator checkedBy(std::function<void(const std::string&)> check) {
  return CLI::Validator(
      [check = std::move(check)](std::string& text) -> std::string {
        try {
          check(text);
          return "";
        } catch (const ConfigError& e) {
          return e.what();
        }
      },
      "");
}

CLI::Validator outputFile() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "the file name is empty; give the path of the file to write.";
        struct stat any {};
        if (path.rfind("--", 0) == 0 && path.size() > 2 && ::stat(path.c_str(), &any) != 0)
          return fmt::format(
              "{} is the next flag, not a file name: this option needs a value before it (a file of that "
              "name: give ./{}).",
              shown(path), path);
        if (path.back() == '/')
          return fmt::format("{} names a directory; give a file name, e.g. {}result.json.", shown(path),
                             path);
        struct stat st {};
        if (::stat(path.c_str(), &st) == 0) {
          if (S_ISDIR(st.st_mode))
            return fmt::format("{} is a directory; give a file name inside it, e.g. {}/result.json.",
                               shown(path), path);
          if (!S_ISREG(st.st_mode))
            return fmt::format(
                "{} is {}, not a regular file; results replace the file through a rename, so give the path "
                "of a regular file.",
                shown(path), kindOf(st));
        }
        const std::string dir = parentOf(path);
        struct stat dst {};
        if (::stat(dir.c_str(), &dst) != 0)
          return fmt::format("the folder {} of {} does not exist; create it first (mkdir -p {}).", shown(dir),
                             shown(path), dir);
        if (!S_ISDIR(dst.st_mode)) return fmt::format("{} in {} is not a folder.", shown(dir), shown(path));
        if (::access(dir.c_str(), W_OK | X_OK) != 0)
          return fmt::format(
              "the folder {} is not writable by this user (or is on a read-only file system); write "
              "somewhere else.",
              shown(dir));
        return "";
      },
      "FILE");
}

CLI::Validator inputFile() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path.empty()) return "the file name is empty; give the path of the file to read.";
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) return fmt::format("{} does not exist.", shown(path));
        if (!S_ISREG(st.st_mode))
          return fmt::format("{} is {}; give a regular file.", shown(path), kindOf(st));
        if (::access(path.c_str(), R_OK) != 0)
          return fmt::format("{} is not readable by this user (check its permissions).", shown(path));
        return "";
      },
      "FILE");
}

namespace {

void parseWith(CLI::App& app, const std::function<void()>& parseArgs);

// The one place that puts a value's source (the flag, or the environment variable that stood in for
// it) in front of a check's message. The tools' own parsers name the flag themselves ("--label is
// empty", "-o/--op: unknown op", "-b/--minbytes 'x': not a size"), since they also check values that
// came from elsewhere; such a leading name is replaced by the source instead of being repeated after it.
std::string withSource(const CLI::Option& opt, const std::string& source, const std::string& why) {
  std::set<std::string> names;
  for (const auto& l : opt.get_lnames()) names.insert("--" + l);
  for (const auto& s : opt.get_snames()) names.insert("-" + s);
  names.insert(opt.get_name());
  const auto end = why.find_first_of(" :");
  const std::string head = why.substr(0, end);
  bool named = !head.empty();
  std::stringstream parts(head);
  for (std::string part; named && std::getline(parts, part, '/');) named = names.count(part) > 0;
  if (named && end != std::string::npos) return source + why.substr(end);
  return source + ": " + why;
}

// All options of app and its subcommands, for finding the one CLI11 named in an error.
void allOptions(CLI::App& app, std::vector<CLI::Option*>& out) {
  for (CLI::Option* o : app.get_options()) out.push_back(o);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) allOptions(*sub, out);
}

}  // namespace

void parse(CLI::App& app, int argc, const char* const* argv) {
  parseWith(app, [&] { app.parse(argc, argv); });
}

void parse(CLI::App& app, std::vector<std::string> reversedArgs) {
  parseWith(app, [&] { app.parse(std::move(reversedArgs)); });
}

namespace {
void parseWith(CLI::App& app, const std::function<void()>& parseArgs) {
  struct Twin {
    CLI::App* owner;
    CLI::Option* opt;
    std::string env;
    bool required;
  };
  std::vector<Twin> twins;
  // CLI11 would read the twins itself, but its errors then name the flag; take them over.
  auto collect = [&](auto&& self, CLI::App* a) -> void {
    for (CLI::Option* o : a->get_options()) {
      if (o->get_envname().empty()) continue;
      twins.push_back({a, o, o->get_envname(), o->get_required()});
      o->envname("");
      o->required(false);
    }
    for (CLI::App* sub : a->get_subcommands([](CLI::App*) { return true; })) self(self, sub);
  };
  collect(collect, &app);
  auto restore = [&] {
    for (auto& t : twins) {
      t.opt->envname(t.env);
      t.opt->required(t.required);
    }
  };
  try {
    parseArgs();
  } catch (const CLI::ValidationError& e) {
    restore();
    // CLI11 writes "<name>: <message>"; rebuild it through withSource so the flag is named once.
    const std::string what = e.what();
    std::vector<CLI::Option*> options;
    allOptions(app, options);
    for (CLI::Option* o : options) {
      const std::string prefix = o->get_name() + ": ";
      if (what.rfind(prefix, 0) == 0)
        throw CLI::ValidationError(withSource(*o, o->get_name(), what.substr(prefix.size())));
    }
    throw;
  } catch (...) {
    restore();  // --help lists the twins
    throw;
  }
  restore();
  auto chosen = [&app](CLI::App* a) {
    for (; a != nullptr && a != &app; a = a->get_parent())
      if (!a->parsed()) return false;
    return true;
  };
  for (auto& t : twins) {
    if (!chosen(t.owner) || t.opt->count() > 0) continue;
    const char* value = std::getenv(t.env.c_str());
    if (value == nullptr || *value == '\0') {
      if (t.required) throw CLI::RequiredError(fmt::format("{} (or {})", t.opt->get_name(), t.env));
      continue;
    }
    try {
      t.opt->add_result(value);
      t.opt->run_callback();
    } catch (const CLI::ParseError& e) {
      std::string why = e.what();
      const std::string prefix = t.opt->get_name() + ": ";
      if (why.rfind(prefix, 0) == 0) {
        why.erase(0, prefix.size());
      } else if (t.opt->get_expected_max() == 0) {  // CLI11's "Could not convert: --flag = maybe"
        why = fmt::format("{} is not a switch value; give 1 or 0, true or false, yes or no, on or off.",
                          shown(value));
      } else {
        why = fmt::format("{} is not a valid value.", shown(value));
      }
      throw CLI::ValidationError(withSource(*t.opt, fmt::format("{} (twin of {})", t.env, t.opt->get_name()), why));
    }
  }
}

}  // namespace

}  // namespace ds::cli
