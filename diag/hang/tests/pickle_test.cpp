// The data-only pickle reader: Python's pickles at every protocol, refused opcodes, truncation at
// every offset, the memo, malformed and hostile input, and streaming the top-level "entries" list.
#include "diag/hang/pickle.h"
#include "diag/hang/tests/test_data.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/testing/paths.h"
#include "engine/testing/subprocess.h"

#ifndef DS_HANG_FR_DUMP_DATA
#define DS_HANG_FR_DUMP_DATA "diag/hang/tests/data/fr_dump"
#endif

using ds::ConfigError;
using ds::diag::hang::PickleOptions;
using ds::diag::hang::readPickle;
using nlohmann::json;
using namespace std::string_literals;

namespace {

std::string pickleFile(const std::string& name) {
  return ds::testing::readFile(std::string(DS_HANG_FR_DUMP_DATA) + "/" + name);
}

// Pickle bytes written by hand, opcode by opcode.
class P {
 public:
  P() = default;
  P& op(std::uint8_t c) { return b_ += static_cast<char>(c), *this; }
  P& u1(std::uint8_t v) { return op(v); }
  P& u4(std::uint32_t v) {
    for (int k = 0; k < 4; ++k) op(static_cast<std::uint8_t>(v >> (8 * k)));
    return *this;
  }
  P& raw(std::string_view s) { return b_ += s, *this; }
  P& str(std::string_view s) { return op('X').u4(static_cast<std::uint32_t>(s.size())).raw(s); }
  P& int1(std::uint8_t v) { return op('K').u1(v); }
  P& repeat(std::uint8_t c, std::size_t n) { return b_.append(n, static_cast<char>(c)), *this; }
  std::string bytes() const { return b_; }

