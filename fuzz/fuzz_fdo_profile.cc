// The PGLE profile decoder (profiles come back from the cache and from other processes).
#include "fuzz_support.h"
#include "kiln/pgle.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kiln::decode_fdo_profile(kiln::fuzz::as_view(data, size));
  return 0;
}
