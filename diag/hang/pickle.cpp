#include "diag/hang/pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/common/error.h"
#include "engine/host/resources.h"

namespace ds::diag::hang {

namespace {

using nlohmann::json;

// Opcode bytes, named as in Python's Lib/pickletools.py.
constexpr std::uint8_t kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kDup = '2', kFloat = 'F',
                       kInt = 'I', kBinInt = 'J', kBinInt1 = 'K', kLong = 'L', kBinInt2 = 'M', kNone = 'N',
                       kPersId = 'P', kBinPersId = 'Q', kReduce = 'R', kString = 'S', kBinString = 'T',
                       kShortBinString = 'U', kUnicode = 'V', kBinUnicode = 'X', kAppend = 'a', kBuild = 'b',
                       kGlobal = 'c', kDict = 'd', kEmptyDict = '}', kAppends = 'e', kGet = 'g',
                       kBinGet = 'h', kInst = 'i', kLongBinGet = 'j', kList = 'l', kEmptyList = ']',
                       kObj = 'o', kPut = 'p', kBinPut = 'q', kLongBinPut = 'r', kSetItem = 's', kTuple = 't',
                       kEmptyTuple = ')', kSetItems = 'u', kBinFloat = 'G', kBinBytes = 'B',
                       kShortBinBytes = 'C', kProto = 0x80, kNewObj = 0x81, kExt1 = 0x82, kExt2 = 0x83,
                       kExt4 = 0x84, kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88,
                       kNewFalse = 0x89, kLong1 = 0x8a, kLong4 = 0x8b, kShortBinUnicode = 0x8c,
                       kBinUnicode8 = 0x8d, kBinBytes8 = 0x8e, kEmptySet = 0x8f, kAddItems = 0x90,
                       kFrozenSet = 0x91, kNewObjEx = 0x92, kStackGlobal = 0x93, kMemoize = 0x94,
                       kFrame = 0x95, kByteArray8 = 0x96, kNextBuffer = 0x97, kReadonlyBuffer = 0x98;

// How an opcode's argument is laid out: fixed little-endian ints, a big-endian double, a line of
// text ending in '\n', or a byte string after a 1-, 4- or 8-byte length.
enum class Arg : std::uint8_t { kNone, kU1, kU2, kI4, kU4, kU8, kF8, kLine, kLen1, kLen4, kLen8 };

struct OpInfo {
  const char* name = nullptr;  // nullptr: not an opcode
  Arg arg = Arg::kNone;
  const char* refusal = nullptr;  // why dsdiag refuses it; nullptr: it only builds data
};

constexpr const char* kImports = "would import code";
constexpr const char* kCalls = "would call code";

constexpr std::array<OpInfo, 256> kOps = [] {
  std::array<OpInfo, 256> t{};
  auto op = [&t](std::uint8_t code, const char* name, Arg arg = Arg::kNone, const char* refusal = nullptr) {
    t[code] = OpInfo{name, arg, refusal};
  };
  op(kMark, "MARK"), op(kStop, "STOP"), op(kPop, "POP"), op(kPopMark, "POP_MARK"), op(kDup, "DUP");
  op(kFloat, "FLOAT", Arg::kLine), op(kInt, "INT", Arg::kLine), op(kLong, "LONG", Arg::kLine);
  op(kBinInt, "BININT", Arg::kI4), op(kBinInt1, "BININT1", Arg::kU1), op(kBinInt2, "BININT2", Arg::kU2);
  op(kLong1, "LONG1", Arg::kLen1), op(kLong4, "LONG4", Arg::kLen4), op(kBinFloat, "BINFLOAT", Arg::kF8);
  op(kNone, "NONE"), op(kNewTrue, "NEWTRUE"), op(kNewFalse, "NEWFALSE");
  op(kUnicode, "UNICODE", Arg::kLine), op(kBinUnicode, "BINUNICODE", Arg::kLen4);
  op(kShortBinUnicode, "SHORT_BINUNICODE", Arg::kLen1), op(kBinUnicode8, "BINUNICODE8", Arg::kLen8);
  op(kBinString, "BINSTRING", Arg::kLen4), op(kShortBinString, "SHORT_BINSTRING", Arg::kLen1);
  op(kBinBytes, "BINBYTES", Arg::kLen4), op(kShortBinBytes, "SHORT_BINBYTES", Arg::kLen1);
  op(kBinBytes8, "BINBYTES8", Arg::kLen8);
  op(kEmptyDict, "EMPTY_DICT"), op(kEmptyList, "EMPTY_LIST"), op(kEmptyTuple, "EMPTY_TUPLE");
  op(kEmptySet, "EMPTY_SET"), op(kDict, "DICT"), op(kList, "LIST"), op(kTuple, "TUPLE");
  op(kTuple1, "TUPLE1"), op(kTuple2, "TUPLE2"), op(kTuple3, "TUPLE3"), op(kFrozenSet, "FROZENSET");
  op(kAppend, "APPEND"), op(kAppends, "APPENDS"), op(kSetItem, "SETITEM"), op(kSetItems, "SETITEMS");
  op(kAddItems, "ADDITEMS");
  op(kGet, "GET", Arg::kLine), op(kBinGet, "BINGET", Arg::kU1), op(kLongBinGet, "LONG_BINGET", Arg::kU4);
  op(kPut, "PUT", Arg::kLine), op(kBinPut, "BINPUT", Arg::kU1), op(kLongBinPut, "LONG_BINPUT", Arg::kU4);
  op(kMemoize, "MEMOIZE"), op(kProto, "PROTO", Arg::kU1), op(kFrame, "FRAME", Arg::kU8);
  op(kGlobal, "GLOBAL", Arg::kNone, kImports), op(kStackGlobal, "STACK_GLOBAL", Arg::kNone, kImports);
  op(kInst, "INST", Arg::kNone, kImports), op(kExt1, "EXT1", Arg::kNone, kImports);
  op(kExt2, "EXT2", Arg::kNone, kImports), op(kExt4, "EXT4", Arg::kNone, kImports);
  op(kReduce, "REDUCE", Arg::kNone, kCalls), op(kBuild, "BUILD", Arg::kNone, kCalls);
  op(kObj, "OBJ", Arg::kNone, kCalls), op(kNewObj, "NEWOBJ", Arg::kNone, kCalls);
  op(kNewObjEx, "NEWOBJ_EX", Arg::kNone, kCalls);
  op(kPersId, "PERSID", Arg::kNone, "would call the reader's persistent-id hook");
  op(kBinPersId, "BINPERSID", Arg::kNone, "would call the reader's persistent-id hook");
  op(kNextBuffer, "NEXT_BUFFER", Arg::kNone, "needs out-of-band buffers");
  op(kReadonlyBuffer, "READONLY_BUFFER", Arg::kNone, "needs out-of-band buffers");
  op(kString, "STRING", Arg::kNone, "holds a Python 2 quoted string, which no Flight Recorder dump uses");
  op(kByteArray8, "BYTEARRAY8", Arg::kNone, "holds a bytearray, which no Flight Recorder dump uses");
  return t;
}();

constexpr std::uint64_t kMaxMemoKey = 1ull << 30;  // Python numbers its memo 0, 1, 2, ...
constexpr std::uint64_t kValueBytes = 64;          // a json value with its share of a container
constexpr std::size_t kNoSlot = std::numeric_limits<std::size_t>::max();

struct Instr {
  std::uint8_t code = 0;
  std::size_t at = 0;     // offset of the opcode byte
  std::uint64_t n = 0;    // kU1 ... kU8; kI4 as the bits of an int64
  double f = 0;           // kF8
  std::string_view text;  // kLine without its '\n'; kLen*: the bytes
};

// Splits the bytes into instructions. Refuses code opcodes and unknown bytes as soon as it meets
// them, so that the first pass refuses a file before anything is built.
class Decoder {
 public:
  Decoder(std::string_view bytes, const std::string& name) : b_(bytes), name_(name) {}

  bool atEnd() const { return pos_ >= b_.size(); }
  std::string_view bytes() const { return b_; }
  std::size_t pos() const { return pos_; }
  void seek(std::size_t pos) { pos_ = pos; }

  [[noreturn, gnu::cold, gnu::noinline]] void fail(std::size_t at, std::string_view what) const {
    throw ConfigError(fmt::format("{}: byte {}: {}", name_, at, what));
  }

