// A store in one file on a filesystem every rank can reach (the `file:///path` init method).
//
// The file is an append-only log of records (set, append, delete) behind a "DSFS1" header. Every
// operation takes flock() on the file (shared to read, exclusive to write), replays the records it
// has not seen yet, and, for a write, appends its own. Waits poll with a backoff sleep (1 ms growing
// to 50 ms) until their deadline: they never spin and never hold the lock while sleeping.
//
// Processes: each process (and each fork() child) must construct its own FileStore; flock() does not
// exclude two users of one inherited descriptor. Threads may share one FileStore.
// The filesystem must honour flock() between its clients (local disks, NFSv4, Lustre with -o flock).
// The file is never deleted by the store: remove it between jobs, or use a fresh path per job.
#pragma once

#include <mutex>

#include "engine/store/kv_map.h"
#include "engine/store/store.h"

namespace ds::store {

class FileStore : public Store {
 public:
  // Creates the file if needed. Throws IoError if it cannot be opened, ProtocolError if it exists
  // and is not a FileStore log.
  explicit FileStore(std::string path, Duration timeout = kDefaultTimeout);
  ~FileStore() override;

  const std::string& path() const { return path_; }
  std::string describe() const override { return "FileStore at " + path_; }

 protected:
  void setImpl(const std::string& key, const Bytes& value, Duration timeout) override;
  Bytes getImpl(const std::string& key, Duration timeout) override;
  std::int64_t addImpl(const std::string& key, std::int64_t delta, Duration timeout) override;
  Bytes compareSetImpl(const std::string& key, const Bytes& expected, const Bytes& desired,
                       Duration timeout) override;
  bool checkImpl(const std::vector<std::string>& keys, Duration timeout) override;
  bool deleteKeyImpl(const std::string& key, Duration timeout) override;
  std::int64_t numKeysImpl(Duration timeout) override;
  void waitImpl(const std::vector<std::string>& keys, Duration timeout) override;
  void appendImpl(const std::string& key, const Bytes& value, Duration timeout) override;
  std::vector<Bytes> multiGetImpl(const std::vector<std::string>& keys, Duration timeout) override;
  void multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                    Duration timeout) override;

 private:
  class Locked;  // RAII: mu_ + flock + replay; see file_store.cpp
  // Polls until all keys are present, then calls `take` under the lock. Throws TimeoutError.
  template <typename F>
  auto waitThen(const std::vector<std::string>& keys, Duration timeout, F take);

  void openFile();
  void replay();                                  // reads records past offset_; caller holds the flock
  void writeRecords(const std::string& records);  // caller holds the exclusive flock

  std::string path_;
  std::mutex mu_;  // serialises threads: flock() does not exclude threads sharing fd_
  int fd_ = -1;
  std::uint64_t offset_ = 0;  // bytes of the log already applied to map_
  detail::KvMap map_;
};

}  // namespace ds::store
