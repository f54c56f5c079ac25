#!/usr/bin/env bash
# ctest label prometheus: the shipped Prometheus rules and Grafana dashboard (reports/export/monitoring/).
#   monitoring_test.sh rules-check          promtool check rules dsperf-alerts.yml
#   monitoring_test.sh rules-test           promtool test rules dsperf-alerts.test.yml: each alert fires on
#                                           the series that should raise it, and only there
# Exit 77 (ctest: skipped) with the reason when promtool (Debian prometheus) is missing; scripts/setup.sh
# installs it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mon=$(dirname "$here")
mode=${1:?"usage: monitoring_test.sh rules-check|rules-test"}

need_promtool() {
  command -v promtool >/dev/null 2>&1 || { echo "SKIP: promtool not found (Debian package prometheus; scripts/setup.sh installs it): $1"; exit 77; }
}

case "$mode" in
  rules-check)
    need_promtool "the alerting rules cannot be checked"
    promtool check rules "$mon/dsperf-alerts.yml"
    ;;
  rules-test)
    need_promtool "the alerting rules cannot be run on test series"
    promtool test rules "$here/dsperf-alerts.test.yml"
    ;;
  *)
    echo "monitoring_test.sh: unknown mode '$mode' (rules-check, rules-test)" >&2
    exit 2
    ;;
esac
