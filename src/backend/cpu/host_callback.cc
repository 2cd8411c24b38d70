// The host-callback registry and the dispatcher generated code calls through.
#include "kiln/host_callback.h"

#include <map>
#include <mutex>

#include "backend/cpu/host_callback_dispatch.h"

namespace kiln {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, HostCallback> callbacks;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

thread_local Status* call_error = nullptr;

}  // namespace

void register_host_callback(const std::string& name, HostCallback callback) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().callbacks[name] = std::move(callback);
}

void unregister_host_callback(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().callbacks.erase(name);
}

bool host_callback_registered(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().callbacks.count(name) > 0;
}

namespace cpu {

CallbackErrorScope::CallbackErrorScope() : previous_(call_error) { call_error = &status_; }
CallbackErrorScope::~CallbackErrorScope() { call_error = previous_; }

}  // namespace cpu
}  // namespace kiln

// Generated code calls this with the site's signature and the C-interface arguments (pointers to
// memref descriptors). The callable is looked up now, not at load: re-registering takes effect at
// once.
extern "C" __attribute__((visibility("default"))) void kiln_host_callback_dispatch(void* site,
                                                                                   void** args) {
  using namespace kiln;
  const auto* signature = static_cast<const HostCallbackSignature*>(site);
  HostCallback callback;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto it = registry().callbacks.find(signature->name);
    if (it != registry().callbacks.end()) callback = it->second;
  }
  Status status;
  if (!callback) {
    status = not_found("host callback '" + signature->name + "' was unregistered while in use");
  } else {
    std::vector<Buffer> buffers;
    for (size_t i = 0; i < signature->args.size(); ++i) {
      const TensorType& type = signature->args[i];
      auto* slots = static_cast<int64_t*>(args[i]);
      size_t rank = type.shape.size();
      std::vector<int64_t> shape(slots + 3, slots + 3 + rank);
      char* data = reinterpret_cast<char*>(slots[1]) + slots[2] * dtype_size(type.dtype);
      buffers.emplace_back(type.dtype, shape, data, nullptr);
    }
    status = callback(buffers);
  }
  if (!status.ok() && call_error != nullptr && call_error->ok()) {
    *call_error =
        Status(status.code(), "host callback '" + signature->name + "': " + status.message());
  }
}
