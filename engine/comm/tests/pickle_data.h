// Tests only: a pickle reader for the flight recorder's dumps that builds data and nothing else.
// It accepts exactly the opcodes the recorder may write (flight_recorder.cpp's Pickler) and turns
// them into JSON values (a tuple becomes an array, None null); any other opcode is an error naming
// it and its offset. So a test that decodes a dump also proves it holds data opcodes only.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds::comm::testing {

inline nlohmann::json decodePickle(const std::string& bytes) {
  using Json = nlohmann::json;
  std::vector<Json> stack;
  std::vector<std::size_t> marks;
  std::size_t i = 0;
  auto need = [&](std::size_t n) {
    if (i + n > bytes.size()) throw std::runtime_error(fmt::format("truncated at byte {}", i));
  };
  auto le = [&](int n) {
    need(static_cast<std::size_t>(n));
    std::uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= std::uint64_t(static_cast<unsigned char>(bytes[i + k])) << (8 * k);
    i += static_cast<std::size_t>(n);
    return v;
  };
  auto popMark = [&] {
    if (marks.empty()) throw std::runtime_error(fmt::format("no MARK before byte {}", i));
    std::size_t m = marks.back();
    marks.pop_back();
    std::vector<Json> items(stack.begin() + static_cast<std::ptrdiff_t>(m), stack.end());
    stack.resize(m);
    return items;
  };
  need(2);
  if (bytes[0] != '\x80' || bytes[1] != '\x02') throw std::runtime_error("not PROTO 2");
  i = 2;
  while (true) {
    need(1);
    const std::size_t at = i;
    const auto op = static_cast<unsigned char>(bytes[i++]);
    switch (op) {
      case '}':
        stack.emplace_back(Json::object());
        break;
      case ']':
        stack.emplace_back(Json::array());
        break;
      case '(':
        marks.push_back(stack.size());
        break;
      case 'u': {
        auto items = popMark();
        if (items.size() % 2 != 0 || stack.empty() || !stack.back().is_object())
          throw std::runtime_error(fmt::format("bad SETITEMS at byte {}", at));
        for (std::size_t k = 0; k < items.size(); k += 2) {
          if (!items[k].is_string()) throw std::runtime_error(fmt::format("a non-text key at byte {}", at));
          stack.back()[items[k].get<std::string>()] = items[k + 1];
        }
        break;
      }
      case 'e': {
        auto items = popMark();
        if (stack.empty() || !stack.back().is_array())
          throw std::runtime_error(fmt::format("bad APPENDS at byte {}", at));
        for (auto& v : items) stack.back().push_back(std::move(v));
        break;
      }
      case 't': {
        auto items = popMark();
        stack.emplace_back(Json(items));
        break;
      }
      case 'X': {
        const auto n = static_cast<std::size_t>(le(4));
        need(n);
        stack.emplace_back(bytes.substr(i, n));
        i += n;
        break;
      }
      case 'J':
        stack.emplace_back(static_cast<std::int64_t>(static_cast<std::int32_t>(le(4))));
        break;
      case 0x8a: {
        need(1);
        const int n = static_cast<unsigned char>(bytes[i++]);
        if (n < 1 || n > 8) throw std::runtime_error(fmt::format("LONG1 of {} bytes at byte {}", n, at));
        std::uint64_t v = le(n);
        if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~std::uint64_t{0} << (8 * n);  // sign
        stack.emplace_back(static_cast<std::int64_t>(v));
        break;
      }
      case 'G': {
        need(8);
        std::uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<unsigned char>(bytes[i + k]);
        i += 8;
        double d = 0;
        std::memcpy(&d, &bits, sizeof(d));
        stack.emplace_back(d);
        break;
      }
      case 'N':
        stack.emplace_back(nullptr);
        break;
      case 0x88:
        stack.emplace_back(true);
        break;
      case 0x89:
        stack.emplace_back(false);
        break;
      case '.':
        if (stack.size() != 1 || !marks.empty())
          throw std::runtime_error("STOP with a stack of other than one value");
        if (i != bytes.size()) throw std::runtime_error(fmt::format("{} bytes after STOP", bytes.size() - i));
        return stack.back();
      default:
        throw std::runtime_error(
            fmt::format("opcode 0x{:02x} at byte {} is not one the recorder writes", op, at));
    }
  }
}

}  // namespace ds::comm::testing
