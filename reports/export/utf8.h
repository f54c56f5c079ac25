// Reading text from result files code point by code point, for the exporters: a hostname, label or
// check message comes from outside and may hold bytes that are not UTF-8 (a broken locale, an imported
// log). Prometheus' parsers reject a label value that is not UTF-8 and XML parsers reject the whole
// document, so the exporters decode with this and write U+FFFD where a byte is not part of a valid
// sequence.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ds::report::detail {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Calls f(code point) for each code point of text. A byte that does not start a valid UTF-8 sequence
// (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, a sequence cut short)
// gives one U+FFFD, and decoding goes on at the next byte.
template <class F>
void forEachCodePoint(std::string_view text, F&& f) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      f(static_cast<char32_t>(b));
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0, min = 0;
    if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07, min = 0x10000;
    }
    bool ok = len > 0 && i + static_cast<std::size_t>(len) <= n;
    for (int k = 1; ok && k < len; ++k) {
      const unsigned char c = s[i + static_cast<std::size_t>(k)];
      if ((c & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (!ok) {
      f(kReplacementChar);
      ++i;
      continue;
    }
    f(cp);
    i += static_cast<std::size_t>(len);
  }
}

// Appends the UTF-8 encoding of a valid code point.
inline void appendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace ds::report::detail
