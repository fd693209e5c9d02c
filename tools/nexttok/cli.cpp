#include "cli.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace cli {

std::string help_text(const Command& c) {
  std::ostringstream o;
  o << "usage: nexttok " << c.name << " " << c.usage << "\n\n" << c.summary << "\n";
  if (!c.options.empty()) o << "\noptions:\n";
  for (const Option& opt : c.options) {
    std::string left = "  ";
    if (opt.short_name) left += std::string("-") + opt.short_name + ", ";
    left += "--" + opt.name;
    if (!opt.metavar.empty()) left += " " + opt.metavar;
    if (left.size() < 30) left.resize(30, ' ');
    else left += "\n" + std::string(30, ' ');
    o << left << opt.help << "\n";
  }
  o << "  -h, --help                  this help\n";
  return o.str();
}

Args::Args(const Command& c, int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const Option* match = nullptr;
    std::string value;
    bool inline_value = false;
    if (a.size() > 2 && a[0] == '-' && a[1] == '-') {
      std::string name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      for (const Option& o : c.options)
        if (o.name == name) match = &o;
    } else if (a.size() == 2 && a[0] == '-') {
      for (const Option& o : c.options)
        if (o.short_name && o.short_name == a[1]) match = &o;
    } else {
      throw UsageError("unexpected argument '" + a + "'");
    }
    if (match == nullptr) throw UsageError("unknown option '" + a + "'");
    if (match->metavar.empty()) {
      if (inline_value) throw UsageError("option --" + match->name + " takes no value");
      values_[match->name] = "1";
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argc) throw UsageError("option --" + match->name + " needs a value " + match->metavar);
      value = argv[++i];
    }
    values_[match->name] = value;
  }
}

std::string Args::text(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Args::integer(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (errno || end == it->second.c_str() || *end)
    throw UsageError("--" + name + " expects an integer, got '" + it->second + "'");
  if (v < lo || v > hi)
    throw UsageError("--" + name + " must be in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got " + it->second);
  return v;
}

uint64_t Args::unsigned64(const std::string& name, uint64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(it->second.c_str(), &end, 0);
  if (errno || end == it->second.c_str() || *end || it->second[0] == '-')
    throw UsageError("--" + name + " expects an unsigned integer, got '" + it->second + "'");
  return v;
}

double Args::number(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end)
    throw UsageError("--" + name + " expects a number, got '" + it->second + "'");
  return v;
}

std::vector<std::string> Args::list(const std::string& name) const {
  std::vector<std::string> out;
  std::stringstream s(text(name, ""));
  std::string item;
  while (std::getline(s, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

const char* backend_name(nt_device_type d) {
  switch (d) {
    case NT_DEVICE_CPU: return "cpu";
    case NT_DEVICE_CUDA: return "cuda";
    case NT_DEVICE_OPENCL: return "opencl";
  }
  return "?";
}

nt_device_type parse_backend(const std::string& text) {
  if (text == "cpu") return NT_DEVICE_CPU;
  if (text == "cuda") return NT_DEVICE_CUDA;
  if (text == "opencl") return NT_DEVICE_OPENCL;
  throw UsageError("--backend must be cpu, cuda or opencl, got '" + text + "'");
}

}  // namespace cli
