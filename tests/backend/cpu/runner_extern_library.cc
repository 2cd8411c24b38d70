// A library a test program calls into, loaded with `kiln run --shared-libs` (as mlir-runner's
// users load their own runtime functions).
#include <cstdint>

extern "C" __attribute__((visibility("default"))) int32_t kiln_test_add_seven(int32_t x) {
  return x + 7;
}
