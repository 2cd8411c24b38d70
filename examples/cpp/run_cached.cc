// Compiles (or loads from the persistent cache) an MLIR file and runs its entry on ones.
//   run_cached model.mlir ENTRY
#include <cstdio>

#include "kiln/client.h"
#include "kiln/compile.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: run_cached FILE.mlir ENTRY\n");
    return 2;
  }
  auto client = kiln::Client::create_cpu();
  auto source = kiln::ModuleSource::from_file(argv[1]);
  if (!client.ok() || !source.ok()) {
    std::fprintf(stderr, "%s\n",
                 (client.ok() ? source.status() : client.status()).to_string().c_str());
    return 1;
  }
  kiln::CompileReport report;
  auto exe = kiln::compile_or_get_cached(**client, *source, kiln::CompileOptions{}, &report);
  if (!exe.ok()) {
    std::fprintf(stderr, "%s\n", exe.status().to_string().c_str());
    return 1;
  }
  auto entry = (*exe)->find_entry(argv[2]);
  if (!entry.ok()) {
    std::fprintf(stderr, "%s\n", entry.status().to_string().c_str());
    return 1;
  }
  std::vector<kiln::Buffer> inputs;
  for (const kiln::TensorType& type : (*entry)->inputs) {
    kiln::Buffer b(type.dtype, type.shape);
    for (int64_t i = 0; i < b.element_count() && type.dtype == kiln::DType::kF32; ++i)
      b.as<float>()[i] = 1.0f;
    inputs.push_back(b);
  }
  auto outputs = (*exe)->execute(argv[2], inputs);
  if (!outputs.ok()) {
    std::fprintf(stderr, "%s\n", outputs.status().to_string().c_str());
    return 1;
  }
  std::printf("cache %s, %zu result(s); first value %g\n", kiln::to_string(report.cache),
              outputs->size(), outputs->empty() ? 0.0 : (*outputs)[0].element_as_double(0));
  return 0;
}
