#include "engine/store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "engine/common/error.h"

namespace ds::store {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kHeader = "DSFS1\n";
constexpr char kOpSet = 'S';
constexpr char kOpAppend = 'A';
constexpr char kOpDelete = 'D';
constexpr size_t kRecordHead = 1 + 4 + 4;  // op, key length, value length
constexpr Duration kMinPoll{1};
constexpr Duration kMaxPoll{50};

void putU32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint32_t getU32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

void encode(std::string& out, char op, const std::string& key, const Bytes& value) {
  out.push_back(op);
  putU32(out, static_cast<std::uint32_t>(key.size()));
  putU32(out, static_cast<std::uint32_t>(value.size()));
  out.append(key);
  out.append(reinterpret_cast<const char*>(value.data()), value.size());
}

}  // namespace

// Holds mu_ and the flock for one operation, with the log replayed up to the end of the file.
class FileStore::Locked {
 public:
  Locked(FileStore& fs, bool exclusive) : fs_(fs), lock_(fs.mu_) {
    fs_.openFile();
    while (::flock(fs_.fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
      if (errno != EINTR) {
        throw IoError(
            fmt::format("flock() on {} failed (errno: {}); the filesystem must support flock "
                        "between processes (NFSv4, or Lustre mounted with -o flock)",
                        fs_.path_, errnoText(errno)));
      }
    }
    try {
      fs_.replay();
    } catch (...) {
      ::flock(fs_.fd_, LOCK_UN);
      throw;
    }
  }
  ~Locked() { ::flock(fs_.fd_, LOCK_UN); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  FileStore& fs_;
  std::lock_guard<std::mutex> lock_;
};

FileStore::FileStore(std::string path, Duration timeout) : Store(timeout), path_(std::move(path)) {
  std::lock_guard lock(mu_);
  openFile();
}

FileStore::~FileStore() {
  if (fd_ >= 0) ::close(fd_);
}

// (Re)opens the file when it is not open or when the path now names another file (a previous job's
// file was removed and recreated): state from the old inode is dropped.
void FileStore::openFile() {
  struct stat pathStat {};
  if (fd_ >= 0) {
    struct stat fdStat {};
    if (::stat(path_.c_str(), &pathStat) == 0 && ::fstat(fd_, &fdStat) == 0 &&
        pathStat.st_ino == fdStat.st_ino && pathStat.st_dev == fdStat.st_dev) {
      return;
    }
    ::close(fd_);
    fd_ = -1;
  }
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw IoError(
        fmt::format("cannot open the FileStore file {} (errno: {}); check that its directory "
                    "exists, is writable, and is on a filesystem every rank shares",
                    path_, errnoText(errno)));
  }
  offset_ = 0;
  map_.clear();
}

void FileStore::replay() {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw IoError(fmt::format("fstat({}) failed: {}", path_, errnoText(errno)));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < offset_) {  // truncated by someone: start over
    offset_ = 0;
    map_.clear();
  }
  if (size == offset_) return;
  std::string buf(size - offset_, '\0');
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd_, buf.data() + got, buf.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(fmt::format("reading {} failed: {}", path_, errnoText(errno)));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  buf.resize(got);
  size_t pos = 0;
  if (offset_ == 0) {
    if (buf.size() < kHeader.size()) return;  // a writer is mid-way: read again next time
    if (buf.compare(0, kHeader.size(), kHeader) != 0) {
      throw ProtocolError(
          fmt::format("{} exists but is not a dsperf FileStore (no DSFS1 header); point the "
                      "file:// init method at a new path or remove the file",
                      path_));
    }
    pos = kHeader.size();
  }
  while (buf.size() - pos >= kRecordHead) {
    const char op = buf[pos];
    const std::uint32_t keyLen = getU32(&buf[pos + 1]);
    const std::uint32_t valLen = getU32(&buf[pos + 5]);
    if (op != kOpSet && op != kOpAppend && op != kOpDelete) {
      throw ProtocolError(
          fmt::format("FileStore {} is corrupt at byte {} (record type {:#x}); remove the file "
                      "and restart the job",
                      path_, offset_ + pos, static_cast<unsigned char>(op)));
    }
    const size_t total = kRecordHead + keyLen + static_cast<size_t>(valLen);
    if (buf.size() - pos < total) break;  // partial record: a writer died mid-write or is still writing
    std::string key(&buf[pos + kRecordHead], keyLen);
    const auto* v = reinterpret_cast<const std::uint8_t*>(&buf[pos + kRecordHead + keyLen]);
    if (op == kOpSet) {
      map_.set(key, Bytes(v, v + valLen));
    } else if (op == kOpAppend) {
      map_.append(key, Bytes(v, v + valLen));
    } else {
      map_.erase(key);
    }
    pos += total;
  }
  offset_ += pos;
}

