#include "bench/exit_codes.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "engine/common/error.h"
#include "engine/common/log.h"

namespace ds::bench {

int runMain(const char* tool, const std::function<int()>& body) {
  // After a failure a process group's worker may still be inside its backend (a peer died
  // mid-collective), so the tool leaves with _Exit instead of running destructors under it. Results
  // are written atomically as they are produced, so nothing is lost.
  auto report = [&](const char* kind, const char* what, int code) -> int {
    std::fprintf(stderr, "%s: %s: %s\n", tool, kind, what);
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  };
  try {
    return body();
  } catch (const ConfigError& e) {
    return report("configuration error", e.what(), kExitConfig);
  } catch (const TimeoutError& e) {
    return report("timeout", e.what(), kExitTimeout);
  } catch (const BackendError& e) {
    return report("backend error", e.what(), kExitBackend);
  } catch (const IoError& e) {
    return report("I/O error", e.what(), kExitIo);
  } catch (const ProtocolError& e) {
    return report("protocol error", e.what(), kExitIo);
  } catch (const std::bad_alloc&) {
    // The preflights (coll -e, train --model) should refuse first; this is what is left.
    return report("out of memory",
                  "an allocation failed: this node does not have the memory this run asked for. Lower "
                  "-e/--maxbytes, --model or --batch, or start fewer ranks on this node",
                  kExitConfig);
  } catch (const std::exception& e) {
    return report("internal error", e.what(), kExitInternal);
  }
}

}  // namespace ds::bench
