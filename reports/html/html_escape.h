// The two ways text from a result file enters an HTML page, and nothing else: as HTML text or an
// attribute value (escapeHtml), or as data for the page script (jsonForScript). Hostnames, labels,
// env values, check messages and file names all come from outside and pass through one of these, so
// a hostname of "<script>" is shown, never run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ds::report::html {

// Escapes & < > " ' for use as element text or a quoted attribute value. Invalid UTF-8 is replaced by
// U+FFFD, so a stray byte cannot change how the browser reads what follows.
std::string escapeHtml(std::string_view text);

// The JSON text for a <script type="application/json"> element: ASCII only (so U+2028/U+2029 arrive
// as \u2028/\u2029), with < > & written as \u003c \u003e \u0026 so "</script>" or "<!--" in a string
// cannot end or change the element. Invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string jsonForScript(const nlohmann::json& data);

}  // namespace ds::report::html