 private:
  std::string b_ = "\x80\x02";  // PROTO 2
};

// The ConfigError message readPickle throws for `bytes`, or "" when it reads them.
std::string refusal(const std::string& bytes, const PickleOptions& options = {}) {
  try {
    readPickle(bytes, "rank_3", options);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Pickle, ReadsWhatPythonWritesAtEveryProtocol) {
  const json expected = json::parse(pickleFile("nested.json"));
  for (int p = 0; p <= 5; ++p) {
    SCOPED_TRACE("protocol " + std::to_string(p));
    json v = readPickle(pickleFile("nested_p" + std::to_string(p) + ".pkl"), "nested");
    if (p >= 3) {
      EXPECT_EQ(v["bytes"], "raw\xEF\xBF\xBD");  // b"raw\xff": invalid UTF-8 replaced
    }
    if (p >= 4) {
      EXPECT_EQ(v["set"], json::array({3}));
      EXPECT_EQ(v["frozenset"], json::array({4}));
    }
    v.erase("bytes"), v.erase("set"), v.erase("frozenset");
    EXPECT_EQ(v, expected);
    EXPECT_EQ(v["ints"].back().get<std::uint64_t>(), UINT64_MAX);
    EXPECT_EQ(v["ints"][10].get<std::int64_t>(), INT64_MIN);
    EXPECT_EQ(v["unicode"], "é€\n\\ 😀");
    EXPECT_EQ(v["7"], "int key");
  }
}

TEST(Pickle, RefusesEveryOpcodeThatRunsCodeNamingTheOffset) {
  const std::vector<std::pair<std::uint8_t, std::string>> refused = {
      {'c', "GLOBAL (0x63) would import code"},
      {0x93, "STACK_GLOBAL (0x93) would import code"},
      {'i', "INST (0x69) would import code"},
      {0x82, "EXT1 (0x82) would import code"},
      {0x83, "EXT2 (0x83)"},
      {0x84, "EXT4 (0x84)"},
      {'R', "REDUCE (0x52) would call code"},
      {'b', "BUILD (0x62) would call code"},
      {'o', "OBJ (0x6f) would call code"},
      {0x81, "NEWOBJ (0x81) would call code"},
      {0x92, "NEWOBJ_EX (0x92) would call code"},
      {'P', "PERSID (0x50)"},
      {'Q', "BINPERSID (0x51)"},
      {0x97, "NEXT_BUFFER (0x97)"},
      {0x98, "READONLY_BUFFER (0x98)"},
      {'S', "STRING (0x53)"},
      {0x96, "BYTEARRAY8 (0x96)"},
  };
  for (const auto& [code, text] : refused) {
    const std::string msg = refusal(P().op(']').int1(1).op(code).op('.').bytes());
    EXPECT_NE(msg.find("rank_3: byte 5: pickle opcode " + text), std::string::npos) << msg;
    EXPECT_NE(msg.find("dsdiag reads data only and refuses this file"), std::string::npos) << msg;
  }
  // The classic exploit, protocol 0: os.system('echo pwned'). Refused at its first byte.
  const std::string exploit = "cos\nsystem\n(S'echo pwned'\ntR.";
  EXPECT_NE(refusal(exploit).find("rank_3: byte 0: pickle opcode GLOBAL (0x63) would import code"),
            std::string::npos);
  // What Python writes for a set at protocol 2: builtins.set via GLOBAL and REDUCE.
  const std::string pythonSet =
      "\x80\x02\x63\x5f\x5f\x62\x75\x69\x6c\x74\x69\x6e\x5f\x5f\x0a\x73\x65\x74\x0a\x71\x00\x5d\x71\x01"
      "\x4b\x01\x61\x85\x71\x02\x52\x71\x03\x2e"s;
  EXPECT_NE(refusal(pythonSet).find("byte 2: pickle opcode GLOBAL"), std::string::npos);
  // Refused before anything is built: no entry before the GLOBAL reaches the callback.
  std::vector<json> got;
  PickleOptions o;
  o.streamKey = "entries";
  o.onElement = [&got](json&& e) { got.push_back(std::move(e)); };
  P late;
  late.op('}').op('(').str("entries").op(']').op('(').repeat('}', 10).op('c').raw("os\nsystem\n").op('e');
  EXPECT_NE(refusal(late.op('u').op('.').bytes(), o).find("GLOBAL"), std::string::npos);
  EXPECT_TRUE(got.empty());
}

TEST(Pickle, RefusesBytesThatAreNoOpcode) {
  EXPECT_NE(refusal(P().op(0xff).bytes()).find("byte 2: 0xff is not a pickle opcode"), std::string::npos);
  EXPECT_NE(refusal(P().op(0x80).u1(6).op('N').op('.').bytes()).find("protocol 6 is newer than 5"),
            std::string::npos);
}

TEST(Pickle, EveryTruncationThrowsConfigError) {
  for (const char* name : {"nested_p0.pkl", "nested_p2.pkl", "nested_p4.pkl", "fr_2.10.pkl", "fr_2.2.pkl"}) {
    const std::string full = pickleFile(name);
    PickleOptions streaming;
    streaming.streamKey = "entries";
    streaming.onElement = [](json&&) {};
    for (std::size_t n = 0; n < full.size(); ++n) {
      const std::string cut = full.substr(0, n);
      EXPECT_THROW(readPickle(cut, name), ConfigError) << name << " cut at " << n;
      EXPECT_THROW(readPickle(cut, name, streaming), ConfigError) << name << " cut at " << n;
    }
    EXPECT_NO_THROW(readPickle(full, name, streaming));
  }
  EXPECT_NE(refusal(P().str("abc").bytes()).find("ends without its STOP"), std::string::npos);
  EXPECT_NE(refusal("").find("empty"), std::string::npos);
}

TEST(Pickle, MemoReturnsTheFilledValueAndMissingKeysAreRefused) {
  // Python memoizes an empty dict, then fills it: the later GET sees it full.
  const json v = readPickle(P().op(']')
                                .op('(')
                                .op('}')
                                .op('q')
                                .u1(0)
                                .op('(')
                                .str("a")
                                .int1(1)
                                .op('u')
                                .op('h')
                                .u1(0)
                                .op('e')
                                .op('.')
                                .bytes(),
                            "memo");
  EXPECT_EQ(v, json::parse(R"([{"a":1},{"a":1}])"));
  // LONG_BINPUT/LONG_BINGET, text PUT/GET, MEMOIZE (numbered by the count of stores).
  const json w = readPickle(P().op(']')
                                .op('(')
                                .str("x")
                                .op('r')
                                .u4(70000)
                                .str("y")
                                .raw("p7\n")
                                .str("z")
                                .op(0x94)
                                .op('j')
                                .u4(70000)
                                .raw("g7\n")
                                .op('h')
                                .u1(2)
                                .op('e')
                                .op('.')
                                .bytes(),
                            "memo");
  EXPECT_EQ(w, json::parse(R"(["x","y","z","x","y","z"])"));
  EXPECT_NE(refusal(P().op(']').op('h').u1(5).op('.').bytes()).find("reads memo key 5, which nothing stored"),
            std::string::npos);
  EXPECT_NE(refusal(P().raw("g1x\n").op('.').bytes()).find("not a number"), std::string::npos);
  EXPECT_NE(refusal(P().op('j').u4(0xffffffff).op('.').bytes()).find("larger than any pickle writer uses"),
            std::string::npos);
}

TEST(Pickle, StackUnderflowMarksAndTargetsAreChecked) {
  EXPECT_NE(refusal(P().op('a').op('.').bytes()).find("APPEND needs 2 value(s) on the stack"),
            std::string::npos);
  EXPECT_NE(refusal(P().op(']').op('e').op('.').bytes()).find("APPENDS finds no MARK"), std::string::npos);
  EXPECT_NE(refusal(P().op('}').op('(').int1(1).op('u').op('.').bytes()).find("key without a value"),
            std::string::npos);
  EXPECT_NE(refusal(P().int1(1).int1(2).op('a').op('.').bytes()).find("adds to a plain value"),
            std::string::npos);
  EXPECT_NE(refusal(P().op(']').int1(1).int1(2).op('s').op('.').bytes()).find("sets items of a list"),
            std::string::npos);
  // Values below a MARK are out of reach, as in Python.
  EXPECT_NE(refusal(P().op(']').op('(').int1(1).op('a').op('.').bytes()).find("finds 1"), std::string::npos);
  EXPECT_NE(refusal(P().op('(').op('.').bytes()).find("STOP needs 1 value(s)"), std::string::npos);
  // POP with nothing above the MARK pops the MARK, as Python does.
  EXPECT_EQ(readPickle(P().int1(9).op('(').op('0').op('.').bytes(), "pop"), 9);
}

TEST(Pickle, IntegersBeyond64BitsAreRefusedAndEdgesKept) {
  const std::string wide = "\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x40."s;  // 2**70 from Python
  EXPECT_NE(refusal(wide).find("wider than 64 bits"), std::string::npos);
  EXPECT_NE(refusal("L123456789012345678901234567890L\n.").find("not a 64-bit integer"), std::string::npos);
  EXPECT_EQ(readPickle("L-9223372036854775808L\n.", "l"), INT64_MIN);
  EXPECT_EQ(readPickle("I01\n.", "t"), true);
  // LONG1 with redundant sign bytes still fits.
  EXPECT_EQ(readPickle(P().op(0x8a).u1(3).raw("\xff\xff\xff"s).op('.').bytes(), "l"), -1);
  EXPECT_EQ(readPickle(P().op(0x8a).u1(0).op('.').bytes(), "l"), 0);
}

TEST(Pickle, LengthsBeyondTheFileAreRefusedWithoutAllocating) {
  EXPECT_NE(refusal(P().op(0x8d).raw("\x00\x00\x00\x00\x00\x00\x00\x40"s).op('.').bytes())
                .find("BINUNICODE8 declares 4611686018427387904 bytes but only 1 remain"),
            std::string::npos);
  EXPECT_NE(refusal(P().op('X').u4(0xffffffff).bytes()).find("declares 4294967295 bytes"), std::string::npos);
  EXPECT_NE(refusal(P().op('T').u4(0x80000000).bytes()).find("negative length"), std::string::npos);
}

TEST(Pickle, NestingIsBoundedAtTheLimit) {
  auto nested = [](std::size_t depth) {
    return P().repeat(']', depth).repeat('a', depth - 1).op('.').bytes();
  };
  EXPECT_NO_THROW(readPickle(nested(1000), "deep"));
  EXPECT_NE(refusal(nested(1001)).find("nest deeper than 1000 levels"), std::string::npos);
  EXPECT_NE(refusal(nested(200000)).find("nest deeper"), std::string::npos);
}

TEST(Pickle, WhatIsHeldAtOnceIsBounded) {
  PickleOptions small;
  small.maxLiveBytes = 1 << 20;
  EXPECT_NE(refusal(P().repeat('(', 200000).op('.').bytes(), small).find("holds more than 1 MiB"),
            std::string::npos);
  // A copy bomb: one list of 1000 items duplicated again and again.
  P dup;
  dup.op(']').op('(');
  for (int i = 0; i < 1000; ++i) dup.int1(1);
  dup.op('e').repeat('2', 100000).op('.');
  EXPECT_NE(refusal(dup.bytes(), small).find("holds more than"), std::string::npos);
}

TEST(Pickle, StringsAreValidUtf8AndKeysText) {
  EXPECT_EQ(readPickle(P().str("a\xff\xc3").op('.').bytes(), "s"), "a\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(readPickle(P().str("\xed\xa0\x80").op('.').bytes(), "s"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  const std::string tupleKey =
      "\x80\x02\x7d\x71\x00\x4b\x01\x4b\x02\x86\x71\x01\x58\x01\x00\x00\x00\x78\x71\x02\x73\x2e"s;  // {(1,
                                                                                                    // 2):
                                                                                                    // 'x'}
  EXPECT_EQ(readPickle(tupleKey, "k"), json::parse(R"({"[1,2]":"x"})"));
}

// --- streaming the top-level "entries" list ---

PickleOptions collectInto(std::vector<json>& out) {
  PickleOptions o;
  o.streamKey = "entries";
  o.onElement = [&out](json&& e) { out.push_back(std::move(e)); };
  return o;
}

TEST(PickleStream, HandsOverEachEntryAndKeepsTheRest) {
  for (const char* name : {"fr_2.2.pkl", "fr_2.10.pkl"}) {  // Python's pickler, torch's
    std::vector<json> got;
    const json top = readPickle(pickleFile(name), name, collectInto(got));
    ASSERT_EQ(got.size(), 5u) << name;
    for (int i = 0; i < 5; ++i) EXPECT_EQ(got[i]["record_id"], 10 + i) << name;
    EXPECT_EQ(top["entries"], json::array());
    EXPECT_TRUE(top.contains("pg_config"));
    EXPECT_EQ(got[4]["frames"][0]["line"], 2500);  // torch's shared frame dict, read back from the memo
  }
}

// torch's pickler writes MARK, every entry, APPENDS: the entries must not pile up on the stack.
TEST(PickleStream, TorchStyleEntriesAreHandedOverBeforeAppends) {
  P p;
  p.op('}').op('(').str("entries").op(']').op('(');
  for (int i = 0; i < 2000; ++i) {
    p.op('}')
        .op('(')
        .str("record_id")
        .op('J')
        .u4(static_cast<std::uint32_t>(i))
        .str("profiling_name")
        .str("nccl:all_reduce")
        .op('u');
  }
  p.op('e').op('u').op('.');
  std::vector<json> got;
  PickleOptions o = collectInto(got);
  o.maxLiveBytes = 64 << 10;  // 2000 entries held at once would need ~700 KiB
  readPickle(p.bytes(), "torch", o);
  ASSERT_EQ(got.size(), 2000u);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(got[i]["record_id"], i);
  PickleOptions whole;
  whole.maxLiveBytes = 64 << 10;
  EXPECT_NE(refusal(p.bytes(), whole).find("holds more than"), std::string::npos);
}

TEST(PickleStream, AMemoizedEntryReadBackLaterIsStillWhole) {
  // Python: es = [{'record_id': i} for i in range(5)]; {'entries': es + [es[0]]}. The sixth entry is a
  // BINGET of the first, after the first was handed over.
  const std::string bytes =
      "\x80\x02\x7d\x71\x00\x58\x07\x00\x00\x00\x65\x6e\x74\x72\x69\x65\x73\x71\x01\x5d\x71\x02\x28\x7d"
      "\x71\x03\x58\x09\x00\x00\x00\x72\x65\x63\x6f\x72\x64\x5f\x69\x64\x71\x04\x4b\x00\x73\x7d\x71\x05"
      "\x68\x04\x4b\x01\x73\x7d\x71\x06\x68\x04\x4b\x02\x73\x7d\x71\x07\x68\x04\x4b\x03\x73\x7d\x71\x08"
      "\x68\x04\x4b\x04\x73\x68\x03\x65\x73\x2e"s;
  std::vector<json> got;
  readPickle(bytes, "shared", collectInto(got));
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[5], json::parse(R"({"record_id":0})"));
  EXPECT_EQ(got[4], json::parse(R"({"record_id":4})"));
}

TEST(PickleStream, ReferringBackToTheStreamedListIsRefused) {
  // Python: L = [{'a': 1}]; {'entries': L, 'again': L}
  const std::string bytes =
      "\x80\x02\x7d\x71\x00\x28\x58\x07\x00\x00\x00\x65\x6e\x74\x72\x69\x65\x73\x71\x01\x5d\x71\x02\x7d"
      "\x71\x03\x58\x01\x00\x00\x00\x61\x71\x04\x4b\x01\x73\x61\x58\x05\x00\x00\x00\x61\x67\x61\x69\x6e"
      "\x71\x05\x68\x02\x75\x2e"s;
  std::vector<json> got;
  EXPECT_NE(refusal(bytes, collectInto(got)).find("refers back to the 'entries' list"), std::string::npos);
  EXPECT_EQ(readPickle(bytes, "whole")["again"], json::parse(R"([{"a":1}])"));  // fine when not streaming
}

TEST(PickleStream, ChangingAnEntryAfterLaterOnesIsRefused) {
  P p;
  p.op('}').op('(').str("entries").op(']').op('(');
  for (int i = 0; i < 6; ++i) p.op('}');
  p.repeat('0', 5).op('e').op('u').op('.');  // the fifth POP reaches an entry already handed over
  std::vector<json> got;
  EXPECT_NE(refusal(p.bytes(), collectInto(got)).find("changes an element of 'entries' after later elements"),
            std::string::npos);
}

TEST(PickleStream, OnlyTheTopLevelKeyIsStreamed) {
  // {'x': {'entries': [1, 2]}}: a nested "entries" is plain data.
  const json v = readPickle(P().op('}')
                                .str("x")
                                .op('}')
                                .str("entries")
                                .op(']')
                                .op('(')
                                .int1(1)
                                .int1(2)
                                .op('e')
                                .op('s')
                                .op('s')
                                .op('.')
                                .bytes(),
                            "nested", [] {
                              PickleOptions o;
                              o.streamKey = "entries";
                              o.onElement = [](json&&) { FAIL() << "nested entries were streamed"; };
                              return o;
                            }());
  EXPECT_EQ(v["x"]["entries"], json::array({1, 2}));
}

}  // namespace

// ---- the light path (pickle.h, "Speed") against the general machine ----

namespace {

struct Outcome {
  std::vector<json> elements;
  json top;
  std::string error;  // "" when read
  ds::diag::hang::PickleStats stats;
};

Outcome readWith(const std::string& bytes, bool light, std::size_t maxDepth = 1000) {
  Outcome o;
  PickleOptions opt = collectInto(o.elements);
  opt.lightElements = light;
  opt.maxDepth = maxDepth;
  opt.stats = &o.stats;
  try {
    o.top = readPickle(bytes, "rank_3", opt);
  } catch (const ConfigError& e) {
    o.error = e.what();
  }
  return o;
}

// The light path reads what the general machine reads, and refuses what it refuses; only where an
// element is changed after later ones began (pickle.h), which the general machine allows while the
// element is still near the top of its stack, may it refuse more, or refuse for that reason instead.
// Returns the light outcome.
Outcome expectSameAsGeneral(const std::string& bytes, const std::string& what, std::size_t maxDepth = 1000) {
  Outcome light = readWith(bytes, true, maxDepth);
  const Outcome general = readWith(bytes, false, maxDepth);
  EXPECT_EQ(general.stats.lightElements, 0u) << what;
  const bool changedLate = light.error.find("after later elements were written") != std::string::npos;
  if (!light.error.empty() && general.error.empty()) {
    EXPECT_TRUE(changedLate) << what << ": the light path refused what the general machine read: " << light.error;
  } else if (!changedLate) {
    EXPECT_EQ(light.error, general.error) << what;
    if (light.error.empty()) {
      EXPECT_EQ(light.top, general.top) << what;
      EXPECT_EQ(light.elements, general.elements) << what;
    }
  }
  return light;
}


}  // namespace

TEST(PickleLight, TestDataReadsAlikeAndTorchsEntriesTakeTheLightPath) {
  const auto pickles = ds::diag::hang::testing::picklesInTestData(true);
  ASSERT_GE(pickles.size(), 6u);
  std::size_t torch = 0;
  for (const auto& [path, bytes] : pickles) {
    const Outcome light = expectSameAsGeneral(bytes, path);
    if (path.find("torch-2.15-gloo/rank_") != std::string::npos) {
      ++torch;
      // Entries that write a string for the first time (a PUT read back later) take the general
      // machine; the others, most of them, the light path.
      EXPECT_GE(light.stats.lightElements, light.elements.size() / 2) << path;
    }
  }
  EXPECT_GE(torch, 1u);
}

TEST(PickleLight, EdgeShapesReadAlike) {
  auto list = [](const std::function<void(P&)>& elements) {
    P p;
    p.op('}').op('(').str("entries").op(']').op('(');
    elements(p);
    return p.op('e').op('u').op('.').bytes();
  };
  auto entry = [](P& p, const std::function<void(P&)>& body) { body(p.op('}').op('(')), p.op('u'); };
  const std::map<std::string, std::string> cases = {
      {"memo keys and values read back",
       list([&](P& p) {
         entry(p, [](P& e) { e.str("record_id").op('q').u1(1).int1(1).str("state").op('q').u1(2).str("x").op('q').u1(3); });
         for (int i = 0; i < 4; ++i) entry(p, [](P& e) { e.op('h').u1(1).int1(2).op('h').u1(2).op('h').u1(3); });
       })},
      {"a PUT read back inside a later entry", list([&](P& p) {
         entry(p, [](P& e) { e.str("a").int1(1); });
         entry(p, [](P& e) { e.str("b").op('q').u1(7).op('h').u1(7).int1(2); });
         entry(p, [](P& e) { e.op('h').u1(7).int1(3); });
       })},
      {"memo containers inside entries", list([&](P& p) {
         entry(p, [](P& e) { e.str("frames").op(']').op('(').op('}').op('(').str("line").int1(5).op('u').op('q').u1(9).op('e'); });
         for (int i = 0; i < 3; ++i) entry(p, [](P& e) { e.str("frames").op(']').op('(').op('h').u1(9).op('h').u1(9).op('e'); });
       })},
      {"Python's single APPEND and SETITEM", list([&](P& p) {
         for (int i = 0; i < 3; ++i)
           p.op('}').str("input_sizes").op(']').op(']').int1(16).op('a').op('a').op('s');
         entry(p, [](P& e) { e.str("t").op(')').str("u").int1(1).int1(2).op(0x86).str("v").op('(').int1(1).op('t'); });
       })},
      {"scalars of every kind", list([&](P& p) {
         entry(p, [](P& e) {
           e.str("n").op('N').str("t").op(0x88).str("f").op(0x89).str("i2").op('M').u1(1).u1(2);
           e.str("i4").op('J').u4(0xfffffff0u).str("g").op('G').raw("\x3f\xf4\x00\x00\x00\x00\x00\x00"s);
           e.str("l0").op(0x8a).u1(0).str("l9").op(0x8a).u1(9).raw("\xff\xff\xff\xff\xff\xff\xff\xff\x00"s);
           e.str("lneg").op(0x8a).u1(2).raw("\x00\xff"s).str("l10").op(0x8a).u1(1).raw("\x80"s);
         });
         entry(p, [](P& e) { e.str("wide").op(0x8a).u1(10).raw("\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01"s); });
       })},
      {"a string that is not UTF-8, and a key that is a number", list([&](P& p) {
         entry(p, [](P& e) { e.str("bad").op(0x8c).u1(2).raw("\xc3\x28"s); });
         entry(p, [](P& e) { e.str("d").op('}').op('(').int1(4).int1(5).op('u'); });
         entry(p, [](P& e) { e.str("ok").op(0x8c).u1(2).raw("\xc3\xa9"s); });
       })},
      {"an entry changed after the next began", list([&](P& p) {
         entry(p, [](P& e) { e.str("a").int1(1); });
         entry(p, [](P& e) { e.str("b").int1(2); });
         p.str("late").int1(3).op('s');
       })},
      {"entries that are not dicts", list([&](P& p) {
         entry(p, [](P& e) { e.str("a").int1(1); });
         p.int1(7);
         entry(p, [](P& e) { e.str("a").int1(2); });
         p.op('}').op(0x85);
         entry(p, [](P& e) { e.str("a").int1(3); });
       })},
      {"an entry filled in two batches", list([&](P& p) {
         p.op('}').op('(').str("a").int1(1).op('u').op('(').str("b").int1(2).op('u');
         entry(p, [](P& e) { e.str("c").int1(3); });
       })},
      {"Python's batches of entries", [] {
         P p;
         p.op('}').op('(').str("entries").op(']').op('(');
         for (int b = 0; b < 3; ++b) {
           if (b > 0) p.op('(');
           for (int i = 0; i < 4; ++i) p.op('}').op('q').u1(static_cast<std::uint8_t>(10 + 4 * b + i)).op('(').str("i").int1(static_cast<std::uint8_t>(i)).op('u');
           p.op('e');
         }
         return p.op('u').op('.').bytes();
       }()},
      {"a PUT with nothing above its MARK", list([&](P& p) {
         entry(p, [](P& e) { e.str("a").int1(1); });
         p.op('}').op('(').op('q').u1(50).str("a").int1(2).op('u');
       })},
      {"APPENDS reaching below an outer MARK", list([&](P& p) {
         entry(p, [](P& e) { e.str("a").int1(1); });
         p.op('}').op('(').str("l").op(']').op('(').op('(').int1(1).op('e').op('e').op('u');
       })},
      {"a memo key beyond the largest", list([&](P& p) {
         entry(p, [](P& e) { e.str("a").int1(1); });
         entry(p, [](P& e) { e.str("b").op('r').u4(0x7fffffffu).int1(2); });
       })},
      {"an entry ending the file", P().op('}').op('(').str("entries").op(']').op('(').op('}').op('(').str("a").int1(1).op('u').bytes()},
  };
  for (const auto& [what, bytes] : cases) {
    const Outcome light = expectSameAsGeneral(bytes, what);
    if (what == "memo keys and values read back" || what == "Python's batches of entries") {
      EXPECT_GE(light.stats.lightElements, 3u) << what;
    }
  }
}

TEST(PickleLight, NestingNearTheLimitReadsAlike) {
  for (std::size_t levels : {1u, 2u, 5u, 9u, 14u}) {
    P p;
    p.op('}').op('(').str("entries").op(']').op('(').op('}').op('(').str("deep");
    for (std::size_t k = 0; k < levels; ++k) p.op(']').op('(');
    p.int1(1);
    for (std::size_t k = 0; k < levels; ++k) p.op('e');
    p.op('u').op('e').op('u').op('.');
    for (std::size_t maxDepth : {4u, 6u, 8u, 12u, 1000u})
      expectSameAsGeneral(p.bytes(), fmt::format("{} levels, maxDepth {}", levels, maxDepth), maxDepth);
  }
}

// Bytes changed at random in real dumps: whatever the reader makes of them, both paths agree.
TEST(PickleLight, MutatedDumpsReadAlike) {
  const auto pickles = ds::diag::hang::testing::picklesInTestData(true);
  std::mt19937 rng(20261207);
  int compared = 0;
  for (const auto& [path, original] : pickles) {
    if (path.find("nested") != std::string::npos) continue;
    for (int round = 0; round < 400; ++round) {
      std::string bytes = original;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < edits; ++k) {
        const std::size_t at = rng() % bytes.size();
        switch (rng() % 4) {
          case 0:
            bytes[at] = static_cast<char>(rng());
            break;
          case 1:
            bytes.erase(at, 1 + rng() % 4);
            break;
          case 2:
            bytes.insert(at, 1, static_cast<char>("}(ue]qh0s.a\x86"[rng() % 13]));
            break;
          default:
            bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
        }
        if (bytes.empty()) bytes = "\x80";
      }
      expectSameAsGeneral(bytes, fmt::format("{} mutation {}", path, round));
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000);
}
