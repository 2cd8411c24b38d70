// The host description side cache as files: <cache dir>/hosts/<digest of the identity>.txt, read
// only where no other user could have written it, written only by the cache's writer process.
#pragma once

#include <memory>
#include <string>

#include "backend/cpu/host_description_cache.h"

namespace kiln {

std::shared_ptr<cpu::HostDescriptionCache> host_description_files(std::string directory,
                                                                  int writer_process,
                                                                  bool trust_shared_directory);

}  // namespace kiln
