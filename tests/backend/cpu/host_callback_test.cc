// Host callbacks: bound by name at load, looked up at every call, cached like any executable.
#include "kiln/host_callback.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/compile.h"
#include "kiln/config.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

std::string program(int size) {
  std::string t = "tensor<" + std::to_string(size) + "xf32>";
  return "module @cb {\n  func.func private @observe(" + t +
         ") attributes {kiln.host_callback}\n  func.func @main(%x: " + t + ") -> " + t +
         " {\n    %y = arith.mulf %x, %x : " + t + "\n    call @observe(%y) : (" + t +
         ") -> ()\n    return %y : " + t + "\n  }\n}\n";
}

class HostCallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::reset();
    reset_compilation_cache_state();
    ASSERT_TRUE(config::set("KILN_CACHE_DIR", dir_.path()).ok());
  }
  void TearDown() override {
    unregister_host_callback("observe");
    config::reset();
    reset_compilation_cache_state();
  }
  Result<std::shared_ptr<Executable>> get(int size, CompileReport* report) {
    return compile_or_get_cached(shared_client(), ModuleSource{program(size), "<t>"}, {}, report);
  }
  TempDir dir_;
};

TEST_F(HostCallbackTest, TheRegisteredCallableSeesTheProgramsValues) {
  std::vector<float> seen;
  register_host_callback("observe", [&](const std::vector<Buffer>& args) {
    EXPECT_EQ(args.size(), 1u);
    EXPECT_EQ(args[0].type().to_string(), "tensor<4xf32>");
    seen.assign(args[0].as<float>(), args[0].as<float>() + 4);
    return Status();
  });
  CompileReport r;
  auto exe = get(4, &r);
  ASSERT_TRUE(exe.ok()) << exe.status().to_string();
  ASSERT_EQ((*exe)->host_callbacks().size(), 1u);
  Buffer x(DType::kF32, {4});
  for (int i = 0; i < 4; ++i) x.as<float>()[i] = float(i + 1);
  ASSERT_TRUE((*exe)->execute("main", {x}).ok());
  EXPECT_EQ(seen, (std::vector<float>{1, 4, 9, 16}));
}

TEST_F(HostCallbackTest, ANewCallableUnderTheSameNameIsAHitAndIsTheOneCalled) {
  int first = 0, second = 0;
  register_host_callback("observe", [&](const std::vector<Buffer>&) {
    ++first;
    return Status();
  });
  CompileReport r1, r2, r3;
  auto exe = get(4, &r1);
  ASSERT_TRUE(exe.ok());
  EXPECT_EQ(r1.cache, kiln::CacheOutcome::kMiss);
  register_host_callback("observe", [&](const std::vector<Buffer>&) {
    ++second;
    return Status();
  });
  auto again = get(4, &r2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(r2.cache, kiln::CacheOutcome::kHit);
  ASSERT_TRUE((*again)->execute("main", {Buffer(DType::kF32, {4})}).ok());
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  // From disk, as a fresh process would load it.
  reset_compilation_cache_state();
  ASSERT_TRUE(config::set("KILN_CACHE_DIR", dir_.path()).ok());
  auto loaded = get(4, &r3);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(r3.cache, kiln::CacheOutcome::kHit);
  EXPECT_FALSE(r3.from_memory);
  ASSERT_TRUE((*loaded)->execute("main", {Buffer(DType::kF32, {4})}).ok());
  EXPECT_EQ(second, 2);
}

TEST_F(HostCallbackTest, AChangedSignatureIsAMiss) {
  register_host_callback("observe", [](const std::vector<Buffer>&) { return Status(); });
  CompileReport four, eight;
  ASSERT_TRUE(get(4, &four).ok());
  ASSERT_TRUE(get(8, &eight).ok());
  EXPECT_EQ(eight.cache, kiln::CacheOutcome::kMiss);
  EXPECT_NE(four.key, eight.key);
}

TEST_F(HostCallbackTest, AMissingCallbackAtLoadIsAClearError) {
  register_host_callback("observe", [](const std::vector<Buffer>&) { return Status(); });
  CompileReport r;
  auto exe = get(4, &r);
  ASSERT_TRUE(exe.ok());
  std::string bytes = (*exe)->serialize();
  unregister_host_callback("observe");
  auto loaded = Executable::deserialize(bytes);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(
      loaded.status().message(),
      HasSubstr("calls host callback 'observe(tensor<4xf32>)', but no callable is registered"));
}

TEST_F(HostCallbackTest, ACallbackErrorFailsTheCall) {
  register_host_callback(
      "observe", [](const std::vector<Buffer>&) { return invalid_argument("value out of range"); });
  CompileReport r;
  auto exe = get(4, &r);
  ASSERT_TRUE(exe.ok());
  auto out = (*exe)->execute("main", {Buffer(DType::kF32, {4})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("host callback 'observe': value out of range"));
}

TEST(HostCallbackCliTest, BuiltinCallbacksRunInAFreshProcessLoadingFromTheCache) {
  TempDir dir;
  for (const char* expected_cache : {"cache: miss", "cache: hit"}) {
    ProcessResult r = run_process({kiln_binary(), "--cache-dir", dir.path(), "run",
                                   program_path("callbacks.mlir"), "--fill", "ones"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("kiln_print: tensor<4xf32> [2, 2, 2, 2]"));
    EXPECT_THAT(r.out, HasSubstr("kiln_record_sum: 4"));
    EXPECT_THAT(r.out, HasSubstr(expected_cache));
  }
}

}  // namespace
}  // namespace kiln::testing
