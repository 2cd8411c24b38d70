// The .npy reader (`kiln run --input`): any bytes give a Buffer whose size matches its shape, or
// an error.
#include <cstdlib>
#include <string>

#include "fuzz_support.h"
#include "kiln/npy.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(kiln::fuzz::as_view(data, size));
  kiln::Result<kiln::Buffer> buffer = kiln::parse_npy(bytes, "fuzz.npy");
  if (!buffer.ok()) return 0;
  // What was accepted must be consistent: its bytes fit in what was read, every one readable.
  if (buffer->byte_size() > size) std::abort();
  volatile double sum = 0;
  for (int64_t i = 0; i < buffer->element_count(); ++i) sum = sum + buffer->element_as_double(i);
  return 0;
}
