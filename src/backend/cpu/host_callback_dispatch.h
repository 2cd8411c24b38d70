// Internal: how execute() learns that a host callback failed during a call.
#pragma once

#include <string>

#include "kiln/status.h"

namespace kiln::cpu {

// While alive, the first host-callback failure on this thread is stored in status().
class CallbackErrorScope {
 public:
  CallbackErrorScope();
  ~CallbackErrorScope();
  const Status& status() const { return status_; }

 private:
  Status status_;
  Status* previous_;
};

// Symbols each executable exports per callback; the loader points them at the dispatcher.
inline std::string callback_function_slot(const std::string& name) { return "_kiln_cb_fn_" + name; }
inline std::string callback_site_slot(const std::string& name) { return "_kiln_cb_site_" + name; }

}  // namespace kiln::cpu

extern "C" void kiln_host_callback_dispatch(void* site, void** args);
