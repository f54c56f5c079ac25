// Result files (JSON, HTML) are written atomically (temp file in the same folder + fsync + rename), so a
// killed run never leaves a half-written result.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "engine/common/error.h"

namespace ds::report {

// An optional field as JSON: its value, or null when it is absent.
template <class T>
nlohmann::json jsonOrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// Serialises for a file: a string with bytes that are not UTF-8 (a hostname or env value from a broken
// locale, an imported text) is written with U+FFFD in their place instead of failing the whole write.
std::string dumpJson(const nlohmann::json& j, int indent = -1);
// Writes text to path through a temp file in the same folder, fsync and rename: a reader sees the old
// file or the whole new one. Throws IoError naming the path and errno; the temp file is removed.
void writeTextAtomic(const std::string& path, const std::string& text);
// writeTextAtomic of dumpJson(j, 2).
void writeJsonAtomic(const std::string& path, const nlohmann::json& j);
// Throws IoError when unreadable, ConfigError naming the path and position when not JSON.
nlohmann::json readJson(const std::string& path);
// FNV-1a 64 of text, as 16 lower-case hex characters: the identity of run, check and baseline records.
std::string fnv1a64Hex(std::string_view text);
// readJson of a file's text already read (`origin` names it in errors).
nlohmann::json parseJsonText(const std::string& text, const std::string& origin);

// The readers' errors, in one place. `schema` says what the document should be and how to make a
// good one again: "dsperf.sweep", "dsperf.train", "dsperf.diag", "dsperf.world", the journals'
// "dsperf.sweep.journal" / "dsperf.train.journal", or "nccl-tests"; another value gives general advice.
//
// A json::exception raised while reading fields of `doc` (the document, or one journal line, that
// `origin` names), as a ConfigError: "run.json: at /results/3/out_of_place/bus_bw: expected a number,
// found a string ("fast"). It is not a valid dsperf sweep result: it was changed or damaged after it was
// written; regenerate it with ...", or, for a newer minor schema version, to upgrade dsperf. The
// pointer (RFC 6901) comes from nlohmann's JSON_DIAGNOSTICS (cmake/Dependencies.cmake); the value found
// is looked up in doc.
ConfigError jsonFieldError(const nlohmann::json::exception& e, const nlohmann::json& doc,
                           const std::string& origin, std::string_view schema);
// Text that does not parse as JSON, as a ConfigError: where the parser stopped (line, column and the
// pointer of the value it was in), whether the file is cut short or damaged, and what to do.
ConfigError notJsonError(const std::string& text, const std::string& origin, std::string_view schema);

// Runs read(), which reads fields of doc, turning a json::exception into jsonFieldError.
template <class F>
auto readFields(const nlohmann::json& doc, const std::string& origin, std::string_view schema, F&& read)
    -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    throw jsonFieldError(e, doc, origin, schema);
  }
}

// An integer field read from a file: a JSON number that fits T, else nlohmann's out_of_range (406) or
// type_error (302), which the readers turn into a ConfigError naming the file (jsonFieldError).
// nlohmann::json's own get<int>() casts whatever is there, and a float beyond the type (1e60) is undefined
// behaviour. A float with a fraction is truncated, as get<int>() does.
template <class T>
T readInt(const nlohmann::json& j) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using L = std::numeric_limits<T>;
  auto tooBig = [&](const std::string& shown) {
    return nlohmann::json::out_of_range::create(406,
                                                "number " + shown + " does not fit an integer from " +
                                                    std::to_string(L::min()) + " to " +
                                                    std::to_string(L::max()),
                                                &j);
  };
  if (j.is_number_unsigned()) {
    const auto v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(L::max())) throw tooBig(std::to_string(v));
    return static_cast<T>(v);
  }
  if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if ((v < 0 && (!L::is_signed || v < static_cast<std::int64_t>(L::min()))) ||
        (v > 0 && static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(L::max())))
      throw tooBig(std::to_string(v));
    return static_cast<T>(v);
  }
  if (j.is_number_float()) {
    const double v = std::trunc(j.get<double>());
    const double limit = std::ldexp(1.0, L::digits);  // 2^digits: the first value beyond T
    if (!(v < limit && v >= (L::is_signed ? -limit : 0.0))) throw tooBig(j.dump());
    return static_cast<T>(v);
  }
  throw nlohmann::json::type_error::create(302, std::string("type must be number, but is ") + j.type_name(),
                                           &j);
}

template <class T>
inline constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T>
struct IsIntegerVector : std::false_type {};
template <class E, class A>
struct IsIntegerVector<std::vector<E, A>> : std::bool_constant<kIsInteger<E>> {};

// j.get_to(out), with readInt's check when out is an integer or a vector of integers.
template <class T>
void readTo(const nlohmann::json& j, T& out) {
  if constexpr (kIsInteger<T>) {
    out = readInt<T>(j);
  } else if constexpr (IsIntegerVector<T>::value) {
    if (!j.is_array())
      throw nlohmann::json::type_error::create(
          302, std::string("type must be array, but is ") + j.type_name(), &j);
    out.clear();
    for (const auto& e : j) out.push_back(readInt<typename T::value_type>(e));
  } else {
    j.get_to(out);
  }
}

// j.value(key, fallback) for an integer: the fallback when the key is missing, else readInt.
template <class T>
T readIntOr(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() ? fallback : readInt<T>(*it);
}

// j.value(key, fallback) for a text field: the fallback when j is not an object, the key is missing
// or holds something else than a string (nlohmann's value() throws type_error for that, which some
// callers would let escape without the file's name).
std::string textOr(const nlohmann::json& j, const char* key, const std::string& fallback);

}  // namespace ds::report
