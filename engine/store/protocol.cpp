#include "engine/store/protocol.h"

#include <cstring>

#include "engine/common/error.h"

namespace ds::store::protocol {

const char* opName(Op op) {
  switch (op) {
    case Op::kHello:
      return "hello";
    case Op::kSet:
      return "set";
    case Op::kGet:
      return "get";
    case Op::kAdd:
      return "add";
    case Op::kCompareSet:
      return "compareSet";
    case Op::kCheck:
      return "check";
    case Op::kDelete:
      return "deleteKey";
    case Op::kNumKeys:
      return "numKeys";
    case Op::kWait:
      return "wait";
    case Op::kMultiGet:
      return "multiGet";
    case Op::kMultiSet:
      return "multiSet";
    case Op::kAppend:
      return "append";
  }
  return "unknown";
}

Writer::Writer(std::uint8_t type) {
  buf_.assign(kFrameHeaderBytes, '\0');
  buf_.push_back(static_cast<char>(type));
}

Writer& Writer::u8(std::uint8_t v) {
  buf_.push_back(static_cast<char>(v));
  return *this;
}

Writer& Writer::u32(std::uint32_t v) {
  for (int i = 3; i >= 0; --i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return *this;
}

Writer& Writer::i64(std::int64_t v) {
  auto u = static_cast<std::uint64_t>(v);
  for (int i = 7; i >= 0; --i) buf_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  return *this;
}

Writer& Writer::str(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  buf_.append(s);
  return *this;
}

Writer& Writer::bytes(const Bytes& b) {
  u32(static_cast<std::uint32_t>(b.size()));
  buf_.append(reinterpret_cast<const char*>(b.data()), b.size());
  return *this;
}

Writer& Writer::strs(const std::vector<std::string>& v) {
  u32(static_cast<std::uint32_t>(v.size()));
  for (const auto& s : v) str(s);
  return *this;
}

Writer& Writer::bytesList(const std::vector<Bytes>& v) {
  u32(static_cast<std::uint32_t>(v.size()));
  for (const auto& b : v) bytes(b);
  return *this;
}

std::string Writer::finish() {
  const auto n = static_cast<std::uint32_t>(buf_.size() - kFrameHeaderBytes);
  for (int i = 0; i < 4; ++i) buf_[i] = static_cast<char>((n >> (8 * (3 - i))) & 0xff);
  return std::move(buf_);
}

const char* Reader::take(size_t n) {
  if (static_cast<size_t>(end_ - p_) < n) {
    throw ProtocolError(fmt::format("truncated message: a field needs {} bytes but {} remain", n, end_ - p_));
  }
  const char* at = p_;
  p_ += n;
  return at;
}

std::uint8_t Reader::u8() { return static_cast<std::uint8_t>(*take(1)); }

std::uint32_t Reader::u32() { return decodeLength(take(4)); }

std::int64_t Reader::i64() {
  const char* p = take(8);
  std::uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u = (u << 8) | static_cast<unsigned char>(p[i]);
  return static_cast<std::int64_t>(u);
}

std::string Reader::str() {
  const std::uint32_t n = u32();
  const char* p = take(n);
  return std::string(p, n);
}

Bytes Reader::bytes() {
  const std::uint32_t n = u32();
  const auto* p = reinterpret_cast<const std::uint8_t*>(take(n));
  return Bytes(p, p + n);
}

std::vector<std::string> Reader::strs() {
  const std::uint32_t n = u32();
  // Each item needs at least its 4-byte length: a count larger than that is a lie, caught before
  // reserving memory for it.
  if (n > static_cast<size_t>(end_ - p_) / 4)
    throw ProtocolError(fmt::format("list of {} items does not fit", n));
  std::vector<std::string> out;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(str());
  return out;
}

std::vector<Bytes> Reader::bytesList() {
  const std::uint32_t n = u32();
  if (n > static_cast<size_t>(end_ - p_) / 4)
    throw ProtocolError(fmt::format("list of {} items does not fit", n));
  std::vector<Bytes> out;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(bytes());
  return out;
}

void Reader::expectEnd() const {
  if (!atEnd()) throw ProtocolError(fmt::format("message has {} unexpected trailing bytes", end_ - p_));
}

std::uint32_t decodeLength(const char* h) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(h[i]);
  return v;
}

}  // namespace ds::store::protocol
