// ISO 8601 times in UTC, as every record of dsperf writes them ("2026-12-04T23:45:12Z", with
// milliseconds where a run's start and end need them), and the one parser that reads them back.
#pragma once

#include <ctime>
#include <string>

namespace ds {

// "2026-12-04T23:45:12Z".
std::string isoUtc(std::time_t t);
// isoUtc(now).
std::string isoUtcNow();
// "2026-12-04T23:45:12.345Z".
std::string isoUtcNowMs();

// Milliseconds since the epoch of "YYYY-MM-DD", "YYYY-MM-DDTHH:MM:SS[.fff]" with "Z", "+HH:MM",
// "-HH:MM" or no zone (UTC). False, with `ms` untouched, for anything else.
bool parseIsoTimeMs(const std::string& text, double& ms);

}  // namespace ds
