#include "device.h"

#include "cli.h"

TestDevice* find_device(nt_device_type type, std::string* why) {
  const std::string name = cli::backend_name(type);
  for (const std::string& compiled : ntt::device_names())
    if (compiled == name) {
      TestDevice& dev = ntt::device(name);
      return dev.present(why) ? &dev : nullptr;
    }
  *why = "the " + name + " backend is not compiled in";
  return nullptr;
}
