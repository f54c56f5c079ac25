// Shadows <nlohmann/json.hpp> (cmake/Warnings.cmake puts this folder first on the system include path)
// to keep GCC 12's -Warray-bounds false positives from the library out of our build log.
//
// The library already comes from /usr/include, a system header folder, but GCC 12 reports a warning
// inside a system header whenever the chain of inlined calls that leads to it starts in our code: with
// JSON_DIAGNOSTICS (cmake/Dependencies.cmake), basic_json::set_parents() inlined into our to_json
// functions makes GCC warn that std::map's header is read "partly outside array bounds" (178 of them in
// a full build at 6469d37, issue 30). GCC honours a `#pragma GCC diagnostic` at any location in that inlining
// chain, so ignoring -Warray-bounds over the library's own lines silences these and only these: a
// -Warray-bounds finding located in our own files is still reported (and fails the build with
// DS_WERROR=ON).
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#include_next <nlohmann/json.hpp>
#pragma GCC diagnostic pop
#else
#include_next <nlohmann/json.hpp>
#endif
