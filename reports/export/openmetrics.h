// dsreport export --openmetrics: runs and check verdicts as Prometheus' text exposition format 0.0.4,
// the format node_exporter's textfile collector reads (*.prom files in its --collector.textfile.directory),
// so that the dashboards and alerts a cluster already runs see dsperf's figures beside the node's own.
//
// What is written (every family a gauge, values in Prometheus' base units: bytes per second, seconds):
//   dsperf_busbw_bytes_per_second{host,collective,backend,dtype,op,bytes,place,world_size,label}
//       a single-host sweep row (reports/baseline/sample.h, scope "host")
//   dsperf_job_busbw_bytes_per_second{hosts,collective,...,label}
//       a sweep row across hosts: the job's figure, not any one host's; `hosts` is the Slurm hostlist
//   dsperf_link_bandwidth_bytes_per_second{host,peer,label}, dsperf_link_latency_seconds{host,peer,label}
//       a fleet-mode link pair (dsdiag --world), as seen from each end
//   dsperf_host_link_bandwidth_bytes_per_second{host,label}, dsperf_host_link_latency_seconds{host,label}
//       the median of a host's links in a fleet run
//   dsperf_run_timestamp_seconds{host,kind,label}   when the newest exported run of that host started
//   dsperf_check_healthy{host}, dsperf_check_state{host,state}, dsperf_check_failed_rules{host},
//   dsperf_check_timestamp_seconds                  from a dsreport check result (dsperf.check)
//
// No sample carries a timestamp (the textfile collector rejects files that do). A series appears
// once: when several runs (or one run's repeats) give the same series, the newest run's value is
// written (runs by start time; runs without one count as older than any with one, and between runs
// of equal standing the later argument wins), the median of that run's values when it has several.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "reports/baseline/check_schema.h"
#include "reports/run/run_file.h"
#include "reports/sample/sample.h"

namespace ds::report {

// The exposition text of the samples (in argument order: later ones win ties) and, when `check` is
// given, of its verdicts. Families in a fixed order, each with its # HELP and # TYPE lines and its
// series together, series sorted by their labels (sizes as numbers): the same input gives the same bytes.
std::string openMetricsText(const std::vector<Sample>& samples, const CheckReport* check = nullptr);
// The same from runs: samplesOf each, in order.
std::string openMetricsOfRuns(const std::vector<RunFile>& runs, const CheckReport* check = nullptr);

// Writes text to path atomically: a temp file "<path>.tmp.<pid>" in the same folder (it does not end
// in .prom, so the textfile collector never reads it half-written), fsync, rename. Throws IoError.
void writeOpenMetricsFile(const std::string& path, const std::string& text);

// A label value as the text format wants it between quotes: \ " and line feed escaped (\\ \" \n),
// other control characters (and DEL) and bytes that are not UTF-8 written as U+FFFD.
std::string escapeLabelValue(std::string_view value);
// HELP text: \ and line feed escaped.
std::string escapeHelp(std::string_view text);
// [a-zA-Z_:][a-zA-Z0-9_:]* (metric names) and [a-zA-Z_][a-zA-Z0-9_]* not starting with "__" (label names).
bool isValidMetricName(std::string_view name);
bool isValidLabelName(std::string_view name);
// A sample value: shortest round-trip decimal, "NaN", "+Inf" or "-Inf".
std::string formatSampleValue(double v);

}  // namespace ds::report
