// The .kx reader: every check made before code is loaded (header, checksum, metadata, ELF
// structure, the symbols the metadata names). Nothing is loaded, so nothing runs.
#include <string>

#include "core/digest.h"
#include "fuzz_support.h"
#include "kiln/executable.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes = kiln::fuzz::as_view(data, size);
  (void)kiln::Executable::check_serialized(bytes);
  // Again with the checksum (header bytes 32..39, over everything after the 40-byte header) made
  // valid, so the metadata and ELF checks see the mutants.
  constexpr size_t kHeaderSize = 40, kChecksumAt = 32;
  if (bytes.size() >= kHeaderSize) {
    std::string fixed(bytes);
    kiln::fuzz::put_u64(fixed, kChecksumAt, kiln::xxh3_64(bytes.substr(kHeaderSize)));
    (void)kiln::Executable::check_serialized(fixed);
  }
  return 0;
}
