#include "core/tensor_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace kiln {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Below this, rounding up to whole huge pages would waste too large a share of the block.
constexpr size_t kHugePageThreshold = size_t{4} << 20;

}  // namespace

void* allocate_tensor_memory(size_t size, size_t alignment) {
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if (size == 0) size = 1;
  bool huge = size >= kHugePageThreshold;
  if (huge) {
    size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
    if (rounded >= size) {
      size = rounded;
      if (alignment < kHugePage) alignment = kHugePage;
    }
  }
  void* p = nullptr;
  if (posix_memalign(&p, alignment, size) != 0) return nullptr;
  // Advice only: where THP is off or the hint is refused, the block works as ordinary pages.
  if (huge) madvise(p, size, MADV_HUGEPAGE);
  return p;
}

}  // namespace kiln