  // Decodes the next instruction into `in` (filled in place: this is the reader's hottest loop).
  void next(Instr& in) {
    in.at = pos_;
    in.code = static_cast<std::uint8_t>(b_[pos_++]);
    const OpInfo& op = kOps[in.code];
    if (op.name == nullptr || op.refusal != nullptr) [[unlikely]] refuse(in);
    switch (op.arg) {
      case Arg::kNone:
        break;
      case Arg::kU1:
        in.n = little<1>(in);
        break;
      case Arg::kU2:
        in.n = little<2>(in);
        break;
      case Arg::kU4:
        in.n = little<4>(in);
        break;
      case Arg::kU8:
        in.n = little<8>(in);
        break;
      case Arg::kI4:
        in.n = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int32_t>(little<4>(in))});
        break;
      case Arg::kF8:
        in.f = std::bit_cast<double>(__builtin_bswap64(little<8>(in)));
        break;  // big-endian
      case Arg::kLine: {
        const std::size_t nl = b_.find('\n', pos_);
        if (nl == std::string_view::npos) truncated(in);
        in.text = b_.substr(pos_, nl - pos_);
        pos_ = nl + 1;
        break;
      }
      case Arg::kLen1:
        in.text = take(little<1>(in), in);
        break;
      case Arg::kLen4: {
        const std::uint64_t len = little<4>(in);
        if ((in.code == kBinString || in.code == kLong4) && len > 0x7fffffffu) {
          fail(in.at, fmt::format("pickle opcode {} has a negative length; the file is corrupt.", op.name));
        }
        in.text = take(len, in);
        break;
      }
      case Arg::kLen8:
        in.text = take(little<8>(in), in);
        break;
    }
    if (in.code == kProto && in.n > 5) [[unlikely]] {
      fail(in.at, fmt::format("pickle protocol {} is newer than 5, the highest dsdiag reads; the file is "
                              "corrupt or was not written by torch.",
                              in.n));
    }
  }

  // The same for bytes that next() already decoded without error (the first pass): no checks.
  void nextTrusted(Instr& in) {
    in.at = pos_;
    in.code = static_cast<std::uint8_t>(b_[pos_++]);
    auto fixed = [this](std::size_t n) {
      std::uint64_t v = 0;
      std::memcpy(&v, b_.data() + pos_, n);
      pos_ += n;
      return v;
    };
    auto take = [this](std::uint64_t len) {
      const std::string_view s = b_.substr(pos_, static_cast<std::size_t>(len));
      pos_ += static_cast<std::size_t>(len);
      return s;
    };
    switch (kOps[in.code].arg) {
      case Arg::kNone:
        break;
      case Arg::kU1:
        in.n = fixed(1);
        break;
      case Arg::kU2:
        in.n = fixed(2);
        break;
      case Arg::kU4:
        in.n = fixed(4);
        break;
      case Arg::kU8:
        in.n = fixed(8);
        break;
      case Arg::kI4:
        in.n = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int32_t>(fixed(4))});
        break;
      case Arg::kF8:
        in.f = std::bit_cast<double>(__builtin_bswap64(fixed(8)));
        break;
      case Arg::kLine: {
        const std::size_t nl = b_.find('\n', pos_);
        in.text = b_.substr(pos_, nl - pos_);
        pos_ = nl + 1;
        break;
      }
      case Arg::kLen1:
        in.text = take(fixed(1));
        break;
      case Arg::kLen4:
        in.text = take(fixed(4));
        break;
      case Arg::kLen8:
        in.text = take(fixed(8));
        break;
    }
  }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void refuse(const Instr& in) const {
    const OpInfo& op = kOps[in.code];
    if (op.name == nullptr) {
      fail(in.at,
           fmt::format("0x{:02x} is not a pickle opcode; the file is corrupt or is not a pickle.", in.code));
    }
    fail(in.at, fmt::format("pickle opcode {} (0x{:02x}) {}; dsdiag reads data only and refuses this file. "
                            "Was it written by torch's Flight Recorder?",
                            op.name, in.code, op.refusal));
  }

  [[noreturn, gnu::cold, gnu::noinline]] void truncated(const Instr& in) const {
    fail(in.at,
         fmt::format("the file ends inside pickle opcode {}; it is truncated. Was the rank killed while "
                     "writing its dump?",
                     kOps[in.code].name));
  }

  template <std::size_t N>
  std::uint64_t little(const Instr& in) {
    static_assert(std::endian::native == std::endian::little, "the pickle reader assumes a little-endian host");
    if (b_.size() - pos_ < N) [[unlikely]] truncated(in);
    std::uint64_t v = 0;
    std::memcpy(&v, b_.data() + pos_, N);
    pos_ += N;
    return v;
  }

  std::string_view take(std::uint64_t len, const Instr& in) {
    const std::size_t left = b_.size() - pos_;
    if (len > left) [[unlikely]] {
      fail(in.at,
           fmt::format("pickle opcode {} declares {} bytes but only {} remain; the file is truncated or "
                       "corrupt. Was the rank killed while writing its dump?",
                       kOps[in.code].name, len, left));
    }
    std::string_view s = b_.substr(pos_, static_cast<std::size_t>(len));
    pos_ += static_cast<std::size_t>(len);
    return s;
  }

  std::string_view b_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

// `width` bytes at `p` as a little-endian unsigned integer (the host is little-endian).
std::uint64_t littleEndian(const std::uint8_t* p, std::size_t width) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, width);
  return v;
}

bool isGet(std::uint8_t c) { return c == kGet || c == kBinGet || c == kLongBinGet; }

std::uint64_t memoKey(const Instr& in, const Decoder& d) {
  std::uint64_t key = in.n;
  if (in.code == kGet || in.code == kPut) {
    auto [end, ec] = std::from_chars(in.text.data(), in.text.data() + in.text.size(), key);
    if (ec != std::errc() || end != in.text.data() + in.text.size()) {
      d.fail(in.at, fmt::format("pickle opcode {} has the memo key '{}', not a number; the file is corrupt.",
                                kOps[in.code].name, in.text.substr(0, 40)));
    }
  }
  if (key > kMaxMemoKey) {
    d.fail(in.at,
           fmt::format("memo key {} is larger than any pickle writer uses; the file is corrupt.", key));
  }
  return key;
}

// The memo keys some GET reads: a byte per key up to kDense (read and set on every GET and PUT), a
// set beyond it (a corrupt file's LONG_BINGET 1,000,000,000 must not cost a gigabyte).
class MemoKeys {
 public:
  static constexpr std::uint64_t kDense = 1 << 20;
  void add(std::uint64_t key) {
    if (key >= kDense) {
      sparse_.insert(key);
      return;
    }
    if (key >= dense_.size()) dense_.resize(key + 1);
    dense_[key] = 1;
  }
  bool has(std::uint64_t key) const {
    return key < dense_.size() ? dense_[key] != 0 : key >= kDense && sparse_.count(key) != 0;
  }
  std::size_t denseSize() const { return dense_.size(); }

 private:
  std::vector<std::uint8_t> dense_;
  std::unordered_set<std::uint64_t> sparse_;
};

// The first pass, checked: which memo keys a GET reads, so that PUT keeps only the values read back.
// Throws the precise ConfigError of the first bad instruction.
MemoKeys scanGetsChecked(std::string_view bytes, const std::string& name) {
  Decoder d(bytes, name);
  MemoKeys used;
  Instr in;
  while (!d.atEnd()) {
    d.next(in);
    if (in.code == kStop) return used;
    if (isGet(in.code)) {
      const std::uint64_t key = memoKey(in, d);
      used.add(key);
    }
  }
  d.fail(bytes.size(),
         "the pickle ends without its STOP opcode; the file is truncated. Was the rank killed while "
         "writing its dump?");
}

