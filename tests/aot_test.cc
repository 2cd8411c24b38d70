// Ahead-of-time builds for other machines: a baseline x86-64 CPU (loads and runs here) and aarch64
// (a valid object for that architecture, refused here with a clear error).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "kiln/compile.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

CompileOptions for_target(std::string triple, std::string cpu) {
  CompileOptions o;
  o.target.triple = std::move(triple);
  o.target.cpu = std::move(cpu);
  return o;
}

TEST(AotTest, BaselineX86CodeLoadsAndComputesTheSameResults) {
  auto source = ModuleSource::from_file(program_path("matmul_odd.mlir"));
  ASSERT_TRUE(source.ok());
  auto bytes = shared_client().compile_serialized(*source, for_target("", "x86-64-v2"));
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto baseline = Executable::deserialize(*bytes);
  ASSERT_TRUE(baseline.ok()) << baseline.status().to_string();
  EXPECT_EQ(baseline->get()->info().target_cpu, "x86-64-v2");
  auto native = shared_client().compile(*source, {});
  ASSERT_TRUE(native.ok());
  Buffer a = random_f32({37, 53}, 1), b = random_f32({53, 29}, 2);
  auto x = (*baseline)->execute("matmul", {a, b});
  auto y = (*native)->execute("matmul", {a, b});
  ASSERT_TRUE(x.ok() && y.ok());
  for (int64_t i = 0; i < 37 * 29; ++i)
    EXPECT_NEAR((*x)[0].as<float>()[i], (*y)[0].as<float>()[i], 1e-4);
}

TEST(AotTest, Aarch64IsAValidObjectForThatArchitectureAndRefusedHere) {
  auto source = ModuleSource::from_file(program_path("softmax.mlir"));
  ASSERT_TRUE(source.ok());
  auto bytes = shared_client().compile_serialized(
      *source, for_target("aarch64-unknown-linux-gnu", "neoverse-v1"));
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  size_t elf = bytes->find(
      "\x7f"
      "ELF");
  ASSERT_NE(elf, std::string::npos);
  uint16_t machine = 0;
  std::memcpy(&machine, bytes->data() + elf + 18, 2);
  EXPECT_EQ(machine, 183);  // EM_AARCH64
  auto loaded = Executable::deserialize(*bytes);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("was compiled for aarch64-unknown-linux-gnu; this machine is x86_64"));
}

TEST(AotTest, TargetsHaveTheirOwnKeysAndUnknownCpusAreRejected) {
  ModuleSource m{"func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> { return %a : tensor<4xf32> }",
                 "<t>"};
  std::set<std::string> keys;
  for (const CompileOptions& o : {CompileOptions{}, for_target("", "x86-64-v2"),
                                  for_target("aarch64-unknown-linux-gnu", "neoverse-v1")})
    keys.insert(compute_cache_key(shared_client(), m, o, nullptr)->key);
  EXPECT_EQ(keys.size(), 3u);
  auto bad = shared_client().compile_serialized(m, for_target("", "pentium99"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'pentium99' is not a CPU LLVM knows"));
}

}  // namespace
}  // namespace kiln::testing
