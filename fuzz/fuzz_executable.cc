// The .kx reader: every check made before code is loaded (header, checksum, metadata, ELF
// structure, the symbols the metadata names). Nothing is loaded, so nothing runs.
#include "fuzz_support.h"
#include "kiln/executable.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kiln::Executable::check_serialized(kiln::fuzz::as_view(data, size));
  return 0;
}
