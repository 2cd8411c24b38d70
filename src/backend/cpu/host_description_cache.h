// Where a real Client remembers this machine's description in LLVM's terms, so that only the first
// process on a machine type loads the compiler library to ask. The backend reads no cache flags:
// the compilation cache installs the store (files next to its entries) when it opens a directory.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend/cpu/compiler_interface.h"

namespace kiln::cpu {

class HostDescriptionCache {
 public:
  virtual ~HostDescriptionCache() = default;
  // The description stored for `identity` (cpuid, kiln and LLVM versions), if any is believed.
  virtual std::optional<HostDescription> load(const std::string& identity) = 0;
  // Best effort: what process `process_index` asked LLVM, for the next process.
  virtual void save(const std::string& identity, const HostDescription& description,
                    int process_index) = 0;
};

// The store the process's first host description reads and writes: the one installed last (the
// process describes its host once, and remembers the answer).
void install_host_description_cache(std::shared_ptr<HostDescriptionCache> cache);
std::shared_ptr<HostDescriptionCache> installed_host_description_cache();

}  // namespace kiln::cpu
