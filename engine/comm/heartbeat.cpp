#include "engine/comm/heartbeat.h"

#include <fmt/format.h>

#include <charconv>

#include "engine/common/error.h"

namespace ds::comm {

std::optional<Beat> parseBeat(const std::string& value) {
  Beat out;
  const char* end = value.data() + value.size();
  auto [p, ec] = std::from_chars(value.data(), end, out.counter);
  if (ec != std::errc() || p == value.data()) return std::nullopt;
  if (p != end && *p != ' ') return std::nullopt;
  if (p != end) out.state.assign(p + 1, end);
  return out;
}

std::string formatBeat(std::uint64_t counter, const std::string& state) {
  return fmt::format("{} {}", counter, state);
}

Heartbeat::Heartbeat(HeartbeatOptions options) : o_(std::move(options)) {
  DS_CHECK(o_.store != nullptr, "a heartbeat needs a store");
  DS_CHECK(o_.state != nullptr, "a heartbeat needs its state");
}

Heartbeat::~Heartbeat() { stop(); }

void Heartbeat::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { loop(); });
}

void Heartbeat::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::string Heartbeat::nextValue() {
  std::uint64_t counter = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    counter = ++counter_;
  }
  return formatBeat(counter, o_.state());
}

void Heartbeat::beatNow(std::chrono::milliseconds timeout) {
  o_.store->set(o_.key, store::toBytes(nextValue()), timeout);
}

void Heartbeat::loop() {
  bool warned = false;
  while (!stopRequested()) {
    try {
      o_.store->set(o_.key, store::toBytes(nextValue()), o_.setTimeout);
    } catch (const std::exception& e) {
      if (!warned && o_.onFirstError) o_.onFirstError(e);
      warned = true;
    }
    if (o_.afterBeat) o_.afterBeat();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, o_.interval, [&] { return stopRequested(); });
  }
}

}  // namespace ds::comm