// How the fast scan steps over an opcode's argument.
enum class Step : std::uint8_t { kBad, kFixed, kLen1, kLen4, kLen8, kLine, kGet1, kGet4, kGetLine, kProto, kStop };
struct ScanOp {
  Step step = Step::kBad;
  std::uint8_t width = 0;  // kFixed: the argument's bytes
};
constexpr std::array<ScanOp, 256> kScan = [] {
  std::array<ScanOp, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const OpInfo& op = kOps[c];
    if (op.name == nullptr || op.refusal != nullptr) continue;  // kBad: the checked pass says why
    ScanOp& s = t[c];
    switch (op.arg) {
      case Arg::kNone:
        s = {Step::kFixed, 0};
        break;
      case Arg::kU1:
        s = {Step::kFixed, 1};
        break;
      case Arg::kU2:
        s = {Step::kFixed, 2};
        break;
      case Arg::kU4:
      case Arg::kI4:
        s = {Step::kFixed, 4};
        break;
      case Arg::kU8:
      case Arg::kF8:
        s = {Step::kFixed, 8};
        break;
      case Arg::kLine:
        s = {Step::kLine, 0};
        break;
      case Arg::kLen1:
        s = {Step::kLen1, 0};
        break;
      case Arg::kLen4:
        s = {Step::kLen4, 0};
        break;
      case Arg::kLen8:
        s = {Step::kLen8, 0};
        break;
    }
  }
  t[kBinGet] = {Step::kGet1, 1};
  t[kLongBinGet] = {Step::kGet4, 4};
  t[kGet] = {Step::kGetLine, 0};
  t[kProto] = {Step::kProto, 1};
  t[kStop] = {Step::kStop, 0};
  t[kBinString] = t[kLong4] = {Step::kBad, 0};  // a negative length is possible: the checked pass
  return t;
}();

// The first pass, fast: the same walk without building instructions. Anything unusual (a refused
// or unknown opcode, truncation, a bad memo key, a negative length) is left to the checked pass,
// which starts over and names the problem exactly.
MemoKeys scanGets(std::string_view bytes, const std::string& name) {
  const auto* const b = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const std::size_t n = bytes.size();
  MemoKeys used;
  std::size_t p = 0;
  auto le = [b](std::size_t at, std::size_t width) { return littleEndian(b + at, width); };
  while (p < n) {
    // Far from the end, the common steps need no width check (no fixed argument is longer than 8).
    while (n - p >= 16) {
      const ScanOp op = kScan[b[p]];
      if (op.step == Step::kFixed) {
        p += 1 + op.width;
      } else if (op.step == Step::kGet1) {
        used.add(b[p + 1]);
        p += 2;
      } else {
        break;
      }
    }
    if (p >= n) break;
    const ScanOp op = kScan[b[p]];
    const std::size_t left = n - p - 1;  // bytes after the opcode
    // The common steps first, as plain branches: they predict better than one jump table.
    if (op.step == Step::kFixed) {
      if (left < op.width) return scanGetsChecked(bytes, name);
      p += 1 + op.width;
      continue;
    }
    if (op.step == Step::kGet1) {
      if (left < 1) return scanGetsChecked(bytes, name);
      const std::uint8_t key = b[p + 1];
      used.add(key);
      p += 2;
      continue;
    }
    switch (op.step) {
      case Step::kBad:
        return scanGetsChecked(bytes, name);
      case Step::kFixed:
        if (left < op.width) return scanGetsChecked(bytes, name);
        p += 1 + op.width;
        break;
      case Step::kLen1: {
        if (left < 1 || left - 1 < b[p + 1]) return scanGetsChecked(bytes, name);
        p += 2 + b[p + 1];
        break;
      }
      case Step::kLen4: {
        if (left < 4) return scanGetsChecked(bytes, name);
        const std::uint64_t len = le(p + 1, 4);
        if (left - 4 < len) return scanGetsChecked(bytes, name);
        p += 5 + len;
        break;
      }
      case Step::kLen8: {
        if (left < 8) return scanGetsChecked(bytes, name);
        const std::uint64_t len = le(p + 1, 8);
        if (left - 8 < len) return scanGetsChecked(bytes, name);
        p += 9 + len;
        break;
      }
      case Step::kLine: {
        const void* nl = std::memchr(b + p + 1, '\n', left);
        if (nl == nullptr) return scanGetsChecked(bytes, name);
        p = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nl) - b) + 1;
        break;
      }
      case Step::kGet1:
      case Step::kGet4: {
        if (left < op.width) return scanGetsChecked(bytes, name);
        const std::uint64_t key = le(p + 1, op.width);
        if (key > kMaxMemoKey) return scanGetsChecked(bytes, name);
        used.add(key);
        p += 1 + op.width;
        break;
      }
      case Step::kProto:
        if (left < 1 || b[p + 1] > 5) return scanGetsChecked(bytes, name);
        p += 2;
        break;
      case Step::kGetLine:
        return scanGetsChecked(bytes, name);  // protocol 0's text keys: rare, checked
      case Step::kStop:
        return used;
    }
  }
  return scanGetsChecked(bytes, name);  // no STOP: the checked pass says so
}

// Strings become valid UTF-8 so that any consumer can dump them: invalid bytes (a Python str with
// lone surrogates, binary bytes) become U+FFFD.
std::size_t utf8Length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (s.size() - i < n) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return n;
}

// Whether s is valid UTF-8 as it stands (the common case: no copy is made then).
bool isValidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // ASCII eight bytes at a time: every dump names the world's 16,384 ranks in one 110 KB string.
    if (s.size() - i >= 8) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = utf8Length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// s with every invalid byte replaced by U+FFFD.
std::string validUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8Length(s, i);
    if (n == 0)
      out += "\xEF\xBF\xBD", ++i;
    else
      out.append(s.substr(i, n)), i += n;
  }
  return out;
}

void appendUtf8(std::string& out, std::uint32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18)), out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

using detail::PickleContainer;
using V = detail::PickleValue;
using T = V::Type;

// A value made in registers. Filling a V field by field in memory and then copying it whole stalls
// the CPU (a 16-byte load cannot take its bytes from the smaller stores just before it); that stall
// on every push was about a fifth of the time of reading a dump.
V makeValue(T type, std::uint64_t payload, std::uint32_t len = 0) {
  struct Raw {
    std::uint64_t head, payload;
  };
  static_assert(sizeof(V) == sizeof(Raw) && offsetof(V, len) == 4 && offsetof(V, i) == 8);
  return std::bit_cast<V>(Raw{static_cast<std::uint64_t>(type) | (std::uint64_t{len} << 32), payload});
}

const char* kindName(T k) {
  switch (k) {
    case T::kList:
      return "list";
    case T::kTuple:
      return "tuple";
    case T::kDict:
      return "dict";
    case T::kSet:
      return "set";
    default:
      return "plain value";
  }
}

// What the reader's own memory counts: a container, a stack slot, a memo entry, a MARK.
constexpr std::uint64_t kContainerBytes = 64, kItemBytes = sizeof(V), kSlotBytes = 32, kMemoBytes = 32,
                        kMarkBytes = sizeof(std::size_t);
constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max() / 4;

std::uint64_t addBytes(std::uint64_t a, std::uint64_t b) { return a > kSaturated - b ? kSaturated : a + b; }

json toJsonOf(const std::vector<PickleContainer>& table, const V& v, const V* flat) {
  switch (v.type) {
    case T::kNone:
    case T::kHandedOver:
      return nullptr;
    case T::kBool:
      return v.b;
    case T::kInt:
      return v.i;
    case T::kUInt:
      return v.u;
    case T::kFloat:
      return v.f;
    case T::kString:
      return std::string(v.s, v.len);
    case T::kOwnedString:
      return table[v.ref].text;
    default:
      break;
  }
  const V* items = v.isFlat() ? flat + v.ref : table[v.ref].items.data();
  const std::size_t n = v.isFlat() ? v.len : table[v.ref].items.size();
  if (v.type == T::kDict || v.type == T::kFlatDict) {
    json out = json::object();
    for (std::size_t k = 0; k + 1 < n; k += 2) {
      const V& key = items[k];
      std::string text = key.type == T::kString ? std::string(key.s, key.len) : table[key.ref].text;
      out[std::move(text)] = toJsonOf(table, items[k + 1], flat);
    }
    return out;
  }
  json out = json::array();
  for (std::size_t k = 0; k < n; ++k) out.push_back(toJsonOf(table, items[k], flat));
  return out;
}

// An element of more values or deeper nesting than FR's (about 70 values, 3 levels) is left to the
// general machine, which accounts for its memory and depth.
constexpr std::size_t kMaxLightValues = 4096, kMaxLightMarks = 16;

