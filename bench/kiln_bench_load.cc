// Benchmark helper: in a fresh process, deserialise one .kx and make it ready to run; prints the
// milliseconds that took (file read included).
#include <chrono>
#include <cstdio>

#include "kiln/executable.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto start = std::chrono::steady_clock::now();
  auto exe = kiln::Executable::deserialize_file(argv[1]);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!exe.ok()) {
    std::fprintf(stderr, "%s\n", exe.status().to_string().c_str());
    return 1;
  }
  std::printf("%.3f\n", ms);
  return 0;
}
