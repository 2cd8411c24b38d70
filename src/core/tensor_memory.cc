#include "core/tensor_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

namespace kiln {
namespace {

constexpr size_t kLargeBlock = size_t{4} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
// Below this, whole huge pages would waste too large a share of the block.
constexpr size_t kHugePageThreshold = size_t{4} << 20;
constexpr size_t kSmallGranule = size_t{64} << 10;
// Blocks kept for reuse beyond this are unmapped, largest first.
constexpr size_t kMaxKeptBytes = size_t{1} << 30;
// Larger blocks are unmapped when released: kept, they would sit beside the smaller buffers of the
// runs that follow. Remapping one costs a few faults on huge pages and the kernel's zeroing, small
// beside the work on a tensor that size.
constexpr size_t kMaxKeptBlock = size_t{32} << 20;

size_t round_up(size_t size, size_t granule) { return (size + granule - 1) / granule * granule; }

struct LargeBlocks {
  std::mutex mutex;
  std::unordered_map<void*, size_t> in_use;  // block → mapped size
  std::multimap<size_t, void*> kept;         // mapped size → block, free for reuse
  size_t kept_bytes = 0;
  size_t mapped_bytes = 0;
  size_t in_use_bytes = 0;
  size_t peak_in_use_bytes = 0;
  void use(void* p, size_t size) {
    in_use[p] = size;
    in_use_bytes += size;
    if (in_use_bytes > peak_in_use_bytes) peak_in_use_bytes = in_use_bytes;
  }
};

LargeBlocks& blocks() {
  static LargeBlocks* b = new LargeBlocks();  // outlives static destructors that free buffers
  return *b;
}

// A fresh mapping of `size` bytes, aligned to 2 MiB when huge pages may back it.
void* map_block(size_t size, bool huge) {
  if (!huge) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  size_t padded = size + kHugePage;
  void* raw = mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = round_up(start, kHugePage);
  if (aligned > start) munmap(raw, aligned - start);
  size_t tail = start + padded - (aligned + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // Advice only: where THP is off or the hint is refused, the block works as ordinary pages.
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void* allocate_large(size_t size) {
  bool huge = size >= kHugePageThreshold;
  size_t mapped = round_up(size, huge ? kHugePage : kSmallGranule);
  if (mapped < size) return nullptr;  // overflow
  LargeBlocks& b = blocks();
  {
    std::lock_guard<std::mutex> lock(b.mutex);
    // The smallest kept block that fits, unless it is more than twice the size asked for.
    auto it = b.kept.lower_bound(mapped);
    if (it != b.kept.end() && it->first <= 2 * mapped) {
      void* p = it->second;
      b.kept_bytes -= it->first;
      b.use(p, it->first);
      b.kept.erase(it);
      return p;
    }
  }
  void* p = map_block(mapped, huge);
  if (p == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(b.mutex);
  b.use(p, mapped);
  b.mapped_bytes += mapped;
  return p;
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

void* allocate_tensor_memory(size_t size, size_t alignment) {
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if (size == 0) size = 1;
  // Mappings are page-aligned, which covers every alignment tensors ask for. Under
  // AddressSanitizer every block comes from malloc, so overruns hit its red zones.
  if (!kUnderAddressSanitizer && size >= kLargeBlock && alignment <= 4096)
    return allocate_large(size);
  void* p = nullptr;
  if (posix_memalign(&p, alignment, size) != 0) return nullptr;
  return p;
}

void release_tensor_memory(void* pointer) {
  if (pointer == nullptr) return;
  LargeBlocks& b = blocks();
  std::unique_lock<std::mutex> lock(b.mutex);
  auto it = b.in_use.find(pointer);
  if (it == b.in_use.end()) {
    lock.unlock();
    std::free(pointer);
    return;
  }
  size_t size = it->second;
  b.in_use.erase(it);
  b.in_use_bytes -= size;
  if (size > kMaxKeptBlock) {
    b.mapped_bytes -= size;
    lock.unlock();
    munmap(pointer, size);
    return;
  }
  b.kept.emplace(size, pointer);
  b.kept_bytes += size;
  while (b.kept_bytes > kMaxKeptBytes) {
    auto largest = std::prev(b.kept.end());
    munmap(largest->second, largest->first);
    b.kept_bytes -= largest->first;
    b.mapped_bytes -= largest->first;
    b.kept.erase(largest);
  }
}

void* map_memory(size_t size) {
  if (size == 0) size = 1;
  bool huge = size >= kHugePageThreshold;
  size_t mapped = round_up(size, huge ? kHugePage : 4096);
  return mapped < size ? nullptr : map_block(mapped, huge);
}

void unmap_memory(void* pointer, size_t size) {
  if (pointer == nullptr) return;
  if (size == 0) size = 1;
  munmap(pointer, round_up(size, size >= kHugePageThreshold ? kHugePage : 4096));
}

TensorMemoryStats tensor_memory_stats() {
  LargeBlocks& b = blocks();
  std::lock_guard<std::mutex> lock(b.mutex);
  return {static_cast<int64_t>(b.mapped_bytes), static_cast<int64_t>(b.kept_bytes),
          static_cast<int64_t>(b.peak_in_use_bytes)};
}

}  // namespace kiln