// The light path's buffer: its stack and the element's flat values together, never more than
// kMaxLightValues + 1 (readLight checks), so that copying between the two never overlaps.
constexpr std::size_t kLightBuffer = 2 * kMaxLightValues + 4;
struct LightBuffers {
  std::vector<V> values = std::vector<V>(kLightBuffer);
};

// Each thread keeps one set of buffers for the pickles it reads one after the other (16,384 dumps
// should not allocate and clear 130 KB each); a reader that starts while another of the same thread
// is still in its callback makes its own.
class LightLease {
 public:
  LightLease() = default;
  LightLease(const LightLease&) = delete;
  LightLease& operator=(const LightLease&) = delete;
  ~LightLease() {
    if (shared_) inUse() = false;
  }
  LightBuffers& get() {
    if (buffers_ == nullptr) {
      if (!inUse()) {
        inUse() = true, shared_ = true;
        buffers_ = &threadBuffers();
      } else {
        own_ = std::make_unique<LightBuffers>();
        buffers_ = own_.get();
      }
    }
    return *buffers_;
  }

 private:
  static LightBuffers& threadBuffers() {
    thread_local LightBuffers b;
    return b;
  }
  static bool& inUse() {
    thread_local bool used = false;
    return used;
  }
  LightBuffers* buffers_ = nullptr;
  std::unique_ptr<LightBuffers> own_;
  bool shared_ = false;
};

// A memo entry: a value the file reads back later. It keeps a container alive (memoRefs) without
// holding it: a container only the memo and one stack slot hold is still built in place, so a GET
// after Python's "memoize the empty dict, then fill it" sees it filled.
struct MemoCell {
  V value;
  bool present = false;
};

class Vm {
 public:
  Vm(std::string_view bytes, const std::string& name, const PickleOptions& options)
      : gets_(scanGets(bytes, name)), d_(bytes, name), opt_(options) {
    dense_.resize(gets_.denseSize());
    lightOn_ = opt_.lightElements && (opt_.onNode || opt_.onElement) && !opt_.streamKey.empty();
  }

  // The first pass checked every instruction up to STOP (codes, lengths, truncation), so this one
  // decodes without checks.
  // The opcodes torch's pickler writes are decoded and run here directly; the others go through
  // nextTrusted() and exec().
  json run() {
    const std::string_view bytes = d_.bytes();
    const auto* const b = reinterpret_cast<const std::uint8_t*>(bytes.data());
    auto le = [b](std::size_t at, std::size_t width) { return littleEndian(b + at, width); };
    std::size_t p = 0;
    while (p < bytes.size()) {
      in_.at = p;
      in_.code = b[p];
      switch (in_.code) {
        case kBinGet:
          in_.n = b[p + 1], p += 2;
          get(in_.n);
          break;
        case kBinPut:
          in_.n = b[p + 1], p += 2;
          put(in_.n);
          break;
        case kLongBinGet:
          in_.n = le(p + 1, 4), p += 5;
          get(memoKey(in_, d_));
          break;
        case kLongBinPut:
          in_.n = le(p + 1, 4), p += 5;
          put(memoKey(in_, d_));
          break;
        case kMark:
          ++p;
          account(kMarkBytes), marks_.push_back(stack_.size());
          break;
        case kBinUnicode: {
          const std::size_t len = le(p + 1, 4);
          pushString(bytes.substr(p + 5, len));
          p += 5 + len;
          break;
        }
        case kShortBinUnicode: {
          const std::size_t len = b[p + 1];
          pushString(bytes.substr(p + 2, len));
          p += 2 + len;
          break;
        }
        case kBinInt1:
          pushInt(b[p + 1]), p += 2;
          break;
        case kBinInt2:
          pushInt(static_cast<std::int64_t>(le(p + 1, 2))), p += 3;
          break;
        case kBinInt:
          pushInt(static_cast<std::int32_t>(le(p + 1, 4))), p += 5;
          break;
        case kNone:
          ++p, push(V{});
          break;
        case kNewTrue:
        case kNewFalse:
          ++p, pushBool(in_.code == kNewTrue);
          break;
        case kEmptyDict:
          if (lightOn_ && atElementStart()) {
            if (const std::size_t end = readLight(p)) {
              p = end;
              break;
            }
          }
          ++p, pushContainer(T::kDict);
          break;
        case kEmptyList:
          ++p, emptyList();
          break;
        case kSetItems:
          ++p, setItemsOp();
          handOverIfDue();
          break;
        case kAppends:
          ++p, appendsOp();
          handOverIfDue();
          break;
        case kStop: {
          // Python's pickler leaves one value; more, or an open MARK, is a corrupt file (whose
          // unfinished elements may already be handed over, so it cannot be read as Python would).
          if (avail() > 0 && (stack_.size() > 1 || !marks_.empty())) {
            fail(fmt::format("the pickle stops with {} values and {} open MARK(s) on its stack, where a "
                             "complete pickle leaves one value; the file is corrupt.",
                             stack_.size(), marks_.size()));
          }
          const V top = pop();
          json out = toJson(top);
          unref(top);
          return out;
        }
        default:
          d_.seek(p);
          d_.nextTrusted(in_);
          p = d_.pos();
          exec();
          handOverIfDue();
      }
    }
    d_.fail(in_.at, "the pickle ends without its STOP opcode; the file is truncated.");
  }

 private:
  [[noreturn]] void fail(std::string_view what) const { d_.fail(in_.at, what); }
  const char* opName() const { return kOps[in_.code].name; }

  void exec() {
    const Arg arg = kOps[in_.code].arg;
    const bool isLong = in_.code == kLong1 || in_.code == kLong4;
    if ((arg == Arg::kLen1 || arg == Arg::kLen4 || arg == Arg::kLen8) && !isLong) {
      return pushString(in_.text);  // str, Python 2 str, bytes
    }
    switch (in_.code) {
      case kProto:
      case kFrame:
        break;
      case kMark:
        account(kMarkBytes), marks_.push_back(stack_.size());
        break;
      case kPop:
        if (avail() > 0)
          unref(pop());
        else
          unrefAll(popToMark(false));
        break;
      case kPopMark:
        unrefAll(popToMark(false));
        break;
      case kDup: {
        need(1);
        const V v = stack_.back();
        checkReadable(v);
        ref(v);
        push(v);
        break;
      }
      case kNone:
        push(V{});
        break;
      case kNewTrue:
      case kNewFalse:
        pushBool(in_.code == kNewTrue);
        break;
      case kInt:
        if (in_.text == "01" || in_.text == "00")
          pushBool(in_.text == "01");
        else
          pushJsonInt(decimal(in_.text));
        break;
      case kLong:
        pushJsonInt(decimal(in_.text.ends_with('L') ? in_.text.substr(0, in_.text.size() - 1) : in_.text));
        break;
      case kBinInt:
      case kBinInt1:
      case kBinInt2:
        pushInt(static_cast<std::int64_t>(in_.n));
        break;
      case kLong1:
      case kLong4:
        pushJsonInt(twosComplement(in_.text));
        break;
      case kBinFloat:
        pushFloat(in_.f);
        break;
      case kFloat:
        pushFloat(decimalFloat(in_.text));
        break;
      case kUnicode:
        pushOwned(rawUnicodeEscape(in_.text));
        break;
      case kEmptyDict:
      case kEmptyTuple:
      case kEmptySet:
        pushContainer(in_.code == kEmptyDict ? T::kDict : in_.code == kEmptySet ? T::kSet : T::kTuple);
        break;
      case kEmptyList:
        emptyList();
        break;
      case kList: {  // protocols 0 and 1 only: the items are moved off the stack first
        std::vector<V> items = popToMark(false);
        const bool stream = isStreamPosition();
        pushContainer(T::kList);
        if (stream) startStream();
        addAll(stack_.size() - 1, items.data(), items.data() + items.size());
        break;
      }
      case kTuple:
      case kFrozenSet: {
        std::vector<V> items = popToMark(false);
        pushContainer(in_.code == kTuple ? T::kTuple : T::kSet);
        addAll(stack_.size() - 1, items.data(), items.data() + items.size());
        break;
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const std::size_t n = in_.code - kTuple1 + 1;
        need(n);
        V items[3];
        for (std::size_t k = n; k-- > 0;) items[k] = pop();
        pushContainer(T::kTuple);
        addAll(stack_.size() - 1, items, items + n);
        break;
      }
      case kDict: {
        std::vector<V> items = popToMark(false);
        pushContainer(T::kDict);
        setItems(stack_.size() - 1, items.data(), items.data() + items.size());
        break;
      }
      case kAppend: {
        need(2);
        V item = pop();
        addAll(stack_.size() - 1, &item, &item + 1);
        break;
      }
      case kAppends:
      case kAddItems:
        appendsOp();
        break;
      case kSetItem: {
        need(3);
        V kv[2];
        kv[1] = pop(), kv[0] = pop();
        setItems(stack_.size() - 1, kv, kv + 2);
        break;
      }
      case kSetItems:
        setItemsOp();
        break;
      case kPut:
      case kBinPut:
      case kLongBinPut:
        put(memoKey(in_, d_));
        break;
      case kMemoize:
        put(stores_);
        break;
      case kGet:
      case kBinGet:
      case kLongBinGet:
        get(memoKey(in_, d_));
        break;
      default:
        DS_CHECK(false, "pickle opcode {} has no handler", opName());
    }
  }

