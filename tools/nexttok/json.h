// Minimal JSON output: objects written field by field, strings escaped,
// non-finite numbers as null (JSON has no NaN or infinity).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace json {

inline std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

inline std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Builds {"a": 1, "b": "x"}; values are already JSON text.
class Object {
 public:
  Object& raw(const std::string& key, const std::string& value) {
    text_ += (text_.empty() ? "{" : ", ") + quote(key) + ": " + value;
    return *this;
  }
  Object& str(const std::string& key, const std::string& v) { return raw(key, quote(v)); }
  Object& num(const std::string& key, double v) { return raw(key, number(v)); }
  Object& boolean(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  std::string done() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  std::string text_;
};

}  // namespace json
