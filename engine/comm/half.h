// IEEE half (f16) and bfloat16 conversions on the host, round to nearest even. Used where a backend
// has no native 16-bit float type (it computes in f32 and rounds once) and by reference checks.
#pragma once

#include <cstdint>
#include <cstring>

namespace ds::comm {

inline float bf16ToFloat(std::uint16_t h) {
  std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline std::uint16_t floatToBf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) return 0x7fc0;  // NaN stays NaN
  std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float f16ToFloat(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline std::uint16_t floatToF16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  std::uint32_t sign = (bits >> 16) & 0x8000u;
  std::uint32_t absBits = bits & 0x7fffffffu;
  if (absBits >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0u));
  }
  if (absBits >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absBits < 0x38800000u) {                                                    // subnormal or zero
    if (absBits < 0x33000000u) return static_cast<std::uint16_t>(sign);
    std::uint32_t exp = absBits >> 23;
    std::uint32_t mant = (absBits & 0x7fffffu) | 0x800000u;
    std::uint32_t shift = 126 - exp;  // 14 - (exp - 127) + 13 - ... aligned to the f16 subnormal grid
    std::uint32_t half = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1);
    std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t exp = (absBits >> 23) - 127 + 15;
  std::uint32_t mant = absBits & 0x7fffffu;
  std::uint32_t half = (exp << 10) | (mant >> 13);
  std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exp: correct
  return static_cast<std::uint16_t>(sign | half);
}

}  // namespace ds::comm
