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
// first pass finds them), and what is held at once is capped (PickleOptions::maxLiveBytes).
//
// Speed: values are built as small handles (strings are views into the file's bytes, containers are
// shared and copied only when changed), not as JSON, so a streamed element can be read in place
// through PickleNode. A streamed element in the shape torch and Python write (a dict of strings,
// numbers, memo references and small containers that nothing reads back) takes a light path: its
// values go into one flat array, without the table, reference counts or memory accounting, and the
// callback reads it through the same PickleNode. An element the light path cannot take (a PUT read
// back later, a rarer opcode, a container filled twice) is read by the general machine instead, so
// the two paths give the same values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The accessors below are called once or more per field of every entry of a dump (tens of millions
// of times for a large job); GCC at -O2 left some of them out of line.
#define DS_HOT [[gnu::always_inline]] inline

namespace ds::diag::hang {

namespace detail {

// A value as the reader holds it: scalars inline, a string as a view (into the file, or into a
// container of kind kOwnedString when it had to be rewritten), a container as an index into the
// reader's table.
struct PickleValue {
  enum class Type : std::uint8_t {
    kNone, kBool, kInt, kUInt, kFloat, kString, kOwnedString, kList, kTuple, kDict, kSet,
    kHandedOver,  // a streamed element already given away (a placeholder on the stack)
    // A container of a streamed element read by the light path (Vm::readLight): its items are
    // `len` values from index `ref` of that element's own array, not in the reader's table.
    kFlatList, kFlatTuple, kFlatDict,
  };
  Type type = Type::kNone;
  std::uint32_t len = 0;  // kString: its length; kFlat*: its items
  union {
    std::int64_t i = 0;
    std::uint64_t u;
    double f;
    const char* s;
    std::uint32_t ref;  // kOwnedString and containers: the table index
    bool b;
  };
  bool isRef() const { return type == Type::kOwnedString || (type >= Type::kList && type <= Type::kSet); }
  bool isFlat() const { return type >= Type::kFlatList; }
};

struct PickleContainer {
  PickleValue::Type kind = PickleValue::Type::kList;
  bool streamed = false;         // the streamed list: its elements are gone
  std::uint32_t refs = 0;        // holders: stack slots and parent containers (not the memo)
  std::uint32_t memoRefs = 0;    // memo entries naming it
  std::uint32_t depth = 1;       // containers nested here, itself included
  std::uint64_t bytes = 64;      // the size of the JSON it becomes, as if every shared part were a copy
  std::vector<PickleValue> items;  // list, tuple, set: the items; dict: key, value, key, value, ...
  std::string text;                // kOwnedString
};

}  // namespace detail

// A value inside the pickle being read, valid only during the callback that received it: read it
// there (or turn it into JSON with toJson) and do not keep it.
class PickleNode {
 public:
  using Type = detail::PickleValue::Type;
  PickleNode(const std::vector<detail::PickleContainer>* table, detail::PickleValue v,
             const detail::PickleValue* flat = nullptr)
      : table_(table), flat_(flat), v_(v) {}

  // kOwnedString reads as kString, a flat container as its kind; kHandedOver never reaches a caller.
  DS_HOT Type type() const {
    switch (v_.type) {
      case Type::kOwnedString:
        return Type::kString;
      case Type::kFlatList:
        return Type::kList;
      case Type::kFlatTuple:
        return Type::kTuple;
      case Type::kFlatDict:
        return Type::kDict;
      default:
        return v_.type;
    }
  }
  DS_HOT bool isNone() const { return v_.type == Type::kNone; }
  DS_HOT bool isString() const { return v_.type == Type::kString || v_.type == Type::kOwnedString; }
  DS_HOT bool isBool() const { return v_.type == Type::kBool; }
  DS_HOT bool isInteger() const { return v_.type == Type::kInt || v_.type == Type::kUInt; }
  DS_HOT bool isNumber() const { return isInteger() || v_.type == Type::kFloat; }
  DS_HOT bool isDict() const { return v_.type == Type::kDict || v_.type == Type::kFlatDict; }
  // A list, tuple, set or frozenset.
  DS_HOT bool isArray() const {
    return v_.type == Type::kList || v_.type == Type::kTuple || v_.type == Type::kSet ||
           v_.type == Type::kFlatList || v_.type == Type::kFlatTuple;
  }