  // Elements are complete between one another, when the innermost open MARK is the streamed list's;
  // torch's entries end with SETITEMS, so checking after it (and after the rarer opcodes) keeps the
  // elements held at once to a few.
  void handOverIfDue() {
    if (streamList_ != kNoSlot && !marks_.empty() && marks_.back() == streamList_ + 1 &&
        stack_.size() > streamList_ + 4)
      handOverEarly();
  }

  void emptyList() {
    const bool stream = isStreamPosition();
    pushContainer(T::kList);
    if (stream) startStream();
  }

  // APPENDS and ADDITEMS (torch's every list): the items are added where they lie on the stack.
  void appendsOp() {
    const bool toStream = !marks_.empty() && marks_.back() > 0 && marks_.back() - 1 == streamList_;
    const std::size_t m = popMark(toStream);
    needBelow(m, 1);
    addAll(m - 1, stack_.data() + m, stack_.data() + stack_.size());
    dropTo(m);
  }

  // SETITEMS (torch's every dict), the same way.
  void setItemsOp() {
    const std::size_t m = popMark(false);
    needBelow(m, 1);
    setItems(m - 1, stack_.data() + m, stack_.data() + stack_.size());
    dropTo(m);
  }

  // --- memory ---

  void account(std::uint64_t add) {
    liveBytes_ += add;
    if (liveBytes_ > opt_.maxLiveBytes) tooMuch();
  }
  void unaccount(std::uint64_t sub) { liveBytes_ -= std::min(sub, liveBytes_); }

  [[noreturn]] void tooMuch() const {
    fail(fmt::format(
        "the pickle holds more than {} of values at once; dsdiag refuses it rather than exhaust "
        "this node's memory. A Flight Recorder dump needs a few MB besides its entries, which are "
        "read one at a time.",
        sys::bytesText(static_cast<double>(opt_.maxLiveBytes))));
  }

  // --- containers: shared by handle, copied only when changed while another holder has them ---

  PickleContainer& c(const V& v) { return table_[v.ref]; }

