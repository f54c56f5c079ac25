#include "diag/hang/pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <limits>
#include <unordered_map>
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

  [[noreturn]] void fail(std::size_t at, std::string_view what) const {
    throw ConfigError(fmt::format("{}: byte {}: {}", name_, at, what));
  }

  Instr next() {
    Instr in;
    in.at = pos_;
    in.code = static_cast<std::uint8_t>(b_[pos_++]);
    const OpInfo& op = kOps[in.code];
    if (op.name == nullptr) {
      fail(in.at,
           fmt::format("0x{:02x} is not a pickle opcode; the file is corrupt or is not a pickle.", in.code));
    }
    if (op.refusal != nullptr) {
      fail(in.at, fmt::format("pickle opcode {} (0x{:02x}) {}; dsdiag reads data only and refuses this file. "
                              "Was it written by torch's Flight Recorder?",
                              op.name, in.code, op.refusal));
    }
    switch (op.arg) {
      case Arg::kNone:
        break;
      case Arg::kU1:
        in.n = little(1, in);
        break;
      case Arg::kU2:
        in.n = little(2, in);
        break;
      case Arg::kU4:
        in.n = little(4, in);
        break;
      case Arg::kU8:
        in.n = little(8, in);
        break;
      case Arg::kI4:
        in.n = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int32_t>(little(4, in))});
        break;
      case Arg::kF8:
        in.f = std::bit_cast<double>(__builtin_bswap64(little(8, in)));
        break;  // big-endian
      case Arg::kLine: {
        const std::size_t nl = b_.find('\n', pos_);
        if (nl == std::string_view::npos) truncated(in);
        in.text = b_.substr(pos_, nl - pos_);
        pos_ = nl + 1;
        break;
      }
      case Arg::kLen1:
        in.text = take(little(1, in), in);
        break;
      case Arg::kLen4: {
        const std::uint64_t len = little(4, in);
        if ((in.code == kBinString || in.code == kLong4) && len > 0x7fffffffu) {
          fail(in.at, fmt::format("pickle opcode {} has a negative length; the file is corrupt.", op.name));
        }
        in.text = take(len, in);
        break;
      }
      case Arg::kLen8:
        in.text = take(little(8, in), in);
        break;
    }
    if (in.code == kProto && in.n > 5) {
      fail(in.at, fmt::format("pickle protocol {} is newer than 5, the highest dsdiag reads; the file is "
                              "corrupt or was not written by torch.",
                              in.n));
    }
    return in;
  }

 private:
  [[noreturn]] void truncated(const Instr& in) const {
    fail(in.at,
         fmt::format("the file ends inside pickle opcode {}; it is truncated. Was the rank killed while "
                     "writing its dump?",
                     kOps[in.code].name));
  }

  std::uint64_t little(std::size_t n, const Instr& in) {
    if (b_.size() - pos_ < n) truncated(in);
    std::uint64_t v = 0;
    for (std::size_t k = 0; k < n; ++k)
      v |= std::uint64_t{static_cast<std::uint8_t>(b_[pos_ + k])} << (8 * k);
    pos_ += n;
    return v;
  }

  std::string_view take(std::uint64_t len, const Instr& in) {
    const std::size_t left = b_.size() - pos_;
    if (len > left) {
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

// The first pass: which memo keys a GET reads, so that PUT keeps only the values read back.
std::vector<bool> scanGets(std::string_view bytes, const std::string& name) {
  Decoder d(bytes, name);
  std::vector<bool> used;
  while (!d.atEnd()) {
    const Instr in = d.next();
    if (in.code == kStop) return used;
    if (isGet(in.code)) {
      const std::uint64_t key = memoKey(in, d);
      if (key >= used.size()) used.resize(key + 1);
      used[key] = true;
    }
  }
  d.fail(bytes.size(),
         "the pickle ends without its STOP opcode; the file is truncated. Was the rank killed while "
         "writing its dump?");
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

std::string validUtf8(std::string_view s) {
  std::string out;
  bool replaced = false;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8Length(s, i);
    if (n == 0 && !replaced) out.assign(s.substr(0, i)), replaced = true;
    if (n == 0)
      out += "\xEF\xBF\xBD", ++i;
    else if (replaced)
      out.append(s.substr(i, n)), i += n;
    else
      i += n;
  }
  return replaced ? out : std::string(s);
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

enum class Kind : std::uint8_t { kScalar, kList, kTuple, kDict, kSet };

const char* kindName(Kind k) {
  switch (k) {
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    default:
      return "plain value";
  }
}

// A value on the VM's stack.
struct Slot {
  Slot() = default;
  explicit Slot(json value, Kind k = Kind::kScalar, std::uint32_t d = 0, std::uint64_t b = kValueBytes)
      : v(std::move(value)), kind(k), depth(d), bytes(b) {}

  json v;
  Kind kind = Kind::kScalar;
  bool handedOver = false;              // a streamed element already given to onElement
  std::uint32_t depth = 0;              // containers nested here, itself included
  std::uint64_t bytes = kValueBytes;    // estimated memory, for maxLiveBytes
  std::vector<std::uint64_t> memoKeys;  // memo entries that name this value while it is built
};

// A memo entry names a value on the stack while it is built (Python memoizes an empty dict, then
// fills it) and keeps a copy once it leaves the stack.
struct MemoCell {
  Slot value;
  std::size_t live = kNoSlot;  // the stack index while the value is on the stack
  bool streamedList = false;   // it is the streamed list, whose elements are gone
};

class Vm {
 public:
  Vm(std::string_view bytes, const std::string& name, const PickleOptions& options)
      : gets_(scanGets(bytes, name)), d_(bytes, name), opt_(options) {}

  json run() {
    while (!d_.atEnd()) {
      in_ = d_.next();
      if (in_.code == kStop) return pop().v;
      exec();
      if (streamList_ != kNoSlot) handOverEarly();
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
      return pushString(validUtf8(in_.text));  // str, Python 2 str, bytes
    }
    switch (in_.code) {
      case kProto:
      case kFrame:
        break;
      case kMark:
        account(sizeof(std::size_t)), marks_.push_back(stack_.size());
        break;
      case kPop:
        avail() > 0 ? (void)pop() : (void)popToMark(false);
        break;
      case kPopMark:
        popToMark(false);
        break;
      case kDup:
        need(1), push(copyOf(stack_.back(), stack_.size() - 1));
        break;
      case kNone:
      case kNewTrue:
      case kNewFalse:
        pushScalar(in_.code == kNone ? json(nullptr) : json(in_.code == kNewTrue));
        break;
      case kInt:
        pushScalar(in_.text == "01" ? json(true) : in_.text == "00" ? json(false) : decimal(in_.text));
        break;
      case kLong:
        pushScalar(decimal(in_.text.ends_with('L') ? in_.text.substr(0, in_.text.size() - 1) : in_.text));
        break;
      case kBinInt:
      case kBinInt1:
      case kBinInt2:
        pushScalar(static_cast<std::int64_t>(in_.n));
        break;
      case kLong1:
      case kLong4:
        pushScalar(twosComplement(in_.text));
        break;
      case kBinFloat:
        pushScalar(in_.f);
        break;
      case kFloat:
        pushScalar(decimalFloat(in_.text));
        break;
      case kUnicode:
        pushString(rawUnicodeEscape(in_.text));
        break;
      case kEmptyDict:
      case kEmptyTuple:
      case kEmptySet:
        pushContainer(in_.code == kEmptyDict  ? Kind::kDict
                      : in_.code == kEmptySet ? Kind::kSet
                                              : Kind::kTuple);
        break;
      case kEmptyList: {
        const bool stream = isStreamPosition();
        pushContainer(Kind::kList);
        if (stream) streamList_ = stack_.size() - 1;
        break;
      }
      case kList: {
        std::vector<Slot> items = popToMark(false);
        const bool stream = isStreamPosition();
        pushContainer(Kind::kList);
        if (stream) streamList_ = stack_.size() - 1;
        addAll(stack_.size() - 1, std::move(items));
        break;
      }
      case kTuple:
      case kFrozenSet: {
        std::vector<Slot> items = popToMark(false);
        pushContainer(in_.code == kTuple ? Kind::kTuple : Kind::kSet);
        addAll(stack_.size() - 1, std::move(items));
        break;
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const std::size_t n = in_.code - kTuple1 + 1;
        need(n);
        std::vector<Slot> items(n);
        for (std::size_t k = n; k-- > 0;) items[k] = pop();
        pushContainer(Kind::kTuple);
        addAll(stack_.size() - 1, std::move(items));
        break;
      }
      case kDict: {
        std::vector<Slot> items = popToMark(false);
        pushContainer(Kind::kDict);
        setItems(std::move(items));
        break;
      }
      case kAppend: {
        need(2);
        std::vector<Slot> item;
        item.push_back(pop());
        addAll(stack_.size() - 1, std::move(item));
        break;
      }
      case kAppends:
      case kAddItems: {
        const bool toStream = !marks_.empty() && marks_.back() > 0 && marks_.back() - 1 == streamList_;
        std::vector<Slot> items = popToMark(toStream);
        need(1);
        addAll(stack_.size() - 1, std::move(items));
        break;
      }
      case kSetItem: {
        need(3);
        std::vector<Slot> kv(2);
        kv[1] = pop(), kv[0] = pop();
        setItems(std::move(kv));
        break;
      }
      case kSetItems: {
        std::vector<Slot> items = popToMark(false);
        need(1);
        setItems(std::move(items));
        break;
      }
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

  void account(std::uint64_t add) {
    liveBytes_ += add;
    if (liveBytes_ > opt_.maxLiveBytes) {
      fail(fmt::format(
          "the pickle holds more than {} of values at once; dsdiag refuses it rather than exhaust "
          "this node's memory. A Flight Recorder dump needs a few MB besides its entries, which are "
          "read one at a time.",
          sys::bytesText(static_cast<double>(opt_.maxLiveBytes))));
    }
  }

  void push(Slot s) {
    account(s.bytes);
    stack_.push_back(std::move(s));
  }
  void pushScalar(json v) { push(Slot(std::move(v))); }
  void pushString(std::string s) {
    const std::uint64_t bytes = kValueBytes + s.size();
    push(Slot(std::move(s), Kind::kScalar, 0, bytes));
  }
  void pushContainer(Kind k) { push(Slot(k == Kind::kDict ? json::object() : json::array(), k, 1)); }

  // The value at stack_[index] leaves the stack: its memo entries keep a copy.
  void release(Slot& s, std::size_t index) {
    for (std::uint64_t key : s.memoKeys) {
      MemoCell& cell = memo_.at(key);
      cell.live = kNoSlot;
      cell.streamedList = index == streamList_;
      if (!cell.streamedList) cell.value = clone(s), account(cell.value.bytes);
    }
    s.memoKeys.clear();
    liveBytes_ -= s.bytes;
    if (index == streamList_) streamList_ = kNoSlot;
  }

  [[noreturn]] void failHandedOver() const {
    fail(
        fmt::format("pickle opcode {} changes an element of '{}' after later elements were written; dsdiag "
                    "reads that list one element at a time and refuses this file (neither torch nor Python "
                    "writes this).",
                    opName(), opt_.streamKey));
  }

  Slot pop() {
    need(1);
    Slot s = std::move(stack_.back());
    stack_.pop_back();
    if (s.handedOver) failHandedOver();
    release(s, stack_.size());
    return s;
  }

  // Pops the values above the last MARK and the MARK. Only APPENDS onto the streamed list may take
  // elements already handed over.
  std::vector<Slot> popToMark(bool toStream) {
    if (marks_.empty())
      fail(fmt::format("pickle opcode {} finds no MARK before it; the file is corrupt.", opName()));
    const std::size_t m = marks_.back();
    marks_.pop_back();
    liveBytes_ -= sizeof(std::size_t);
    std::vector<Slot> items;
    items.reserve(stack_.size() - m);
    for (std::size_t i = m; i < stack_.size(); ++i) {
      if (stack_[i].handedOver && !toStream) failHandedOver();
      release(stack_[i], i);
      items.push_back(std::move(stack_[i]));
    }
    stack_.resize(m);
    return items;
  }

  // --- building containers ---

  void grow(Slot& parent, const Slot& child, std::uint64_t extraBytes = 0) {
    parent.depth = std::max(parent.depth, child.depth + 1);
    if (parent.depth > opt_.maxDepth) {
      fail(
          fmt::format("values nest deeper than {} levels; the file is corrupt or not a Flight Recorder dump.",
                      opt_.maxDepth));
    }
    parent.bytes += child.bytes + extraBytes;
    account(child.bytes + extraBytes);
  }

  // APPEND(S), ADDITEMS and the containers built from a MARK: adds items to stack_[index], or hands
  // them to onElement when that is the streamed list.
  void addAll(std::size_t index, std::vector<Slot> items) {
    Slot& target = stack_[index];
    const bool wantList = in_.code == kAppend || in_.code == kAppends;
    if ((wantList && target.kind != Kind::kList) || (in_.code == kAddItems && target.kind != Kind::kSet)) {
      fail(fmt::format("pickle opcode {} adds to a {}; the file is corrupt.", opName(),
                       kindName(target.kind)));
    }
    for (Slot& x : items) {
      if (index == streamList_) {
        if (!x.handedOver) opt_.onElement(std::move(x.v));
        continue;
      }
      grow(target, x);
      target.v.push_back(std::move(x.v));
    }
  }

  // Dict keys that are not strings become their text: 5 -> "5", (1, 2) -> "[1,2]".
  void setItems(std::vector<Slot> kv) {
    Slot& dict = stack_.back();
    if (dict.kind != Kind::kDict) {
      fail(fmt::format("pickle opcode {} sets items of a {}; the file is corrupt.", opName(),
                       kindName(dict.kind)));
    }
    if (kv.size() % 2 != 0) {
      fail(fmt::format("pickle opcode {} finds a key without a value; the file is corrupt.", opName()));
    }
    for (std::size_t k = 0; k < kv.size(); k += 2) {
      const json& key = kv[k].v;
      std::string text =
          key.is_string() ? key.get<std::string>() : key.dump(-1, ' ', false, json::error_handler_t::replace);
      grow(dict, kv[k + 1], text.size());
      dict.v[std::move(text)] = std::move(kv[k + 1].v);
    }
  }

  // --- the memo ---

  Slot clone(const Slot& s) const { return Slot(s.v, s.kind, s.depth, s.bytes); }

  [[noreturn]] void failStreamedList() const {
    fail(fmt::format(
        "pickle opcode {} refers back to the '{}' list, whose elements dsdiag reads one at a time "
        "and does not keep; it refuses this file (neither torch nor Python writes this).",
        opName(), opt_.streamKey));
  }

  Slot copyOf(const Slot& s, std::size_t index) const {
    if (index == streamList_) failStreamedList();
    if (s.handedOver) failHandedOver();
    return clone(s);
  }

  void put(std::uint64_t key) {
    need(1);
    ++stores_;
    if (key >= gets_.size() || !gets_[key]) return;  // nothing reads it back
    if (auto old = memo_.find(key); old != memo_.end()) {
      MemoCell& cell = old->second;
      if (cell.live != kNoSlot) std::erase(stack_[cell.live].memoKeys, key);
      liveBytes_ -= cell.value.bytes + kValueBytes;
      memo_.erase(old);
    }
    account(kValueBytes);
    MemoCell& cell = memo_[key];
    cell.value.bytes = 0;
    cell.live = stack_.size() - 1;
    stack_.back().memoKeys.push_back(key);
  }

  void get(std::uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) {
      fail(fmt::format("pickle opcode {} reads memo key {}, which nothing stored; the file is corrupt.",
                       opName(), key));
    }
    const MemoCell& cell = it->second;
    if (cell.streamedList) failStreamedList();
    push(cell.live != kNoSlot ? copyOf(stack_[cell.live], cell.live) : clone(cell.value));
  }

  // --- streaming ---

  // Whether a list about to be pushed at stack_.size() is the value of opt_.streamKey in the
  // top-level dict: the dict is at the bottom, and above it are key/value pairs, either after the
  // dict's own MARK (SETITEMS) or without one (SETITEM, protocols 0 and 1).
  bool isStreamPosition() const {
    const std::size_t p = stack_.size();
    if (opt_.streamKey.empty() || !opt_.onElement || streamList_ != kNoSlot) return false;
    if (p < 2 || p % 2 != 0 || stack_[0].kind != Kind::kDict) return false;
    if (marks_.empty() ? p != 2 : (marks_.size() != 1 || marks_[0] != 1)) return false;
    const json& key = stack_[p - 1].v;
    return key.is_string() && key.get_ref<const std::string&>() == opt_.streamKey;
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
    const std::size_t limit =
        std::min(belowInnerMark, stack_.size() - std::min<std::size_t>(stack_.size(), 3));
    if (nextEarly_ < first || nextEarly_ > stack_.size()) nextEarly_ = first;
    for (; nextEarly_ < limit; ++nextEarly_) {
      Slot& s = stack_[nextEarly_];
      if (s.handedOver) continue;
      if (s.kind != Kind::kDict) return;
      release(s, nextEarly_);
      json element = std::move(s.v);
      s = Slot{};
      s.handedOver = true;
      s.bytes = 0;
      opt_.onElement(std::move(element));
    }
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

  json decimalFloat(std::string_view text) const {
    double f = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), f);
    if (ec != std::errc() || end != text.data() + text.size()) {
      fail(fmt::format("pickle opcode FLOAT holds '{}', not a number; the file is corrupt.",
                       text.substr(0, 40)));
    }
    return f;
  }

  // LONG1/LONG4: little-endian two's complement. Redundant sign bytes are dropped; what is left
  // must fit int64, or uint64 (nine bytes, the last 0).
  json twosComplement(std::string_view b) const {
    auto byte = [&b](std::size_t k) { return static_cast<std::uint8_t>(b[k]); };
    std::size_t n = b.size();
    while (n > 1 &&
           ((byte(n - 1) == 0x00 && byte(n - 2) < 0x80) || (byte(n - 1) == 0xff && byte(n - 2) >= 0x80)))
      --n;
    if (n == 0) return 0;
    if (n > 9 || (n == 9 && byte(8) != 0)) {
      fail(
          fmt::format("pickle opcode {} holds an integer of {} bytes, wider than 64 bits; no Flight Recorder "
                      "field needs that, so dsdiag refuses this file.",
                      opName(), n));
    }
    std::uint64_t u = 0;
    for (std::size_t k = 0; k < std::min<std::size_t>(n, 8); ++k) u |= std::uint64_t{byte(k)} << (8 * k);
    if (n == 9) return u;
    if (n < 8 && (byte(n - 1) & 0x80)) u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<std::int64_t>(u);
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

  std::vector<bool> gets_;  // memo keys some GET reads (the first pass)
  Decoder d_;
  const PickleOptions& opt_;
  Instr in_;  // the instruction being executed, for messages
  std::vector<Slot> stack_;
  std::vector<std::size_t> marks_;  // the stack size at each open MARK, ascending
  std::unordered_map<std::uint64_t, MemoCell> memo_;
  std::uint64_t stores_ = 0;  // memo stores so far: MEMOIZE's key
  std::uint64_t liveBytes_ = 0;
  std::size_t streamList_ = kNoSlot;  // stack index of the streamed list
  std::size_t nextEarly_ = 0;         // the next element handOverEarly looks at
};

}  // namespace

json readPickle(std::string_view bytes, const std::string& name, const PickleOptions& options) {
  if (bytes.empty()) throw ConfigError(fmt::format("{}: the file is empty, not a pickle.", name));
  return Vm(bytes, name, options).run();
}

}  // namespace ds::diag::hang
