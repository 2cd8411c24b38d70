// Host callbacks: functions a module declares (`func.func private @name(tensor/memref args)
// attributes {kiln.host_callback}`) and the host provides. They are bound by name when an
// executable loads, and looked up again at every call, so a cached executable calls whatever is
// registered under its names now.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/buffer.h"
#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

// Arguments arrive as views of the program's buffers, valid during the call only.
using HostCallback = std::function<Status(const std::vector<Buffer>& args)>;

struct KILN_EXPORT HostCallbackSignature {
  std::string name;
  std::vector<TensorType> args;
};

// Registers (or replaces) the callable for `name`. Thread-safe.
KILN_EXPORT void register_host_callback(const std::string& name, HostCallback callback);
KILN_EXPORT void unregister_host_callback(const std::string& name);
KILN_EXPORT bool host_callback_registered(const std::string& name);

}  // namespace kiln
