// A pickle reader that can only build data. torch's Flight Recorder writes its dumps with pickle
// (protocol 2); Python's own pickle.load would import and call whatever the file names, so a dump
// from an untrusted or corrupt job is read here instead. Every opcode that imports or calls code
// (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4)
// is refused before any value is built, and so are out-of-band buffers.
//
// Values become nlohmann::json: dict -> object (keys that are not strings become their decimal or
// JSON text), list, tuple, set and frozenset -> array, str and bytes -> string (invalid UTF-8 is
// replaced by U+FFFD, so every string can be dumped), int -> integer (signed or unsigned 64-bit;
// wider ints are refused), float -> number, None -> null, bool -> bool.
//
// Memory stays bounded for large dumps: the elements of one list, the value of a chosen key of
// the top-level dict (FR's "entries"), are handed to a callback one at a time as soon as each is
// complete and are not kept. The memo only keeps the values the file refers back to later (a
// first pass finds them), and the values held at once are capped (PickleOptions::maxLiveBytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ds::diag::hang {

// Receives one complete element of the streamed list. It may throw; the exception ends the read.
using PickleElementSink = std::function<void(nlohmann::json&& element)>;

struct PickleOptions {
  // The key of the top-level dict whose list is streamed to onElement ("" = build everything).
  // The streamed list itself stays in the result, empty.
  std::string streamKey;
  PickleElementSink onElement;
  // Deeper nesting is refused: copying, dumping and freeing a json value recurse.
  std::size_t maxDepth = 1000;
  // The values held at once (the VM's stack and memo, not the streamed elements) may take about
  // this much memory; a file that needs more is refused rather than exhausting the node.
  std::uint64_t maxLiveBytes = 2ull << 30;
};

// Decodes the pickle in `bytes` and returns its top value. `name` (the file) starts every error
// message, with the byte offset. Throws ds::ConfigError for anything that is not a complete pickle
// of plain data: a refused opcode, truncation, stack underflow, a memo get of a missing key, a
// mark mismatch, an int wider than 64 bits, nesting deeper than maxDepth, a size beyond
// maxLiveBytes. Differences from Python, none of which its pickler or torch's ever relies on: a
// value fetched from the memo (GET, DUP) is a copy, not the same object; MEMOIZE numbers the memo
// by the count of earlier stores; a streamed element must not be changed after later ones began.
nlohmann::json readPickle(std::string_view bytes, const std::string& name, const PickleOptions& options = {});

}  // namespace ds::diag::hang
