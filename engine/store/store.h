// The rendezvous store: a small key-value service every rank can reach, used to exchange
// addresses, NCCL ids and barrier counters (c10d's Store, REFERENCE.md §3).
//
// Every operation is bounded: it takes an optional timeout, and without one it uses the store's
// default (timeout()). A wait that runs out throws ds::TimeoutError naming the keys, the store's
// address and the elapsed time. A store that cannot be reached throws ds::IoError.
//
// Thread safety: every implementation may be called from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::store {

using Bytes = std::vector<std::uint8_t>;
using Duration = std::chrono::milliseconds;
// An empty Timeout means "the store's default".
using Timeout = std::optional<Duration>;

inline constexpr Duration kDefaultTimeout = std::chrono::minutes(10);

Bytes toBytes(std::string_view s);
std::string toString(const Bytes& b);

class Store {
 public:
  explicit Store(Duration timeout = kDefaultTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Sets key to value, replacing any value and waking waiters.
  void set(const std::string& key, const Bytes& value, Timeout t = {}) { setImpl(key, value, resolve(t)); }
  // Returns the value of key, waiting up to the timeout for it to be set.
  Bytes get(const std::string& key, Timeout t = {}) { return getImpl(key, resolve(t)); }
  // Atomically adds delta to the integer stored (as decimal text) at key, creating it at 0, and
  // returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta, Timeout t = {}) {
    return addImpl(key, delta, resolve(t));
  }
  // If key holds expected (or is absent and expected is empty), sets it to desired. Returns the
  // value the key holds afterwards (c10d's semantics).
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired, Timeout t = {}) {
    return compareSetImpl(key, expected, desired, resolve(t));
  }
  // True when all keys are set; never waits for them.
  bool check(const std::vector<std::string>& keys, Timeout t = {}) { return checkImpl(keys, resolve(t)); }
  // Deletes key; true if it existed.
  bool deleteKey(const std::string& key, Timeout t = {}) { return deleteKeyImpl(key, resolve(t)); }
  // Number of keys in the store (for a PrefixStore: in the whole underlying store, as in c10d).
  std::int64_t numKeys(Timeout t = {}) { return numKeysImpl(resolve(t)); }
  // Waits until all keys are set; throws TimeoutError naming the missing ones.
  void wait(const std::vector<std::string>& keys, Timeout t = {}) { waitImpl(keys, resolve(t)); }
  // get() of several keys, waiting for all of them.
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys, Timeout t = {}) {
    return multiGetImpl(keys, resolve(t));
  }
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values, Timeout t = {}) {
    multiSetImpl(keys, values, resolve(t));
  }
  // Appends value to key's value, creating the key if absent.
  void append(const std::string& key, const Bytes& value, Timeout t = {}) {
    appendImpl(key, value, resolve(t));
  }

  Duration timeout() const { return timeout_; }
  void setTimeout(Duration timeout) { timeout_ = timeout; }
  // Where this store lives, for error messages: "TCPStore at 10.1.2.3:29500", "FileStore at /tmp/x".
  virtual std::string describe() const = 0;

 protected:
  virtual void setImpl(const std::string& key, const Bytes& value, Duration timeout) = 0;
  virtual Bytes getImpl(const std::string& key, Duration timeout) = 0;
  virtual std::int64_t addImpl(const std::string& key, std::int64_t delta, Duration timeout) = 0;
  virtual Bytes compareSetImpl(const std::string& key, const Bytes& expected, const Bytes& desired,
                               Duration timeout) = 0;
  virtual bool checkImpl(const std::vector<std::string>& keys, Duration timeout) = 0;
  virtual bool deleteKeyImpl(const std::string& key, Duration timeout) = 0;
  virtual std::int64_t numKeysImpl(Duration timeout) = 0;
  virtual void waitImpl(const std::vector<std::string>& keys, Duration timeout) = 0;
  virtual void appendImpl(const std::string& key, const Bytes& value, Duration timeout) = 0;
  // Default: one call per key. Implementations with a cheaper batch override these.
  virtual std::vector<Bytes> multiGetImpl(const std::vector<std::string>& keys, Duration timeout);
  virtual void multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                            Duration timeout);

  Duration resolve(Timeout t) const { return t.value_or(timeout_); }

 private:
  Duration timeout_;
};

// The text of a wait timeout, in c10d's words plus where and how long:
// "wait timeout after 2000ms, keys: /a, /b (store: TCPStore at 127.0.0.1:29500; waited 2.00 s)".
std::string waitTimeoutMessage(const Store& store, const std::vector<std::string>& keys, Duration timeout,
                               Duration elapsed);

}  // namespace ds::store