void FileStore::writeRecords(const std::string& records) {
  std::string out;
  if (offset_ == 0) out.append(kHeader);  // the file is empty (replay() just ran under the lock)
  out.append(records);
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::write(fd_, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(fmt::format("writing to {} failed: {}", path_, errnoText(errno)));
    done += static_cast<size_t>(n);
  }
  offset_ += out.size();
}

template <typename F>
auto FileStore::waitThen(const std::vector<std::string>& keys, Duration timeout, F take) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  Duration pause = kMinPoll;
  std::vector<std::string> missing;
  for (;;) {
    {
      Locked locked(*this, false);
      missing = map_.missing(keys);
      if (missing.empty()) return take();
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, kMaxPoll);
  }
  auto elapsed = std::chrono::duration_cast<Duration>(Clock::now() - start);
  throw TimeoutError(waitTimeoutMessage(*this, missing, timeout, elapsed));
}

void FileStore::setImpl(const std::string& key, const Bytes& value, Duration) {
  Locked locked(*this, true);
  std::string rec;
  encode(rec, kOpSet, key, value);
  writeRecords(rec);
  map_.set(key, value);
}

Bytes FileStore::getImpl(const std::string& key, Duration timeout) {
  return waitThen({key}, timeout, [&] { return *map_.find(key); });
}

std::int64_t FileStore::addImpl(const std::string& key, std::int64_t delta, Duration) {
  Locked locked(*this, true);
  const std::int64_t v = map_.add(key, delta);
  std::string rec;
  encode(rec, kOpSet, key, *map_.find(key));
  writeRecords(rec);
  return v;
}

Bytes FileStore::compareSetImpl(const std::string& key, const Bytes& expected, const Bytes& desired,
                                Duration) {
  Locked locked(*this, true);
  const Bytes* before = map_.find(key);
  const bool had = before != nullptr;
  const Bytes old = had ? *before : Bytes{};
  Bytes now = map_.compareSet(key, expected, desired);
  if (map_.contains(key) && (!had || old != *map_.find(key))) {
    std::string rec;
    encode(rec, kOpSet, key, now);
    writeRecords(rec);
  }
  return now;
}

bool FileStore::checkImpl(const std::vector<std::string>& keys, Duration) {
  Locked locked(*this, false);
  return map_.missing(keys).empty();
}

bool FileStore::deleteKeyImpl(const std::string& key, Duration) {
  Locked locked(*this, true);
  if (!map_.erase(key)) return false;
  std::string rec;
  encode(rec, kOpDelete, key, {});
  writeRecords(rec);
  return true;
}

std::int64_t FileStore::numKeysImpl(Duration) {
  Locked locked(*this, false);
  return map_.size();
}

void FileStore::waitImpl(const std::vector<std::string>& keys, Duration timeout) {
  waitThen(keys, timeout, [] { return 0; });
}

void FileStore::appendImpl(const std::string& key, const Bytes& value, Duration) {
  Locked locked(*this, true);
  std::string rec;
  encode(rec, kOpAppend, key, value);
  writeRecords(rec);
  map_.append(key, value);
}

std::vector<Bytes> FileStore::multiGetImpl(const std::vector<std::string>& keys, Duration timeout) {
  return waitThen(keys, timeout, [&] {
    std::vector<Bytes> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(*map_.find(k));
    return out;
  });
}

void FileStore::multiSetImpl(const std::vector<std::string>& keys, const std::vector<Bytes>& values,
                             Duration timeout) {
  if (keys.size() != values.size()) return Store::multiSetImpl(keys, values, timeout);  // throws
  Locked locked(*this, true);
  std::string recs;
  for (size_t i = 0; i < keys.size(); ++i) encode(recs, kOpSet, keys[i], values[i]);
  writeRecords(recs);
  for (size_t i = 0; i < keys.size(); ++i) map_.set(keys[i], values[i]);
}

}  // namespace ds::store