  // A string whose characters are the file's own (not rewritten): they stay put while the file is read.
  DS_HOT bool inFile() const { return v_.type == Type::kString; }
  DS_HOT std::string_view str() const {
    return v_.type == Type::kString ? std::string_view(v_.s, v_.len) : std::string_view(c().text);
  }
  DS_HOT bool boolean() const { return v_.b; }
  // The integer as int64 when it fits (kUInt beyond INT64_MAX does not).
  DS_HOT std::optional<std::int64_t> int64() const {
    if (v_.type == Type::kInt) return v_.i;
    if (v_.type == Type::kUInt && v_.u <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(v_.u);
    return std::nullopt;
  }
  DS_HOT double number() const {
    return v_.type == Type::kFloat  ? v_.f
           : v_.type == Type::kUInt ? static_cast<double>(v_.u)
                                    : static_cast<double>(v_.i);
  }
  // Items of an array; pairs of a dict.
  DS_HOT std::size_t size() const { return isDict() ? count() / 2 : isArray() ? count() : 0; }
  DS_HOT PickleNode item(std::size_t i) const { return {table_, items()[i], flat_}; }
  DS_HOT PickleNode key(std::size_t i) const { return {table_, items()[2 * i], flat_}; }
  DS_HOT PickleNode value(std::size_t i) const { return {table_, items()[2 * i + 1], flat_}; }
  // A dict's value for `key` (the last pair with that key, as in Python); nullopt when absent.
  std::optional<PickleNode> find(std::string_view key) const;
  // The same identity as `o`: one container, or one string in the file.
  bool sameAs(const PickleNode& o) const {
    return v_.type == o.v_.type && (v_.isRef() || v_.isFlat() ? v_.ref == o.v_.ref && flat_ == o.flat_
                                                             : v_.type == Type::kString && v_.s == o.v_.s);
  }
  // As JSON, by the rules at the top of this file.
  nlohmann::json toJson() const;

 private:
  DS_HOT const detail::PickleContainer& c() const { return (*table_)[v_.ref]; }
  DS_HOT const detail::PickleValue* items() const { return v_.isFlat() ? flat_ + v_.ref : c().items.data(); }
  DS_HOT std::size_t count() const { return v_.isFlat() ? v_.len : c().items.size(); }
  const std::vector<detail::PickleContainer>* table_;
  const detail::PickleValue* flat_;  // the light path's values (kFlat*), nullptr elsewhere
  detail::PickleValue v_;
};

// Receives one complete element of the streamed list. It may throw; the exception ends the read.
using PickleElementSink = std::function<void(nlohmann::json&& element)>;
// The same, read in place without building JSON (the fast path of the dump reader).
using PickleNodeSink = std::function<void(const PickleNode& element)>;

// How a read went, for tests: which path each streamed element took.
struct PickleStats {
  std::size_t lightElements = 0;    // read by the light path
  std::size_t generalElements = 0;  // read by the general machine
};

struct PickleOptions {
  // The key of the top-level dict whose list is streamed ("" = build everything). The streamed
  // list itself stays in the result, empty. Elements go to onNode when it is set, else to onElement.
  std::string streamKey;
  PickleElementSink onElement;
  PickleNodeSink onNode;
  // Whether streamed elements may take the light path (speed above); false reads every one with the
  // general machine (tests compare the two).
  bool lightElements = true;
  PickleStats* stats = nullptr;  // filled in when set
  // Deeper nesting is refused: copying, dumping and freeing a json value recurse.
  std::size_t maxDepth = 1000;
  // The values held at once (the reader's stack, memo and containers, not the streamed elements
  // once handed over) may take about this much memory, and the JSON made of one value about as much;
  // a file that needs more is refused rather than exhausting the node.
  std::uint64_t maxLiveBytes = 2ull << 30;
};

// Decodes the pickle in `bytes` and returns its top value. `name` (the file) starts every error
// message, with the byte offset. Throws ds::ConfigError for anything that is not a complete pickle
// of plain data: a refused opcode, truncation, stack underflow, a memo get of a missing key, a
// mark mismatch, an int wider than 64 bits, nesting deeper than maxDepth, a size beyond
// maxLiveBytes. Differences from Python, none of which its pickler or torch's ever relies on: a
// value fetched from the memo (GET, DUP) and then changed is a copy, not the same object; MEMOIZE
// numbers the memo by the count of earlier stores; a streamed element must not be changed after
// later ones began (the general machine still allows it while the element is among the top three
// values of the stack; after one taken by the light path, never).
nlohmann::json readPickle(std::string_view bytes, const std::string& name, const PickleOptions& options = {});

}  // namespace ds::diag::hang

#undef DS_HOT
