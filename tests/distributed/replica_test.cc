// Replicated execution on virtual CPU devices: R = 1, 2, 4 on 4 devices, device assignments, and
// the errors for shapes and counts that do not fit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/file.h"
#include "kiln/npy.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

const char* kScale = R"(func.func @scale(%x: tensor<16xf32>) -> tensor<16xf32> {
  %two = arith.constant dense<2.0> : tensor<16xf32>
  %y = arith.mulf %x, %two : tensor<16xf32>
  return %y : tensor<16xf32>
})";

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Client::create_cpu(4);
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  Result<std::shared_ptr<Executable>> compile(CompileOptions options) {
    return client_->compile(ModuleSource{kScale, "scale.mlir"}, options);
  }
  std::unique_ptr<Client> client_;
};

TEST_F(ReplicaTest, EachReplicaRunsOnItsOwnInputsAndDevice) {
  for (int replicas : {1, 2, 4}) {
    CompileOptions options;
    options.num_replicas = replicas;
    auto exe = compile(options);
    ASSERT_TRUE(exe.ok()) << exe.status().to_string();
    std::vector<std::vector<Buffer>> inputs;
    for (int r = 0; r < replicas; ++r) inputs.push_back({random_f32({16}, 100 + r)});
    auto results = (*exe)->execute_replicated("scale", inputs);
    ASSERT_TRUE(results.ok()) << results.status().to_string();
    ASSERT_EQ(results->size(), static_cast<size_t>(replicas));
    for (int r = 0; r < replicas; ++r) {
      EXPECT_EQ((*results)[r].device, r);
      for (int i = 0; i < 16; ++i)
        EXPECT_EQ((*results)[r].outputs[0].as<float>()[i], 2 * inputs[r][0].as<float>()[i]);
    }
  }
}

TEST_F(ReplicaTest, DeviceAssignmentPicksTheDevicesAndSurvivesSerialisation) {
  auto options = get_compile_options(2, 1, std::vector<int>{3, 1});
  ASSERT_TRUE(options.ok());
  auto exe = compile(*options);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  auto loaded = Executable::deserialize((*exe)->serialize());
  ASSERT_TRUE(loaded.ok());
  auto results =
      (*loaded)->execute_replicated("scale", {{random_f32({16}, 1)}, {random_f32({16}, 2)}});
  ASSERT_TRUE(results.ok());
  EXPECT_EQ((*results)[0].device, 3);
  EXPECT_EQ((*results)[1].device, 1);
}

TEST_F(ReplicaTest, ShapeAndCountErrorsAreClear) {
  CompileOptions partitioned;
  partitioned.num_partitions = 2;
  EXPECT_THAT(compile(partitioned).status().message(),
              HasSubstr("num_partitions = 2 is not supported by the CPU backend yet"));
  CompileOptions too_many;
  too_many.num_replicas = 5;
  EXPECT_THAT(compile(too_many).status().message(),
              HasSubstr("5 replicas need 5 devices, but this process has 4"));
  CompileOptions missing_device;
  missing_device.num_replicas = 1;
  missing_device.device_assignment = {{9}};
  EXPECT_THAT(compile(missing_device).status().message(),
              HasSubstr("names device 9, which does not exist"));
  CompileOptions rows;
  rows.num_replicas = 2;
  rows.device_assignment = {{0}};
  EXPECT_THAT(compile(rows).status().message(),
              HasSubstr("device_assignment has 1 replica rows, but num_replicas is 2"));

  CompileOptions two;
  two.num_replicas = 2;
  auto exe = compile(two);
  ASSERT_TRUE(exe.ok());
  auto wrong = (*exe)->execute_replicated("scale", {{random_f32({16}, 1)}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("has 2 replica(s), but 1 set(s) of inputs"));
}

TEST(ReplicaCliTest, ReplicasFromTheCommandLineAndWrongInputCounts) {
  TempDir dir;
  ASSERT_TRUE(write_file(dir.file("scale.mlir"), kScale).ok());
  ProcessResult ok =
      run_process({kiln_binary(), "run", dir.file("scale.mlir"), "--replicas", "4", "--no-cache"},
                  {"KILN_CPU_DEVICE_COUNT=4"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("replica 3 (device 3) result 0: tensor<16xf32>"));
  Buffer x = random_f32({16}, 3);
  ASSERT_TRUE(write_npy(dir.file("x.npy"), x).ok());
  ProcessResult wrong = run_process(
      {kiln_binary(), "run", dir.file("scale.mlir"), "--replicas", "2", "--no-cache", "--input",
       dir.file("x.npy"), "--input", dir.file("x.npy"), "--input", dir.file("x.npy")},
      {"KILN_CPU_DEVICE_COUNT=4"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("3 --input file(s) given but 'scale' takes 1 argument(s) (or 2 "
                                   "for 2 replicas"));
}

}  // namespace
}  // namespace kiln::testing
