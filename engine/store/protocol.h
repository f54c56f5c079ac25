// The TcpStore wire format: PyTorch c10d's TCPStore protocol, shared by our client and server.
//
// Learned from torch/csrc/distributed/c10d/TCPStore*.cpp (1.13 to 2.x). There is no framing: a
// request is one query-type byte followed by its fields, and each query type has a fixed reply (or
// none). Integers are the sender's native byte order, which is little-endian on every platform torch
// ships for; we always write and read little-endian. A string or byte string is a u64 length and the
// bytes; a key list is a u64 count and the keys.
//
// Two dialects exist, told apart by the first bytes of a connection:
//   torch 2.x: the client opens with VALIDATE + u32 0x3C85F7CE (no reply), then usually PING + u32
//              nonce (reply: the nonce). Query types are numbered from VALIDATE = 0.
//   torch 1.x: no handshake; the first byte is already a query, numbered from SET = 0 (so SET and
//              VALIDATE share the byte 0, and the magic after it decides).
// Every key a torch TCPStore client sends carries the prefix "/" (TCPStore::keyPrefix_); our client
// adds the same prefix, so that a key set by a dsperf rank is the key a torch rank reads.
//
// Replies: SET, APPEND, MULTI_SET and VALIDATE have none. GET and COMPARE_SET answer a byte string,
// ADD/GETNUMKEYS/DELETE_KEY an i64, CHECK a u8 (READY 0 / NOT_READY 1), WAIT a u8 STOP_WAITING (0)
// once every key is set (the server never times a wait out: the client does), CANCEL_WAIT a u8
// WAIT_CANCELED (1), MULTI_GET one byte string per key, PING the u32 nonce. The protocol has no
// error reply: a server that refuses a request closes the connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store/store.h"

namespace ds::store::protocol {

inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;
// TCPStore::keyPrefix_: every key on the wire starts with it.
inline constexpr std::string_view kKeyPrefix = "/";
// Where dsperf clients record their job id (DESIGN.md "Isolation"), as a key (without kKeyPrefix).
// The first client sets it with compare_set; a client of another job reads the other id back and
// refuses to go on. Our server presets it and closes the connection of such a client.
inline constexpr std::string_view kJobIdKey = "dsperf/job_id";

enum class Dialect : std::uint8_t {
  kUnknown,
  kTorch1,  // torch 1.x: no handshake, SET = 0
  kTorch2,  // torch 2.x: VALIDATE first, VALIDATE = 0
};
const char* dialectName(Dialect d);

// Query types, named and ordered as in torch 2.x (TCPStoreBackend.hpp).
enum class Query : std::uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kListKeys,
  kBarrier,
  kWatchKey,  // torch 1.x only (byte 7 there)
};
const char* queryName(Query q);

// The byte that stands for q in dialect d, or nullopt when d has no such query (e.g. APPEND in 1.x).
std::optional<std::uint8_t> encode(Dialect d, Query q);
// The query a byte stands for in dialect d, or nullopt for an unknown byte.
std::optional<Query> decode(Dialect d, std::uint8_t byte);

inline constexpr std::uint8_t kCheckReady = 0;
inline constexpr std::uint8_t kCheckNotReady = 1;
inline constexpr std::uint8_t kStopWaiting = 0;
inline constexpr std::uint8_t kWaitCanceled = 1;

// Builds one request or reply.
class Writer {
 public:
  Writer& u8(std::uint8_t v);
  Writer& u32(std::uint32_t v);
  Writer& u64(std::uint64_t v);
  Writer& i64(std::int64_t v) { return u64(static_cast<std::uint64_t>(v)); }
  Writer& str(std::string_view s);
  Writer& bytes(const Bytes& b);
  Writer& strs(const std::vector<std::string>& v);
  const std::string& data() const { return buf_; }
  std::string take() { return std::move(buf_); }

 private:
  std::string buf_;
};

// Thrown by Reader when the buffer ends before the message does: wait for more bytes and parse
// again from the start.
struct NeedMore {};

// Reads the fields of a message from a buffer that may hold only part of it. Lengths are checked
// against the limits before anything is copied, so a lying length throws ProtocolError rather than
// allocating.
class Reader {
 public:
  Reader(const char* data, size_t size) : begin_(data), p_(data), end_(data + size) {}
  std::uint8_t u8();
  std::uint32_t u32();
  std::uint64_t u64();
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  // A string of at most maxLen bytes; longer throws ProtocolError naming `what`.
  std::string str(size_t maxLen, const char* what);
  Bytes bytes(size_t maxLen, const char* what);
  // A count of at most maxCount.
  std::uint64_t count(std::uint64_t maxCount, const char* what);
  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

 private:
  const char* take(size_t n);

  const char* begin_;
  const char* p_;
  const char* end_;
};

std::uint32_t loadU32(const char* p);
std::uint64_t loadU64(const char* p);

}  // namespace ds::store::protocol
