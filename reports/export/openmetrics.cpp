#include "reports/export/openmetrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include "engine/common/iso_time.h"
#include "engine/common/median.h"
#include "reports/export/utf8.h"
#include "reports/html/dashboard_html.h"
#include "reports/json_io.h"

namespace ds::report {

namespace {

struct Family {
  const char* name;
  const char* help;
  std::vector<const char*> labels;
};

// In output order. The names follow Prometheus' naming guide (base units, unit suffix), which
// `promtool check metrics` lints.
const Family kBusbw{
    "dsperf_busbw_bytes_per_second",
    "Bus bandwidth of a collective measured by dsbench on one host (out-of-place; in-place when "
    "only that was measured), bytes per second.",
    {"host", "collective", "backend", "dtype", "op", "bytes", "place", "world_size", "label"}};
const Family kJobBusbw{
    "dsperf_job_busbw_bytes_per_second",
    "Bus bandwidth of a collective measured by dsbench across several hosts: the job's figure "
    "(a collective ends with its slowest rank), hosts as a Slurm hostlist, bytes per second.",
    {"hosts", "collective", "backend", "dtype", "op", "bytes", "place", "world_size", "label"}};
const Family kLinkBw{"dsperf_link_bandwidth_bytes_per_second",
                     "Bandwidth of a host-to-host link measured by dsdiag fleet mode, bytes per second.",
                     {"host", "peer", "label"}};
const Family kLinkLat{"dsperf_link_latency_seconds",
                      "One-way latency of a host-to-host link measured by dsdiag fleet mode, seconds.",
                      {"host", "peer", "label"}};
const Family kHostLinkBw{"dsperf_host_link_bandwidth_bytes_per_second",
                         "Median bandwidth of a host's links in a dsdiag fleet-mode run, bytes per second.",
                         {"host", "label"}};
const Family kHostLinkLat{"dsperf_host_link_latency_seconds",
                          "Median one-way latency of a host's links in a dsdiag fleet-mode run, seconds.",
                          {"host", "label"}};
const Family kRunTime{"dsperf_run_timestamp_seconds",
                      "Start of the newest exported dsperf run of a host (kind sweep or fleet), Unix time.",
                      {"host", "kind", "label"}};
const Family kCheckHealthy{
    "dsperf_check_healthy",
    "1 when dsreport check found the host healthy, 0 otherwise (unhealthy, no baseline, "
    "no result, cannot judge).",
    {"host"}};
const Family kCheckState{
    "dsperf_check_state",
    "dsreport check's verdict on the host: 1 for its state (healthy, unhealthy, no_baseline, "
    "no_result, cannot_judge), 0 for the others.",
    {"host", "state"}};
const Family kCheckFailed{"dsperf_check_failed_rules",
                          "Number of dsreport check rules the host broke (in at least k of its last n runs).",
                          {"host"}};
const Family kCheckTime{
    "dsperf_check_timestamp_seconds", "When the exported dsreport check ran, Unix time.", {}};

// When a run happened, for "the newest run wins": runs with a start time after those without;
// among equals, the later argument.
struct Recency {
  bool known = false;
  double ms = 0;
  std::size_t ordinal = 0;
  auto tie() const { return std::tie(known, ms, ordinal); }
  bool operator<(const Recency& o) const { return tie() < o.tie(); }
  bool operator==(const Recency& o) const { return tie() == o.tie(); }
};

struct Series {
  Recency recency;
  std::vector<double> values;  // the newest run's values of this series
};

using LabelValues = std::vector<std::string>;

// Series in label order, numbers as numbers: bytes="8192" before bytes="65536".
struct LabelOrder {
  static bool digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  }
  bool operator()(const LabelValues& a, const LabelValues& b) const {
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i] == b[i]) continue;
      if (digits(a[i]) && digits(b[i]) && a[i].size() != b[i].size()) return a[i].size() < b[i].size();
      return a[i] < b[i];
    }
    return a.size() < b.size();
  }
};
using FamilySeries = std::map<LabelValues, Series, LabelOrder>;

void add(FamilySeries& f, LabelValues labels, const Recency& r, double value) {
  auto [it, fresh] = f.try_emplace(std::move(labels));
  Series& s = it->second;
  if (fresh || s.recency < r) {
    s.recency = r;
    s.values = {value};
  } else if (s.recency == r) {
    s.values.push_back(value);
  }
}

void writeFamily(std::string& out, const Family& fam, const FamilySeries& series) {
  if (series.empty()) return;
  // The names are ours; a wrong one is a dsperf bug that promtool would also catch.
  if (!isValidMetricName(fam.name)) throw std::logic_error(fmt::format("invalid metric name {}", fam.name));
  for (const char* l : fam.labels)
    if (!isValidLabelName(l)) throw std::logic_error(fmt::format("invalid label name {}", l));
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", fam.name, escapeHelp(fam.help), fam.name);
  for (const auto& [labels, s] : series) {
    out += fam.name;
    if (!fam.labels.empty()) {
      out += '{';
      for (std::size_t i = 0; i < fam.labels.size(); ++i) {
        if (i) out += ',';
        out += fmt::format("{}=\"{}\"", fam.labels[i], escapeLabelValue(labels.at(i)));
      }
      out += '}';
    }
    out += ' ';
    out += formatSampleValue(median(s.values));
    out += '\n';
  }
}

}  // namespace

