#include "bench/coll/coll_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "bench/coll/collective.h"
#include "engine/common/cli.h"
#include "engine/common/error.h"
#include "reports/schema/label.h"

namespace ds::bench::coll {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    std::size_t b = cur.find_first_not_of(" \t"), e = cur.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (char c : text) {
    if (c == ',')
      flush();
    else
      cur += c;
  }
  flush();
  return out;
}

std::size_t parseSize(const std::string& text, const std::string& flag) {
  auto bad = [&](const std::string& why) {
    return ConfigError(
        fmt::format("{} {}: {}. Give bytes as a number with an optional binary suffix K, M or G "
                    "(nccl-tests' form), e.g. 8, 64K, 32M, 1G.",
                    flag, cli::shown(text), why));
  };
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) throw bad("not a size");
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(text.substr(0, i), &used);
    if (used != i) throw bad("not a number");
  } catch (const std::logic_error&) {
    throw bad("not a number");
  }
  std::string suffix = text.substr(i);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (!suffix.empty() && (suffix[0] == 'K' || suffix[0] == 'M' || suffix[0] == 'G')) {
    mult = suffix[0] == 'K' ? 1024.0 : suffix[0] == 'M' ? 1048576.0 : 1073741824.0;
    suffix.erase(0, 1);
  }
  if (!(suffix.empty() || suffix == "B" || suffix == "IB"))
    throw bad("unknown suffix '" + text.substr(i) + "'");
  double bytes = std::floor(value * mult);
  if (bytes > 1.2e15) throw bad("too large");
  return static_cast<std::size_t>(bytes);
}

namespace {

std::string perIterTimingError(const std::string& flag, const std::string& shownValue) {
  return fmt::format(
      "{} {} is not valid: give 0 (no per-iteration columns, the default), 1 (nccl-tests' columns i_min "
      "i_max i_p99 i_cv% after each #wrong) or 2 (the tail columns i_p50 i_p90 i_p99 i_p99.9 i_max).",
      flag, shownValue);
}

}  // namespace

int parsePerIterTiming(const std::string& text, const std::string& flag) {
  std::string t = !text.empty() && text[0] == '+' ? text.substr(1) : text;
  if (t != "0" && t != "1" && t != "2") throw ConfigError(perIterTimingError(flag, cli::shown(text)));
  return t[0] - '0';
}

