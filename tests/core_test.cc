// Core pieces without the compiler: effort levels, .npy files, the pipeline list, the client.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "backend/cpu/pipeline.h"
#include "kiln/npy.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

TEST(EffortLevelTest, ParsesNamesAndNumbers) {
  EXPECT_EQ(*parse_effort_level("O0"), EffortLevel::kO0);
  EXPECT_EQ(*parse_effort_level("19"), EffortLevel::kO1);
  EXPECT_EQ(*parse_effort_level("O3"), EffortLevel::kO3);
  EXPECT_EQ(*parse_effort_level("UNKNOWN"), EffortLevel::kUnknown);
  auto bad = parse_effort_level("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown effort level 'fast'"), std::string::npos);
  EXPECT_EQ(resolve_effort_level(EffortLevel::kUnknown), EffortLevel::kO2);
}

TEST(NpyTest, RoundTripsEveryDtype) {
  TempDir dir;
  for (DType d :
       {DType::kF32, DType::kF64, DType::kI1, DType::kI8, DType::kI16, DType::kI32, DType::kI64}) {
    Buffer b(d, {3, 5});
    for (size_t i = 0; i < b.byte_size(); ++i) static_cast<uint8_t*>(b.data())[i] = uint8_t(i * 7);
    if (d == DType::kI1)
      for (int i = 0; i < 15; ++i) b.as<uint8_t>()[i] = i % 2;
    std::string path = dir.file(std::string(dtype_name(d)) + ".npy");
    ASSERT_TRUE(write_npy(path, b).ok());
    auto back = read_npy(path);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->type(), b.type());
    EXPECT_EQ(std::memcmp(back->data(), b.data(), b.byte_size()), 0) << dtype_name(d);
  }
}

TEST(NpyTest, RejectsUnsupportedAndDamagedFiles) {
  Buffer b(DType::kF32, {4});
  std::string bytes = encode_npy(b);
  auto truncated = parse_npy(bytes.substr(0, bytes.size() - 3), "x.npy");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("x.npy: .npy data holds 13 bytes"),
            std::string::npos);
  std::string big_endian = bytes;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  auto be = parse_npy(big_endian, "y.npy");
  ASSERT_FALSE(be.ok());
  EXPECT_NE(be.status().message().find("NumPy dtype '>f4' is not supported"), std::string::npos);
}

TEST(PipelineTest, DisabledPassesAreLeftOut) {
  cpu::Pipeline full = cpu::build_pipeline(EffortLevel::kO2, {});
  std::string text = cpu::pipeline_text(full.tensor_passes);
  EXPECT_NE(text.find("linalg-fuse-elementwise-ops"), std::string::npos);
  EXPECT_TRUE(full.tile_and_vectorize);
  cpu::Pipeline cut = cpu::build_pipeline(
      EffortLevel::kO2, {"linalg-fuse-elementwise-ops", cpu::kTileAndVectorizeStep});
  EXPECT_EQ(cpu::pipeline_text(cut.tensor_passes).find("linalg-fuse-elementwise-ops"),
            std::string::npos);
  EXPECT_FALSE(cut.tile_and_vectorize);
}

TEST(PipelineTest, EffortLevelsPickVectorisationAndLlvmLevel) {
  EXPECT_FALSE(cpu::build_pipeline(EffortLevel::kO0, {}).tile_and_vectorize);
  EXPECT_FALSE(cpu::build_pipeline(EffortLevel::kO1, {}).tile_and_vectorize);
  EXPECT_EQ(cpu::build_pipeline(EffortLevel::kO0, {}).llvm_opt_level, 0);
  EXPECT_EQ(cpu::build_pipeline(EffortLevel::kO1, {}).llvm_opt_level, 1);
  EXPECT_EQ(cpu::build_pipeline(EffortLevel::kO2, {}).llvm_opt_level, 2);
  EXPECT_EQ(cpu::build_pipeline(EffortLevel::kO3, {}).llvm_opt_level, 3);
}

TEST(ClientTest, DevicesAndPlatformVersion) {
  auto client = Client::create_cpu(4);
  ASSERT_TRUE(client.ok());
  ASSERT_EQ((*client)->devices().size(), 4u);
  EXPECT_EQ((*client)->devices()[3].id, 3);
  EXPECT_EQ((*client)->devices()[3].kind, "cpu");
  const std::string& pv = (*client)->platform_version();
  EXPECT_NE(pv.find(std::string("llvm ") + llvm_version()), std::string::npos);
  EXPECT_NE(pv.find(std::string("kiln ") + kiln_version()), std::string::npos);
  EXPECT_NE(pv.find("x86_64"), std::string::npos);
}

TEST(ClientTest, DeviceCountFromEnvironment) {
  ProcessResult r = run_process({kiln_binary(), "devices"}, {"KILN_CPU_DEVICE_COUNT=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("device 2: kind cpu, process 0"), std::string::npos) << r.out;
  ProcessResult bad = run_process({kiln_binary(), "devices"}, {"KILN_CPU_DEVICE_COUNT=lots"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("KILN_CPU_DEVICE_COUNT='lots'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