  std::uint32_t newContainer(T kind) {
    std::uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      if (table_.size() >= std::numeric_limits<std::uint32_t>::max()) tooMuch();
      i = static_cast<std::uint32_t>(table_.size());
      table_.emplace_back();
    }
    PickleContainer& x = table_[i];
    x.kind = kind;
    x.streamed = false;
    x.refs = 1;
    x.memoRefs = 0;
    x.depth = kind == T::kOwnedString ? 0 : 1;
    x.bytes = kValueBytes;
    account(kContainerBytes);
    return i;
  }

  void ref(const V& v) {
    if (v.isRef()) ++c(v).refs;
  }

  void unref(const V& v) {
    if (!v.isRef()) return;
    PickleContainer& x = c(v);
    if (--x.refs == 0 && x.memoRefs == 0) destroy(v.ref);
  }
  void unrefAll(const std::vector<V>& vs) {
    for (const V& v : vs) unref(v);
  }

  // Children first. The table does not grow meanwhile (nothing is created), so `x` stays valid; its
  // buffers are kept for the next container made in this slot, unless they grew large.
  void destroy(std::uint32_t i) {
    PickleContainer& x = table_[i];
    unaccount(kContainerBytes + x.items.size() * kItemBytes + x.text.size());
    for (const V& item : x.items)
      if (item.isRef()) unref(item);
    x.items.clear();
    if (x.items.capacity() > 4096) std::vector<V>().swap(x.items);
    if (x.text.capacity() > 4096) std::string().swap(x.text);
    x.text.clear();
    free_.push_back(i);
  }

  // The container at stack_[index], made the caller's own before it changes: a copy when a parent,
  // another stack slot or an item being added also holds it (so no value changes under a holder, and
  // no container can come to hold itself).
  PickleContainer& own(std::size_t index) {
    V& v = stack_[index];
    if (c(v).refs > 1) {
      const std::uint32_t copy = newContainer(c(v).kind);
      PickleContainer& from = table_[v.ref];
      PickleContainer& to = table_[copy];
      to.items = from.items;
      to.depth = from.depth;
      to.bytes = from.bytes;
      account(to.items.size() * kItemBytes);
      for (const V& item : to.items) ref(item);
      --from.refs;  // still held by someone else: not destroyed
      v.ref = copy;
    }
    return c(v);
  }

  // --- the stack ---

  std::size_t avail() const { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }

  void need(std::size_t n) const {
    if (avail() < n) {
      fail(
          fmt::format("pickle opcode {} needs {} value(s) on the stack after the last MARK but finds {}; the "
                      "file is corrupt.",
                      opName(), n, avail()));
    }
  }

  // Takes over one reference of v.
  void push(V v) {
    account(kSlotBytes);
    stack_.push_back(v);
  }
  void pushInt(std::int64_t i) { push(makeValue(T::kInt, static_cast<std::uint64_t>(i))); }
  void pushBool(bool b) { push(makeValue(T::kBool, b ? 1 : 0)); }
  void pushFloat(double f) { push(makeValue(T::kFloat, std::bit_cast<std::uint64_t>(f))); }
  void pushJsonInt(const json& j) {
    V v;
    if (j.is_boolean()) {
      v.type = T::kBool, v.b = j.get<bool>();
    } else if (j.is_number_unsigned()) {
      v.type = T::kUInt, v.u = j.get<std::uint64_t>();
    } else {
      v.type = T::kInt, v.i = j.get<std::int64_t>();
    }
    push(v);
  }
  // A string from the file: a view when it is valid UTF-8, else a repaired copy.
  void pushString(std::string_view s) {
    if (!isValidUtf8(s)) return pushOwned(validUtf8(s));
    if (s.size() > std::numeric_limits<std::uint32_t>::max()) return pushOwned(std::string(s));
    push(makeValue(T::kString, reinterpret_cast<std::uintptr_t>(s.data()), static_cast<std::uint32_t>(s.size())));
  }
  void pushOwned(std::string text) {
    V v;
    v.type = T::kOwnedString;
    v.ref = newContainer(T::kOwnedString);
    account(text.size());
    c(v).bytes = kValueBytes + text.size();
    c(v).text = std::move(text);
    push(v);
  }
  void pushContainer(T kind) {
    push(makeValue(kind, newContainer(kind)));
  }

  [[noreturn]] void failHandedOver() const {
    fail(
        fmt::format("pickle opcode {} changes an element of '{}' after later elements were written; dsdiag "
                    "reads that list one element at a time and refuses this file (neither torch nor Python "
                    "writes this).",
                    opName(), opt_.streamKey));
  }
  [[noreturn]] void failStreamedList() const {
    fail(fmt::format(
        "pickle opcode {} refers back to the '{}' list, whose elements dsdiag reads one at a time "
        "and does not keep; it refuses this file (neither torch nor Python writes this).",
        opName(), opt_.streamKey));
  }
  // A value that may be read again (DUP, GET): not an element given away, not the streamed list.
  void checkReadable(const V& v) const {
    if (v.type == T::kHandedOver) failHandedOver();
    if (v.isRef() && table_[v.ref].streamed) failStreamedList();
  }

  // The caller takes over the popped value's reference.
  V pop() {
    need(1);
    const V v = stack_.back();
    stack_.pop_back();
    unaccount(kSlotBytes);
    if (v.type == T::kHandedOver) failHandedOver();
    if (stack_.size() == streamList_) streamList_ = kNoSlot;
    return v;
  }

  // Pops the values above the last MARK and the MARK. Only APPENDS onto the streamed list may take
  // elements already handed over.
  std::vector<V> popToMark(bool toStream) {
    const std::size_t m = popMark(toStream);
    std::vector<V> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    dropTo(m);
    return items;
  }

  // Pops the last MARK and returns where it stood; the values above it stay on the stack for the
  // caller to take (then dropTo(m)).
  std::size_t popMark(bool toStream) {
    if (marks_.empty())
      fail(fmt::format("pickle opcode {} finds no MARK before it; the file is corrupt.", opName()));
    const std::size_t m = marks_.back();
    marks_.pop_back();
    unaccount(kMarkBytes);
    for (std::size_t i = m; i < stack_.size(); ++i)
      if (stack_[i].type == T::kHandedOver && !toStream) failHandedOver();
    if (streamList_ != kNoSlot && streamList_ >= m) streamList_ = kNoSlot;
    return m;
  }

  // Forgets the stack slots from m up; their references were taken over.
  void dropTo(std::size_t m) {
    unaccount((stack_.size() - m) * kSlotBytes);
    stack_.resize(m);
  }

  // need(n) as it would read once the values from m up are popped.
  void needBelow(std::size_t m, std::size_t n) const {
    const std::size_t have = m - (marks_.empty() ? 0 : marks_.back());
    if (have < n) {
      fail(
          fmt::format("pickle opcode {} needs {} value(s) on the stack after the last MARK but finds {}; the "
                      "file is corrupt.",
                      opName(), n, have));
    }
  }

  // --- building containers ---

  std::uint64_t bytesOf(const V& v) const {
    if (v.type == T::kString) return kValueBytes + v.len;
    return v.isRef() ? table_[v.ref].bytes : kValueBytes;
  }
  std::uint32_t depthOf(const V& v) const {
    return v.isRef() && v.type != T::kOwnedString ? table_[v.ref].depth : 0;
  }

  // Adds [first, last) to parent's items (their references move in): its depth and JSON size
  // follow, and the reader's memory counts the items.
  void grow(PickleContainer& parent, const V* first, const V* last) {
    std::uint32_t depth = parent.depth;
    std::uint64_t bytes = parent.bytes;
    for (const V* x = first; x != last; ++x) {
      if (x->isRef() && x->type != T::kOwnedString) depth = std::max(depth, table_[x->ref].depth + 1);
      bytes = addBytes(bytes, bytesOf(*x));
    }
    if (depth > opt_.maxDepth) {
      fail(
          fmt::format("values nest deeper than {} levels; the file is corrupt or not a Flight Recorder dump.",
                      opt_.maxDepth));
    }
    parent.depth = depth;
    parent.bytes = bytes;
    account(static_cast<std::uint64_t>(last - first) * kItemBytes);
    parent.items.insert(parent.items.end(), first, last);
  }

  // APPEND(S), ADDITEMS and the containers built from a MARK: adds items to stack_[index] (taking
  // over their references), or hands them on when that is the streamed list.
  void addAll(std::size_t index, const V* first, const V* last) {
    const T kind = stack_[index].type;
    if (kind == T::kHandedOver) failHandedOver();
    const bool wantList = in_.code == kAppend || in_.code == kAppends;
    if ((wantList && kind != T::kList) || (in_.code == kAddItems && kind != T::kSet) ||
        !stack_[index].isRef() || kind == T::kOwnedString) {
      fail(fmt::format("pickle opcode {} adds to a {}; the file is corrupt.", opName(), kindName(kind)));
    }
    if (index == streamList_) {
      for (const V* x = first; x != last; ++x) {
        if (x->type == T::kHandedOver) continue;
        emit(*x);
      }
      return;
    }
    grow(own(index), first, last);
  }

  // Dict keys that are not strings become their text: 5 -> "5", (1, 2) -> "[1,2]".
  // Adds the pairs [first, last) to the dict at stack_[at], taking over their references.
  void setItems(std::size_t at, V* first, V* last) {
    const std::size_t n = static_cast<std::size_t>(last - first);
    const T kind = stack_[at].type;
    if (kind == T::kHandedOver) failHandedOver();
    if (kind != T::kDict) {
      fail(fmt::format("pickle opcode {} sets items of a {}; the file is corrupt.", opName(), kindName(kind)));
    }
    if (n % 2 != 0) {
      fail(fmt::format("pickle opcode {} finds a key without a value; the file is corrupt.", opName()));
    }
    V* kv = first;
    for (std::size_t k = 0; k < n; k += 2) {
      V& key = kv[k];
      if (key.type != T::kString && key.type != T::kOwnedString) {
        std::string text = toJson(key).dump(-1, ' ', false, json::error_handler_t::replace);
        unref(key);
        key.type = T::kOwnedString;
        key.ref = newContainer(T::kOwnedString);
        account(text.size());
        c(key).bytes = kValueBytes + text.size();
        c(key).text = std::move(text);
      }
    }
    // Keys are made text first: own() must come after the last new container (the table may move).
    // A key counts as its text (a JSON key), not as a value of its own.
    PickleContainer& dict = own(at);
    const std::uint64_t keyOverhead = static_cast<std::uint64_t>(n / 2) * kValueBytes;
    grow(dict, kv, kv + n);
    dict.bytes = dict.bytes > keyOverhead ? dict.bytes - keyOverhead : 0;
  }

  // --- the memo ---

  MemoCell* cell(std::uint64_t key, bool create) {
    if (key < dense_.size()) return &dense_[key];
    if (!create) {
      auto it = sparse_.find(key);
      return it == sparse_.end() ? nullptr : &it->second;
    }
    return &sparse_[key];
  }

  void forget(MemoCell& m) {
    if (!m.present) return;
    m.present = false;
    unaccount(kMemoBytes);
    if (m.value.isRef()) {
      PickleContainer& x = c(m.value);
      if (--x.memoRefs == 0 && x.refs == 0) destroy(m.value.ref);
    }
  }

  void put(std::uint64_t key) {
    need(1);
    ++stores_;
    if (!gets_.has(key)) return;  // nothing reads it back
    MemoCell& m = *cell(key, true);
    forget(m);
    const V& v = stack_.back();
    m.value = v;
    m.present = true;
    account(kMemoBytes);
    if (v.isRef()) ++c(v).memoRefs;
  }

  void get(std::uint64_t key) {
    const MemoCell* m = cell(key, false);
    if (m == nullptr || !m->present) {
      fail(fmt::format("pickle opcode {} reads memo key {}, which nothing stored; the file is corrupt.",
                       opName(), key));
    }
    const V v = m->value;
    checkReadable(v);
    ref(v);
    push(v);
  }

  // --- streaming ---

  // Whether a list about to be pushed at stack_.size() is the value of opt_.streamKey in the
  // top-level dict: the dict is at the bottom, and above it are key/value pairs, either after the
  // dict's own MARK (SETITEMS) or without one (SETITEM, protocols 0 and 1).
  bool isStreamPosition() const {
    const std::size_t p = stack_.size();
    if (opt_.streamKey.empty() || (!opt_.onElement && !opt_.onNode) || streamList_ != kNoSlot) return false;
    if (p < 2 || p % 2 != 0 || stack_[0].type != T::kDict) return false;
    if (marks_.empty() ? p != 2 : (marks_.size() != 1 || marks_[0] != 1)) return false;
    const V& key = stack_[p - 1];
    if (key.type != T::kString && key.type != T::kOwnedString) return false;
    const std::string_view k = key.type == T::kString ? std::string_view(key.s, key.len) : table_[key.ref].text;
    return k == opt_.streamKey;
  }

  void startStream() {
    streamList_ = stack_.size() - 1;
    c(stack_.back()).streamed = true;
  }

  // The stack's placeholder for an element given away.
  static V handedOver() { return makeValue(T::kHandedOver, 0); }

  // Gives one element away and drops this reader's hold on it (the memo may keep it).
  void emit(const V& element) {
    if (opt_.stats) ++opt_.stats->generalElements;
    if (opt_.onNode) {
      opt_.onNode(PickleNode(&table_, element));
    } else {
      opt_.onElement(toJson(element));
    }
    unref(element);
  }

  // torch's pickler writes a list as MARK, every element, APPENDS: a million entries would all sit
  // on the stack. An element is handed over early once nothing can change it: no opcode without a
  // MARK reaches below the top three values, and no inner MARK is open below it. Only dicts (FR's
  // entries) are handed over early, so that a tuple built from a MARK keeps its items.
  void handOverEarly() {
    const std::size_t first = streamList_ + 1;
    const auto [lo, hi] = std::equal_range(marks_.begin(), marks_.end(), first);
    if (hi - lo != 1) return;
    // An open MARK above makes the value just below it the target of SETITEMS, APPENDS or ADDITEMS.
    const std::size_t belowInnerMark = hi == marks_.end() ? kNoSlot : *hi - 1;
    const std::size_t limit = std::min(belowInnerMark, stack_.size() - std::min<std::size_t>(stack_.size(), 3));
    if (nextEarly_ < first || nextEarly_ > stack_.size()) nextEarly_ = first;
    for (; nextEarly_ < limit; ++nextEarly_) {
      V& s = stack_[nextEarly_];
      if (s.type == T::kHandedOver) continue;
      if (s.type != T::kDict) return;
      const V element = s;
      s = handedOver();
      emit(element);
    }
  }

  // --- the light path: one streamed element read into a flat array (pickle.h, "Speed") ---

  // The next value pushed would be an element of the streamed list, directly after its MARK.
  bool atElementStart() const {
    return streamList_ != kNoSlot && !marks_.empty() && marks_.back() == streamList_ + 1;
  }

  // readLight's containers. The values from `from` to the stack's top `sp` become the items of a new
  // flat container, put below `low` in the shared buffer that starts at `base`; its value is returned.
  [[gnu::always_inline]] static V closeFlat(T kind, V* from, V*& sp, V*& low, const V* base) {
    const auto n = static_cast<std::uint32_t>(sp - from);
    low -= n;
    for (std::uint32_t k = 0; k < n; ++k) low[k] = from[k];  // a few values: a call to memmove costs more
    sp = from;
    return makeValue(kind, static_cast<std::uint32_t>(low - base), n);
  }
  // Fills the empty flat container just below `from` (above the MARK at `floor`) with the values from
  // `from` up; false when the general machine must decide (another target, a key that is no string).
  [[gnu::always_inline]] static bool fillFlat(T kind, V* from, std::size_t floor, V*& sp, V*& low, const V* base) {
    if (static_cast<std::size_t>(from - base) <= floor || from[-1].type != kind || from[-1].len != 0) return false;
    if (kind == T::kFlatDict) {
      if ((sp - from) % 2 != 0) return false;
      for (const V* k = from; k < sp; k += 2)
        if (k->type != T::kString && k->type != T::kOwnedString) return false;  // made text there
    }
    const V filled = closeFlat(kind, from, sp, low, base);
    sp[-1] = filled;
    return true;
  }

  // Reads the element that starts with EMPTY_DICT at `start` into flat values and hands it over, with
  // every element still on the stack before it. Returns the offset after it (and after the PUTs that
  // follow it), or 0 when the element is not one the light path takes; then nothing has changed and
  // the general machine reads it. The first pass checked every opcode before STOP, so lengths are
  // trusted here; the element's own STOP is an opcode this path does not take.
  std::size_t readLight(std::size_t start) {
    const std::string_view bytes = d_.bytes();
    const auto* const b = reinterpret_cast<const std::uint8_t*>(bytes.data());
    auto le = [b](std::size_t at, std::size_t width) { return littleEndian(b + at, width); };
    // Everything the loop touches is local: stores through a V* may alias a member (V holds a
    // uint64), which would make the compiler reload the member after every push.
    // One buffer: the stack grows up from its start, the element's flat values down from its end
    // (each container's items in order), so that one comparison says whether both still fit.
    V* const stack = light_.get().values.data();
    V* const end = stack + kLightBuffer;
    V* sp = stack;  // the stack's top (next free slot)
    V* low = end;   // the lowest flat value
    std::size_t marks[kMaxLightMarks];
    std::size_t nm = 0;  // open MARKs
    const std::size_t maxMarks = std::min<std::size_t>(kMaxLightMarks, opt_.maxDepth > 2 ? opt_.maxDepth - 2 : 0);
    const MemoCell* const memo = dense_.data();
    const std::size_t memoSize = dense_.size();
    const PickleContainer* const table = table_.data();
    std::uint64_t puts = 0;
    // Depth without measuring it: no container of the element nests deeper than the containers it
    // made plus the deepest container it took from the memo. The element lies in the streamed list
    // in the top-level dict (two more levels); within maxDepth, the general machine would refuse
    // nothing, and past it the element is left to the general machine, which says so.
    const std::size_t maxDepth = opt_.maxDepth > 2 ? opt_.maxDepth - 2 : 0;
    std::size_t made = 0, memoDepth = 0;
    auto floor = [&] { return nm == 0 ? std::size_t{0} : marks[nm - 1]; };
    std::size_t p = start;
    // No bounds check on p: the first pass found a STOP after every opcode here, and STOP ends this loop.
    for (;;) {
      if (low - sp < static_cast<std::ptrdiff_t>(kLightBuffer - kMaxLightValues)) return 0;  // more than kMaxLightValues
      const std::uint8_t code = b[p];
      if (sp == stack + 1 && nm == 0 && p > start && code != kMark && code != kBinPut && code != kLongBinPut) {
        // The dict is complete. Another element or the list's end must follow: anything else could
        // still change it (SETITEM), which the general machine handles.
        if ((code != kEmptyDict && code != kAppends) || stack[0].type != T::kFlatDict) return 0;
        break;
      }
      switch (code) {
        case kBinGet:
        case kLongBinGet: {
          const std::uint64_t key = code == kBinGet ? b[p + 1] : le(p + 1, 4);
          p += code == kBinGet ? 2 : 5;
          if (key >= memoSize || !memo[key].present) return 0;  // the general machine says why
          const V v = memo[key].value;
          if (v.type == T::kHandedOver) return 0;
          if (v.isRef()) {
            if (table[v.ref].streamed) return 0;
            memoDepth = std::max<std::size_t>(memoDepth, table[v.ref].depth);
            if (made + memoDepth > maxDepth) return 0;
          }
          *sp++ = v;
          break;
        }
        case kBinPut:
        case kLongBinPut: {
          const std::uint64_t key = code == kBinPut ? b[p + 1] : le(p + 1, 4);
          p += code == kBinPut ? 2 : 5;
          if (static_cast<std::size_t>(sp - stack) <= floor() || key > kMaxMemoKey) return 0;  // the general machine says why
          if (gets_.has(key)) return 0;  // read back: the memo keeps it
          ++puts;
          break;
        }
        case kMark:
          if (nm >= maxMarks) return 0;
          marks[nm++] = static_cast<std::size_t>(sp - stack);
          ++p;
          break;
        case kShortBinUnicode:
        case kBinUnicode: {
          const std::size_t len = code == kShortBinUnicode ? b[p + 1] : le(p + 1, 4);
          const std::size_t at = p + (code == kShortBinUnicode ? 2 : 5);
          const std::string_view text = bytes.substr(at, len);
          if (!isValidUtf8(text)) return 0;  // repaired there
          *sp++ = makeValue(T::kString, reinterpret_cast<std::uintptr_t>(text.data()), static_cast<std::uint32_t>(len));
          p = at + len;
          break;
        }
        case kBinInt1:
          *sp++ = makeValue(T::kInt, b[p + 1]), p += 2;
          break;
        case kBinInt2:
          *sp++ = makeValue(T::kInt, le(p + 1, 2)), p += 3;
          break;
        case kBinInt:
          *sp++ = makeValue(T::kInt, static_cast<std::uint64_t>(std::int64_t{static_cast<std::int32_t>(le(p + 1, 4))}));
          p += 5;
          break;
        case kLong1: {
          const std::size_t len = b[p + 1];
          V v;
          if (!smallLong(bytes.substr(p + 2, len), v)) return 0;
          *sp++ = v;
          p += 2 + len;
          break;
        }
        case kBinFloat:
          *sp++ = makeValue(T::kFloat, __builtin_bswap64(le(p + 1, 8))), p += 9;
          break;
        case kNone:
          *sp++ = V{}, ++p;
          break;
        case kNewTrue:
        case kNewFalse:
          *sp++ = makeValue(T::kBool, code == kNewTrue ? 1 : 0), ++p;
          break;
        case kEmptyDict:
        case kEmptyList:
        case kEmptyTuple:
          *sp++ = makeValue(code == kEmptyDict ? T::kFlatDict : code == kEmptyList ? T::kFlatList : T::kFlatTuple, 0);
          if (++made + memoDepth > maxDepth) return 0;
          ++p;
          break;
        case kTuple1:
        case kTuple2:
        case kTuple3: {
          const std::size_t n = code - kTuple1 + 1;
          if (static_cast<std::size_t>(sp - stack) < floor() + n) return 0;
          const V tuple = closeFlat(T::kFlatTuple, sp - n, sp, low, stack);
          *sp++ = tuple;
          if (++made + memoDepth > maxDepth) return 0;
          ++p;
          break;
        }
        case kTuple: {
          if (nm == 0) return 0;
          const V tuple = closeFlat(T::kFlatTuple, stack + marks[--nm], sp, low, stack);
          *sp++ = tuple;
          if (++made + memoDepth > maxDepth) return 0;
          ++p;
          break;
        }
        case kAppends:
        case kSetItems: {
          if (nm == 0) return 0;
          --nm;
          if (!fillFlat(code == kAppends ? T::kFlatList : T::kFlatDict, stack + marks[nm], floor(), sp, low, stack))
            return 0;
          ++p;
          break;
        }
        case kAppend:
        case kSetItem: {
          const std::size_t n = code == kAppend ? 1 : 2;
          if (static_cast<std::size_t>(sp - stack) < floor() + n + 1) return 0;
          if (!fillFlat(code == kAppend ? T::kFlatList : T::kFlatDict, sp - n, floor(), sp, low, stack)) return 0;
          ++p;
          break;
        }
        default:
          return 0;
      }
    }
    // Taken: the elements before it go first, in order (they are complete: nothing after this
    // element can reach below it without popping it, which fails as for any element handed over).
    // Those not handed over yet lie at the top, above the placeholders of earlier ones.
    std::size_t pending = stack_.size();
    while (pending > streamList_ + 1 && stack_[pending - 1].type != T::kHandedOver) {
      if (stack_[pending - 1].type != T::kDict) return 0;
      --pending;
    }
    for (std::size_t i = pending; i < stack_.size(); ++i) {
      const V element = stack_[i];
      stack_[i] = handedOver();
      emit(element);
    }
    stores_ += puts;
    if (opt_.stats) ++opt_.stats->lightElements;
    const V element = stack[0];
    if (opt_.onNode)
      opt_.onNode(PickleNode(&table_, element, stack));
    else
      opt_.onElement(toJsonOf(table_, element, stack));
    push(handedOver());
    return p;
  }

  // How many of LONG1/LONG4's little-endian two's-complement bytes carry the value (redundant sign
  // bytes dropped).
  static std::size_t longWidth(std::string_view b) {
    auto byte = [&b](std::size_t k) { return static_cast<std::uint8_t>(b[k]); };
    std::size_t n = b.size();
    while (n > 1 &&
           ((byte(n - 1) == 0x00 && byte(n - 2) < 0x80) || (byte(n - 1) == 0xff && byte(n - 2) >= 0x80)))
      --n;
    return n;
  }

  // LONG1/LONG4's bytes as an int64 or, nine bytes with the last 0, a uint64; false when wider.
  static bool smallLong(std::string_view b, V& out) {
    const std::size_t n = longWidth(b);
    if (n == 0) return out = makeValue(T::kInt, 0), true;
    if (n > 9 || (n == 9 && b[8] != 0)) return false;
    std::uint64_t u = 0;
    std::memcpy(&u, b.data(), std::min<std::size_t>(n, 8));  // little-endian, as LONG1 is
    if (n == 9) return out = makeValue(T::kUInt, u), true;  // the top bit is set, or 8 bytes would do
    if (n < 8 && (static_cast<std::uint8_t>(b[n - 1]) & 0x80)) u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    out = makeValue(T::kInt, u);
    return true;
  }

  // --- output ---

  json toJson(const V& v) const {
    if (bytesOf(v) > opt_.maxLiveBytes) tooMuch();
    return toJsonOf(table_, v, nullptr);
  }

  // --- scalars ---

  json decimal(std::string_view text) const {
    const char* b = text.data();
    const char* e = b + text.size();
    std::int64_t i = 0;
    if (auto [end, ec] = std::from_chars(b, e, i); ec == std::errc() && end == e) return i;
    std::uint64_t u = 0;
    if (auto [end, ec] = std::from_chars(b, e, u); ec == std::errc() && end == e) return u;
    fail(fmt::format("pickle opcode {} holds '{}', not a 64-bit integer; dsdiag refuses this file.", opName(),
                     text.substr(0, 40)));
  }

  double decimalFloat(std::string_view text) const {
    double f = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), f);
    if (ec != std::errc() || end != text.data() + text.size()) {
      fail(fmt::format("pickle opcode FLOAT holds '{}', not a number; the file is corrupt.", text.substr(0, 40)));
    }
    return f;
  }

  // LONG1/LONG4: little-endian two's complement. Redundant sign bytes are dropped; what is left
  // must fit int64, or uint64 (nine bytes, the last 0).
  json twosComplement(std::string_view b) const {
    V v;
    if (!smallLong(b, v)) {
      fail(
          fmt::format("pickle opcode {} holds an integer of {} bytes, wider than 64 bits; no Flight Recorder "
                      "field needs that, so dsdiag refuses this file.",
                      opName(), longWidth(b)));
    }
    return v.type == T::kUInt ? json(v.u) : json(v.i);
  }

  // UNICODE (protocol 0): raw-unicode-escape, i.e. Latin-1 bytes with \uXXXX and \UXXXXXXXX.
  std::string rawUnicodeEscape(std::string_view s) const {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
      if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
        const std::size_t digits = s[i + 1] == 'u' ? 4 : 8;
        std::uint32_t cp = 0;
        const char* b = s.data() + i + 2;
        if (s.size() - i - 2 < digits || std::from_chars(b, b + digits, cp, 16).ptr != b + digits) {
          fail("pickle opcode UNICODE holds a broken \\u escape; the file is corrupt.");
        }
        appendUtf8(out, cp);
        i += 2 + digits;
      } else {
        appendUtf8(out, static_cast<std::uint8_t>(s[i++]));
      }
    }
    return out;
  }

  MemoKeys gets_;  // memo keys some GET reads (the first pass)
  Decoder d_;
  const PickleOptions& opt_;
  Instr in_;  // the instruction being executed, for messages
  std::vector<PickleContainer> table_;
  std::vector<std::uint32_t> free_;  // table slots to reuse
  std::vector<V> stack_;
  std::vector<std::size_t> marks_;  // the stack size at each open MARK, ascending
  std::vector<MemoCell> dense_;     // memo keys below MemoKeys::kDense that some GET reads
  std::unordered_map<std::uint64_t, MemoCell> sparse_;
  std::uint64_t stores_ = 0;  // memo stores so far: MEMOIZE's key
  std::uint64_t liveBytes_ = 0;
  std::size_t streamList_ = kNoSlot;  // stack index of the streamed list
  std::size_t nextEarly_ = 0;         // the next element handOverEarly looks at
  bool lightOn_ = false;  // streamed elements may take the light path
  LightLease light_;      // its buffers, taken when first needed
};

}  // namespace

std::optional<PickleNode> PickleNode::find(std::string_view key) const {
  if (!isDict()) return std::nullopt;
  const V* const items = this->items();
  for (std::size_t k = count(); k >= 2; k -= 2) {
    const PickleNode kn(table_, items[k - 2], flat_);
    if (kn.str() == key) return PickleNode(table_, items[k - 1], flat_);
  }
  return std::nullopt;
}

json PickleNode::toJson() const { return toJsonOf(*table_, v_, flat_); }

json readPickle(std::string_view bytes, const std::string& name, const PickleOptions& options) {
  if (bytes.empty()) throw ConfigError(fmt::format("{}: the file is empty, not a pickle.", name));
  return Vm(bytes, name, options).run();
}

}  // namespace ds::diag::hang
