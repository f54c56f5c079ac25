#include "engine/store/protocol.h"

#include <array>

#include "engine/common/error.h"

namespace ds::store::protocol {

namespace {

// torch 1.x numbering (TCPStore.cpp of 1.13): SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS,
// WATCH_KEY, DELETE_KEY.
constexpr std::array<Query, 9> kTorch1Order{Query::kSet,        Query::kCompareSet, Query::kGet,
                                            Query::kAdd,        Query::kCheck,      Query::kWait,
                                            Query::kGetNumKeys, Query::kWatchKey,   Query::kDeleteKey};

}  // namespace

const char* dialectName(Dialect d) {
  switch (d) {
    case Dialect::kTorch1:
      return "torch 1.x";
    case Dialect::kTorch2:
      return "torch 2.x";
    case Dialect::kUnknown:
      break;
  }
  return "unknown";
}

const char* queryName(Query q) {
  switch (q) {
    case Query::kValidate:
      return "VALIDATE";
    case Query::kSet:
      return "SET";
    case Query::kCompareSet:
      return "COMPARE_SET";
    case Query::kGet:
      return "GET";
    case Query::kAdd:
      return "ADD";
    case Query::kCheck:
      return "CHECK";
    case Query::kWait:
      return "WAIT";
    case Query::kGetNumKeys:
      return "GETNUMKEYS";
    case Query::kDeleteKey:
      return "DELETE_KEY";
    case Query::kAppend:
      return "APPEND";
    case Query::kMultiGet:
      return "MULTI_GET";
    case Query::kMultiSet:
      return "MULTI_SET";
    case Query::kCancelWait:
      return "CANCEL_WAIT";
    case Query::kPing:
      return "PING";
    case Query::kQueuePush:
      return "QUEUE_PUSH";
    case Query::kQueuePop:
      return "QUEUE_POP";
    case Query::kQueueLen:
      return "QUEUE_LEN";
    case Query::kListKeys:
      return "LIST_KEYS";
    case Query::kBarrier:
      return "BARRIER";
    case Query::kWatchKey:
      return "WATCH_KEY";
  }
  return "unknown";
}

std::optional<std::uint8_t> encode(Dialect d, Query q) {
  if (d == Dialect::kTorch2) {
    if (q == Query::kWatchKey) return std::nullopt;
    return static_cast<std::uint8_t>(q);
  }
  if (d == Dialect::kTorch1) {
    for (size_t i = 0; i < kTorch1Order.size(); ++i) {
      if (kTorch1Order[i] == q) return static_cast<std::uint8_t>(i);
    }
  }
  return std::nullopt;
}

std::optional<Query> decode(Dialect d, std::uint8_t byte) {
  if (d == Dialect::kTorch2 && byte <= static_cast<std::uint8_t>(Query::kBarrier))
    return static_cast<Query>(byte);
  if (d == Dialect::kTorch1 && byte < kTorch1Order.size()) return kTorch1Order[byte];
  return std::nullopt;
}

Writer& Writer::u8(std::uint8_t v) {
  buf_.push_back(static_cast<char>(v));
  return *this;
}

Writer& Writer::u32(std::uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return *this;
}

Writer& Writer::u64(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return *this;
}

Writer& Writer::str(std::string_view s) {
  u64(s.size());
  buf_.append(s);
  return *this;
}

Writer& Writer::bytes(const Bytes& b) {
  u64(b.size());
  buf_.append(reinterpret_cast<const char*>(b.data()), b.size());
  return *this;
}

Writer& Writer::strs(const std::vector<std::string>& v) {
  u64(v.size());
  for (const auto& s : v) str(s);
  return *this;
}

const char* Reader::take(size_t n) {
  if (static_cast<size_t>(end_ - p_) < n) throw NeedMore{};
  const char* at = p_;
  p_ += n;
  return at;
}

std::uint8_t Reader::u8() { return static_cast<std::uint8_t>(*take(1)); }
std::uint32_t Reader::u32() { return loadU32(take(4)); }
std::uint64_t Reader::u64() { return loadU64(take(8)); }

std::string Reader::str(size_t maxLen, const char* what) {
  const std::uint64_t n = u64();
  if (n > maxLen)
    throw ProtocolError(fmt::format("{} of {} bytes is over the limit of {} bytes", what, n, maxLen));
  const char* p = take(static_cast<size_t>(n));
  return std::string(p, static_cast<size_t>(n));
}

Bytes Reader::bytes(size_t maxLen, const char* what) {
  const std::uint64_t n = u64();
  if (n > maxLen)
    throw ProtocolError(fmt::format("{} of {} bytes is over the limit of {} bytes", what, n, maxLen));
  const auto* p = reinterpret_cast<const std::uint8_t*>(take(static_cast<size_t>(n)));
  return Bytes(p, p + n);
}

std::uint64_t Reader::count(std::uint64_t maxCount, const char* what) {
  const std::uint64_t n = u64();
  if (n > maxCount) throw ProtocolError(fmt::format("{} of {} is over the limit of {}", what, n, maxCount));
  return n;
}

std::uint32_t loadU32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::uint64_t loadU64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace ds::store::protocol
