// Internal: how execute() learns that a host callback failed during a call.
#pragma once

#include <string>

#include "backend/cpu/generated_code_contract.h"
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

}  // namespace kiln::cpu

extern "C" void kiln_host_callback_dispatch(void* site, void** args);