std::string escapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  detail::forEachCodePoint(value, [&](char32_t c) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      detail::appendUtf8(out, detail::kReplacementChar);
    } else {
      detail::appendUtf8(out, c);
    }
  });
  return out;
}

std::string escapeHelp(std::string_view text) {
  std::string out;
  detail::forEachCodePoint(text, [&](char32_t c) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      detail::appendUtf8(out, detail::kReplacementChar);
    } else {
      detail::appendUtf8(out, c);
    }
  });
  return out;
}

bool isValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool isValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string formatSampleValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string openMetricsText(const std::vector<Sample>& samples, const CheckReport* check) {
  FamilySeries busbw, jobBusbw, linkBw, linkLat, hostLinkBw, hostLinkLat, runTime;
  std::map<std::string, std::size_t> ordinals;  // runId -> order of first appearance
  std::map<LabelValues, double> newestStart;    // (host, kind, label) -> newest start, ms
  for (const auto& s : samples) {
    Recency r;
    r.ordinal = ordinals.try_emplace(s.runId, ordinals.size()).first->second;
    r.known = !s.time.empty() && parseIsoTimeMs(s.time, r.ms);
    if (!r.known) r.ms = 0;
    if (!std::isfinite(s.value)) continue;
    const std::string kind = s.metric == "busbw" ? "sweep" : "fleet";
    if (s.metric == "busbw") {
      LabelValues l{s.host,    s.collective,
                    s.backend, s.dtype,
                    s.op,      std::to_string(s.bytes),
                    s.place,   std::to_string(s.worldSize),
                    s.label};
      if (s.scope == "host")
        add(busbw, std::move(l), r, s.value * 1e9);
      else if (s.scope == "job")
        add(jobBusbw, std::move(l), r, s.value * 1e9);
      else
        continue;
    } else if (s.metric == "link_bw" || s.metric == "link_latency") {
      const bool bw = s.metric == "link_bw";
      const double v = bw ? s.value * 1e9 : s.value / 1e6;  // GB/s -> B/s, us -> s
      if (s.scope == "link")
        add(bw ? linkBw : linkLat, {s.host, s.peer, s.label}, r, v);
      else if (s.scope == "host")
        add(bw ? hostLinkBw : hostLinkLat, {s.host, s.label}, r, v);
      else
        continue;
    } else {
      continue;  // a figure this exporter does not know (yet)
    }
    if (r.known) {
      auto [it, fresh] = newestStart.try_emplace({s.host, kind, s.label}, r.ms);
      if (!fresh) it->second = std::max(it->second, r.ms);
    }
  }
  for (const auto& [labels, ms] : newestStart) add(runTime, labels, Recency{}, ms / 1000);

  std::string out;
  writeFamily(out, kBusbw, busbw);
  writeFamily(out, kJobBusbw, jobBusbw);
  writeFamily(out, kLinkBw, linkBw);
  writeFamily(out, kLinkLat, linkLat);
  writeFamily(out, kHostLinkBw, hostLinkBw);
  writeFamily(out, kHostLinkLat, hostLinkLat);
  writeFamily(out, kRunTime, runTime);
  if (check) {
    // A host listed twice (a hand-merged file): its last entry stands.
    std::map<std::string, const HostCheck*> hosts;
    for (const auto& h : check->hosts) hosts[h.host] = &h;
    FamilySeries healthy, state, failed, when;
    for (const auto& [name, h] : hosts) {
      add(healthy, {name}, Recency{}, h->state == CheckState::kHealthy ? 1 : 0);
      for (CheckState st : kCheckStates)
        add(state, {name, checkStateName(st)}, Recency{}, h->state == st ? 1 : 0);
      // Rules it broke; one that could not judge a figure did not break.
      const auto broken = std::count_if(h->findings.begin(), h->findings.end(),
                                        [](const CheckFinding& f) { return broke(f); });
      add(failed, {name}, Recency{}, static_cast<double>(broken));
    }
    double ms = 0;
    if (!check->time.empty() && parseIsoTimeMs(check->time, ms)) add(when, {}, Recency{}, ms / 1000);
    writeFamily(out, kCheckHealthy, healthy);
    writeFamily(out, kCheckState, state);
    writeFamily(out, kCheckFailed, failed);
    writeFamily(out, kCheckTime, when);
  }
  return out;
}

std::string openMetricsOfRuns(const std::vector<RunFile>& runs, const CheckReport* check) {
  std::vector<Sample> all;
  for (const auto& run : runs) {
    auto s = samplesOf(run);
    all.insert(all.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
  }
  return openMetricsText(all, check);
}

void writeOpenMetricsFile(const std::string& path, const std::string& text) {
  writeTextAtomic(path, text);  // the temp file is "<path>.tmp.<pid>" (reports/json_io.cpp)
}

}  // namespace ds::report
