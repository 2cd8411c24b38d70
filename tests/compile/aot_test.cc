// Ahead-of-time builds for other machines: a baseline x86-64 CPU (loads and runs here) and aarch64
// (a valid object for that architecture, refused here with a clear error).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "kiln/compile.h"
#include "kiln/config.h"
#include "kiln/file.h"
#include "kiln/logging.h"
#include "kiln/monitoring.h"
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

// ---- compile-only clients: a build box fills the cache of another machine ----------------------

class CompileOnlyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::reset();
    reset_compilation_cache_state();
    ASSERT_TRUE(config::set("KILN_CACHE_DIR", dir_.file("cache")).ok());
    auto s = ModuleSource::from_file(program_path("../../examples/mlp.mlir"));
    ASSERT_TRUE(s.ok());
    source_ = *s;
  }
  void TearDown() override {
    config::reset();
    reset_compilation_cache_state();
  }
  std::unique_ptr<Client> compile_only(CompileTarget target, int devices = 1) {
    auto c = Client::create_compile_only(target, devices);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::string key(const Client& client) {
    auto k = compute_cache_key(client, source_, CompileOptions());
    EXPECT_TRUE(k.ok()) << k.status().to_string();
    return k.ok() ? k->key : "";
  }
  TempDir dir_;
  ModuleSource source_;
};

TEST_F(CompileOnlyTest, ForThisHostItKeysLikeTheRealClientAndTheRealClientHitsItsEntry) {
  auto host = shared_client().target();
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  auto co = compile_only(*host);
  ASSERT_NE(co, nullptr);
  EXPECT_EQ(co->platform_version(), shared_client().platform_version());
  EXPECT_EQ(key(*co), key(shared_client()));

  std::vector<std::string> lines;
  int sink = log::add_sink([&](log::Level, const std::string& m) { lines.push_back(m); });
  CompileReport filled;
  auto bytes = compile_or_get_cached_serialized(*co, source_, CompileOptions(), &filled);
  log::remove_sink(sink);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ(filled.cache, kiln::CacheOutcome::kMiss);
  bool routed = false;
  for (const std::string& l : lines)
    routed = routed || l.find("compiling through this machine's client") != std::string::npos;
  EXPECT_TRUE(routed) << "same platform version and device count: the real client compiles";

  reset_compilation_cache_state();
  ASSERT_TRUE(config::set("KILN_CACHE_DIR", dir_.file("cache")).ok());
  CompileReport run;
  auto exe = compile_or_get_cached(shared_client(), source_, CompileOptions(), &run);
  ASSERT_TRUE(exe.ok());
  EXPECT_EQ(run.cache, kiln::CacheOutcome::kHit);
  EXPECT_EQ(run.key, filled.key);
  EXPECT_FALSE(run.compiled);
}

// The compile-only path follows the loading path's rules (JAX's AOT tests): hit and miss lines
// with the key, the same monitoring events, and check-contents comparing native code.
TEST_F(CompileOnlyTest, FollowsTheLoadingPathsLogsEventsAndCheckContents) {
  auto arm = compile_only({"aarch64-unknown-linux-gnu", "neoverse-v1", ""});
  ASSERT_NE(arm, nullptr);
  ASSERT_TRUE(config::set("KILN_EXPLAIN_CACHE_MISSES", "true").ok());
  ASSERT_TRUE(config::set("KILN_LOG_COMPILES", "true").ok());
  std::map<std::string, int> events;
  int listener = monitoring::add_event_listener([&](const std::string& e) { ++events[e]; });
  std::vector<std::string> lines;
  int sink = log::add_sink([&](log::Level, const std::string& m) { lines.push_back(m); });
  CompileReport miss, hit;
  auto first = compile_or_get_cached_serialized(*arm, source_, CompileOptions(), &miss);
  auto second = compile_or_get_cached_serialized(*arm, source_, CompileOptions(), &hit);
  ASSERT_TRUE(config::set("KILN_COMPILATION_CACHE_CHECK_CONTENTS", "true").ok());
  CompileReport checked;
  auto third = compile_or_get_cached_serialized(*arm, source_, CompileOptions(), &checked);
  log::remove_sink(sink);
  monitoring::remove_listener(listener);
  ASSERT_TRUE(first.ok() && second.ok()) << first.status().to_string();
  ASSERT_TRUE(third.ok()) << third.status().to_string();
  EXPECT_EQ(miss.cache, kiln::CacheOutcome::kMiss);
  EXPECT_EQ(hit.cache, kiln::CacheOutcome::kHit);
  EXPECT_TRUE(checked.compiled) << "check-contents recompiles the first lookup of a key";
  EXPECT_EQ(*first, *second);
  auto has_line = [&](const std::string& a, const std::string& b) {
    for (const std::string& l : lines)
      if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has_line("PERSISTENT COMPILATION CACHE MISS", miss.key));
  EXPECT_TRUE(has_line("Persistent compilation cache hit", hit.key));
  EXPECT_TRUE(has_line("to persistent compilation cache with key", miss.key));
  EXPECT_EQ(events["compile_requests_use_cache"], 3);
  EXPECT_EQ(events["cache_misses"], 2);
  EXPECT_EQ(events["cache_hits"], 1);
  EXPECT_EQ(events["cache_writes"], 1);
}