CollOptions resolveOptions(const CollFlags& f) {
  CollOptions o;
  o.minBytes = parseSize(f.minBytes, "-b/--minbytes");
  o.maxBytes = parseSize(f.maxBytes, "-e/--maxbytes");
  o.stepBytes = parseSize(f.stepBytes, "-i/--stepbytes");
  if (o.minBytes > o.maxBytes) {
    throw ConfigError(
        fmt::format("invalid sizes: -b/--minbytes {} is larger than -e/--maxbytes {}. The sweep runs "
                    "from -b up to -e; swap them or raise -e.",
                    o.minBytes, o.maxBytes));
  }
  if (f.stepFactorGiven) {
    if (f.stepFactor <= 1) {
      throw ConfigError(
          fmt::format("-f/--stepfactor {} is not valid: the factor must be an integer of at least 2 "
                      "(each size is the previous one times the factor). For additive steps use -i.",
                      f.stepFactor));
    }
    if (o.minBytes == 0 && o.maxBytes > 0) {
      throw ConfigError("-f/--stepfactor with -b 0 never grows (0 x factor = 0); start at -b 1 or more.");
    }
    o.stepFactor = f.stepFactor;
  } else if (o.stepBytes == 0 && o.minBytes < o.maxBytes) {
    throw ConfigError(
        "-i/--stepbytes 0 never reaches -e/--maxbytes; give a positive step or a factor with -f.");
  }
  if (f.iters < 1)
    throw ConfigError(fmt::format("-n/--iters {} is not valid: at least 1 iteration.", f.iters));
  if (f.warmupIters < 0)
    throw ConfigError(fmt::format("-w/--warmup_iters {} is not valid: 0 or more.", f.warmupIters));
  if (f.check < 0)
    throw ConfigError(fmt::format("-c/--check {} is not valid: 0 (no check) or more.", f.check));
  if (f.average < 0 || f.average > 3) {
    throw ConfigError(
        fmt::format("-a/--average {} is not valid: 0 (rank 0), 1 (average), 2 (min) or 3 (max).", f.average));
  }
  if (f.root < 0) throw ConfigError(fmt::format("-r/--root {} is not valid: a rank, 0 or more.", f.root));
  if (f.timeoutS < 0)
    throw ConfigError(fmt::format("-T/--timeout {} is not valid: seconds, more than 0.", f.timeoutS));
  if (f.minTimeS < 0)
    throw ConfigError(fmt::format("--min-time {} is not valid: seconds, 0 or more.", f.minTimeS));
  if (f.repeat < 1 || f.repeat > 1000)
    throw ConfigError(fmt::format(
        "--repeat {} is not valid: give the number of passes over the sizes, 1 to 1000.",
        f.repeat));
  if (f.perIterTiming < 0 || f.perIterTiming > 2)
    throw ConfigError(perIterTimingError("-I/--per_iter_timing", std::to_string(f.perIterTiming)));
  if (f.perIterSkip < 0 || (f.iters >= 1 && f.perIterSkip >= f.iters)) {
    throw ConfigError(fmt::format(
        "-K/--per_iter_skip {} is not valid with -n/--iters {}: the per-iteration statistics need at least "
        "one iteration that is not skipped. Give -K from 0 to {}, or raise -n.",
        f.perIterSkip, f.iters, std::max(0, f.iters - 1)));
  }
  o.perIterTiming = f.perIterTiming;
  o.perIterSkip = f.perIterSkip;
  o.repeat = f.repeat;
  o.iters = f.iters;
  o.warmupIters = f.warmupIters;
  o.check = f.check;
  o.average = f.average;
  o.root = f.root;
  if (f.timeoutS > 0) o.timeoutS = f.timeoutS;
  o.minTimeS = f.minTimeS;
  o.blocking = f.blocking;
  o.jsonPath = f.jsonPath;
  o.journalPath = f.journalPath;
  o.initMethod = f.initMethod;
  if (f.labelGiven || !f.label.empty()) o.label = report::checkLabel(f.label, "--label");

  auto listOf = [](const std::string& text, const char* flag) {
    auto items = splitList(text);
    if (items.empty())
      throw ConfigError(fmt::format("{} is empty; give a name, a comma-separated list or all.", flag));
    return items;
  };
  for (const auto& name : listOf(f.op, "-o/--op")) {
    if (name == "all") {
      o.ops.assign(std::begin(comm::kAllReduceOps), std::end(comm::kAllReduceOps));
      continue;
    }
    try {
      o.ops.push_back(comm::parseReduceOp(name));
    } catch (const ConfigError& e) {
      throw ConfigError(
          fmt::format("-o/--op: unknown reduction op '{}'. Valid: sum, prod, max, min, avg or all.", name));
    }
  }
  for (const auto& name : listOf(f.datatype, "-d/--datatype")) {
    if (name == "all") {
      o.dtypes.assign(std::begin(comm::kAllDTypes), std::end(comm::kAllDTypes));
      continue;
    }
    try {
      o.dtypes.push_back(comm::parseDType(name));
    } catch (const ConfigError& e) {
      throw ConfigError(
          fmt::format("-d/--datatype: unknown datatype '{}'. Valid: float, double, half, bfloat16, "
                      "int32, int64, uint8, int8 (or f32, f64, f16, bf16, i32, i64, u8, i8) or all.",
                      name));
    }
  }
  for (const auto& name : listOf(f.collectives, "--coll")) {
    if (name == "all") {
      for (const CollSpec* s : allCollectives()) o.collectives.emplace_back(s->facts->name);
    } else {
      o.collectives.emplace_back(findCollective(name).facts->name);
      o.collectivesNamed.emplace_back(findCollective(name).facts->name);
    }
  }
  // A name given twice (or inside "all") runs once, in first-seen order.
  auto dedupe = [](auto& v) {
    std::vector<std::decay_t<decltype(v[0])>> out;
    for (const auto& x : v) {
      bool seen = false;
      for (const auto& y : out) seen = seen || y == x;
      if (!seen) out.push_back(x);
    }
    v = out;
  };
  dedupe(o.ops);
  dedupe(o.dtypes);
  dedupe(o.collectives);
  o.backends = splitList(f.backends);
  dedupe(o.backends);
  return o;
}

std::vector<std::size_t> repeatOrder(std::size_t n, int rep, int repeats) {
  std::vector<std::size_t> order(n);
  const std::size_t shift =
      repeats > 0 && n > 0 ? n * static_cast<std::size_t>(rep % repeats) / static_cast<std::size_t>(repeats)
                           : 0;
  for (std::size_t k = 0; k < n; ++k) order[k] = (k + shift) % n;
  return order;
}

std::vector<std::size_t> sweepSizes(const CollOptions& o) {
  std::vector<std::size_t> sizes;
  for (std::size_t s = o.minBytes; s <= o.maxBytes;) {
    sizes.push_back(s);
    const auto factor = static_cast<std::size_t>(o.stepFactor);
    if (o.stepFactor > 1 && s > o.maxBytes / factor) break;  // the next size is beyond -e (or overflows)
    std::size_t next = o.stepFactor > 1 ? s * factor : s + o.stepBytes;
    if (next <= s) break;  // min == max with a zero step, or overflow
    s = next;
  }
  return sizes;
}

}  // namespace ds::bench::coll
