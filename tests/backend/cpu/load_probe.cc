// Test helper: loads a serialised executable in a fresh process, runs one entry on inputs read from
// .npy files, writes the results, and says whether libMLIR or libLLVM got mapped.
#include <cstdio>
#include <fstream>
#include <string>

#include "kiln/executable.h"
#include "kiln/npy.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: kiln_load_probe FILE.kx ENTRY OUT_PREFIX [IN.npy ...]\n");
    return 2;
  }
  auto exe = kiln::Executable::deserialize_file(argv[1]);
  if (!exe.ok()) {
    std::fprintf(stderr, "%s\n", exe.status().to_string().c_str());
    return 1;
  }
  std::vector<kiln::Buffer> inputs;
  for (int i = 4; i < argc; ++i) {
    auto b = kiln::read_npy(argv[i]);
    if (!b.ok()) return 1;
    inputs.push_back(*b);
  }
  auto out = (*exe)->execute(argv[2], inputs);
  if (!out.ok()) {
    std::fprintf(stderr, "%s\n", out.status().to_string().c_str());
    return 1;
  }
  for (size_t i = 0; i < out->size(); ++i)
    (void)kiln::write_npy(std::string(argv[3]) + std::to_string(i) + ".npy", (*out)[i]);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool mlir = false, llvm = false;
  while (std::getline(maps, line)) {
    if (line.find("libMLIR") != std::string::npos) mlir = true;
    if (line.find("libLLVM") != std::string::npos) llvm = true;
  }
  std::printf("libMLIR mapped: %s\nlibLLVM mapped: %s\n", mlir ? "yes" : "no", llvm ? "yes" : "no");
  return 0;
}
