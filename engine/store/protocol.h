// The TcpStore wire format, shared by client and server.
//
// A message is a frame: a 4-byte big-endian payload length, then the payload: one type byte and the
// fields. Integers are big-endian; strings and byte strings are a u32 length and the bytes; lists are
// a u32 count and the items. Client and server take turns strictly (one request, one reply), so
// there are no request ids.
//
// The first request on a connection must be kHello{magic, version, jobId}; the server answers
// kHelloOk{magic, version, jobId}, kJobMismatch{serverJobId} or kError, and closes after the latter two.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/store.h"

namespace ds::store::protocol {

inline constexpr std::uint32_t kMagic = 0x44535354;  // "DSST"
inline constexpr std::uint32_t kVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 4;

enum class Op : std::uint8_t {
  kHello = 1,
  kSet,         // key, value -> kOk
  kGet,         // key, timeoutMs -> kValue | kTimeout
  kAdd,         // key, delta -> kInt
  kCompareSet,  // key, expected, desired -> kValue
  kCheck,       // keys -> kBool
  kDelete,      // key -> kBool
  kNumKeys,     // -> kInt
  kWait,        // keys, timeoutMs -> kOk | kTimeout
  kMultiGet,    // keys, timeoutMs -> kValues | kTimeout
  kMultiSet,    // keys, values -> kOk
  kAppend,      // key, value -> kOk
};

enum class Reply : std::uint8_t {
  kHelloOk = 100,  // magic, version, jobId
  kJobMismatch,    // the server's jobId
  kOk,
  kValue,    // bytes
  kValues,   // list of bytes
  kInt,      // i64
  kBool,     // u8
  kTimeout,  // the keys still missing
  kError,    // ErrorKind, message
};

enum class ErrorKind : std::uint8_t {
  kProtocol = 1,  // malformed or unexpected message; the server closes the connection
  kLimit,         // a key or value over the server's limits; the connection stays usable
  kUsage,         // e.g. add() on a key that does not hold a counter; the connection stays usable
};

const char* opName(Op op);

// Builds one frame. finish() fills in the length.
class Writer {
 public:
  explicit Writer(std::uint8_t type);
  Writer& u8(std::uint8_t v);
  Writer& u32(std::uint32_t v);
  Writer& i64(std::int64_t v);
  Writer& str(std::string_view s);
  Writer& bytes(const Bytes& b);
  Writer& strs(const std::vector<std::string>& v);
  Writer& bytesList(const std::vector<Bytes>& v);
  // Leaves the Writer empty.
  std::string finish();

 private:
  std::string buf_;
};

// Reads the fields of one payload. Every read throws ds::ProtocolError when the payload is shorter
// than its fields say, so a truncated or lying message cannot read out of bounds.
class Reader {
 public:
  Reader(const char* data, size_t size) : p_(data), end_(data + size) {}
  std::uint8_t u8();
  std::uint32_t u32();
  std::int64_t i64();
  std::string str();
  Bytes bytes();
  std::vector<std::string> strs();
  std::vector<Bytes> bytesList();
  bool atEnd() const { return p_ == end_; }
  // Throws ProtocolError unless every byte was consumed.
  void expectEnd() const;

 private:
  const char* take(size_t n);

  const char* p_;
  const char* end_;
};

std::uint32_t decodeLength(const char* header);

}  // namespace ds::store::protocol