TEST_F(CompileOnlyTest, OtherTargetsAndDeviceCountsHaveTheirOwnPlatformVersionsAndKeys) {
  auto host = shared_client().target();
  ASSERT_TRUE(host.ok());
  auto v2 = compile_only({host->triple, "x86-64-v2", ""});
  auto arm = compile_only({"aarch64-unknown-linux-gnu", "neoverse-v1", ""});
  auto four = compile_only(*host, 4);
  ASSERT_TRUE(v2 && arm && four);
  std::set<std::string> keys = {key(shared_client()), key(*v2), key(*arm), key(*four)};
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_NE(v2->platform_version(), shared_client().platform_version());
  // The platform version alone changes the key: it is the only component that differs.
  auto host_key = compute_cache_key(shared_client(), source_, CompileOptions());
  auto v2_key = compute_cache_key(*v2, source_, CompileOptions());
  ASSERT_TRUE(host_key.ok() && v2_key.ok());
  std::set<std::string> differing;
  for (size_t i = 0; i < host_key->components.size(); ++i)
    if (host_key->components[i].digest != v2_key->components[i].digest)
      differing.insert(host_key->components[i].name);
  EXPECT_EQ(differing, std::set<std::string>{"platform"});

  // x86-64-v2 code is built without this machine's client and loads here; aarch64 does not.
  std::vector<std::string> lines;
  int sink = log::add_sink([&](log::Level, const std::string& m) { lines.push_back(m); });
  auto baseline = compile_or_get_cached_serialized(*v2, source_, CompileOptions());
  log::remove_sink(sink);
  ASSERT_TRUE(baseline.ok()) << baseline.status().to_string();
  for (const std::string& l : lines)
    EXPECT_EQ(l.find("compiling through this machine's client"), std::string::npos) << l;
  auto loaded = Executable::deserialize(*baseline);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->info().target_cpu, "x86-64-v2");
  EXPECT_EQ((*loaded)->info().platform_version, v2->platform_version());
  auto arm_bytes = compile_or_get_cached_serialized(*arm, source_, CompileOptions());
  ASSERT_TRUE(arm_bytes.ok()) << arm_bytes.status().to_string();
  EXPECT_FALSE(Executable::deserialize(*arm_bytes).ok());

  // A compile-only client loads nothing, and refuses a second target in the options.
  auto refused = arm->compile(source_, CompileOptions());
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("loads nothing"));
  EXPECT_FALSE(Client::create_compile_only({"", "x86-64-v2", ""}).ok());
}

TEST(CompileOnlyCliTest, FillExportImportOnAnEmptyCacheThenRunIsAHitWithIdenticalResults) {
  TempDir dir;
  ProcessResult version = run_process({kiln_binary(), "version"});
  ASSERT_EQ(version.exit_code, 0);
  auto field = [&](const std::string& name) {
    size_t at = version.out.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << version.out;
    size_t begin = at + name.size() + 2;
    return version.out.substr(begin, version.out.find('\n', begin) - begin);
  };
  std::string mlp = program_path("../../examples/mlp.mlir");
  ProcessResult fill = run_process({kiln_binary(), "--cache-dir", dir.file("build-box"), "compile",
                                    mlp, "--target-triple", field("target triple"), "--target-cpu",
                                    field("target cpu"), "--target-features",
                                    field("target features"), "--devices", "1", "--fill-cache"});
  ASSERT_EQ(fill.exit_code, 0) << fill.err;
  EXPECT_THAT(fill.out, HasSubstr("cache: miss, key mlp-"));
  ProcessResult exported = run_process(
      {kiln_binary(), "--cache-dir", dir.file("build-box"), "cache", "export", dir.file("bundle")});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  ProcessResult imported = run_process(
      {kiln_binary(), "--cache-dir", dir.file("target"), "cache", "import", dir.file("bundle")});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;

  ProcessResult run = run_process({kiln_binary(), "--cache-dir", dir.file("target"), "run", mlp,
                                   "--json", "--fill", "ones", "--output", dir.file("hit.npy")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("\"cache\":\"hit\""));
  EXPECT_THAT(run.out, HasSubstr("\"compiled\":false"));
  ProcessResult fresh = run_process({kiln_binary(), "run", mlp, "--no-cache", "--fill", "ones",
                                     "--output", dir.file("fresh.npy")});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_EQ(*read_file(dir.file("hit.npy")), *read_file(dir.file("fresh.npy")));

  ProcessResult nowhere = run_process({kiln_binary(), "compile", mlp});
  EXPECT_NE(nowhere.exit_code, 0);
  EXPECT_THAT(nowhere.err, HasSubstr("-o FILE.kx, --fill-cache, or both"));
}

}  // namespace
}  // namespace kiln::testing
