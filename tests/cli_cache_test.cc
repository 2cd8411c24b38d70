// The cache through the real `kiln` binary in real processes: hits across runs, what changes the
// key, and the `kiln cache` maintenance commands.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/env.h"
#include "kiln/file.h"
#include "kiln/npy.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

class CliCacheTest : public ::testing::Test {
 protected:
  ProcessResult kiln(std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), {kiln_binary(), "--cache-dir", dir_.path()});
    return run_process(args, env);
  }
  nlohmann::json run_json(const std::string& file, std::vector<std::string> extra = {},
                          std::vector<std::string> env = {}) {
    std::vector<std::string> args = {"run", file, "--json", "--fill", "ones"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessResult r = kiln(args, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  std::string mlp() { return program_path("../../examples/mlp.mlir"); }
  TempDir dir_;
};

TEST_F(CliCacheTest, SecondRunIsAHitThatCompilesNothing) {
  ProcessResult first = kiln({"run", mlp()});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("cache: miss, key mlp-"));
  ProcessResult second = kiln({"run", mlp()});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("cache: hit, key mlp-"));
  EXPECT_THAT(second.out, HasSubstr("time: no compile"));
  nlohmann::json j = run_json(mlp());
  EXPECT_EQ(j["cache"], "hit");
  EXPECT_EQ(j["module"], "mlp");
  EXPECT_EQ(j["timings_ms"]["compile"], 0.0);
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::array({1, 8, 10}));
}

TEST_F(CliCacheTest, AWarmRunNeverLoadsTheCompilerLibMlirOrLibLlvm) {
  // The dynamic loader lists every library it opens when LD_DEBUG=files.
  ProcessResult cold = kiln({"run", mlp()}, {"LD_DEBUG=files"});
  ASSERT_EQ(cold.exit_code, 0);
  EXPECT_THAT(cold.err, HasSubstr("libkiln_compiler.so"));
  EXPECT_THAT(cold.err, HasSubstr("libMLIR"));
  ProcessResult warm = kiln({"run", mlp()}, {"LD_DEBUG=files"});
  ASSERT_EQ(warm.exit_code, 0);
  EXPECT_THAT(warm.out, HasSubstr("cache: hit"));
  EXPECT_THAT(warm.err, ::testing::Not(HasSubstr("libkiln_compiler.so")));
  EXPECT_THAT(warm.err, ::testing::Not(HasSubstr("libMLIR")));
  EXPECT_THAT(warm.err, ::testing::Not(HasSubstr("libLLVM")));
}

TEST_F(CliCacheTest, ReformattingIsAHitAndEveryKeyInputIsAMiss) {
  std::string key = run_json(mlp())["key"];
  TempDir work;
  std::string text = *read_file(mlp());
  std::string reformatted = "// reformatted copy\n\n" + text;
  for (size_t at = reformatted.find("  "); at != std::string::npos;
       at = reformatted.find("  ", at + 3))
    reformatted.replace(at, 2, "   ");
  ASSERT_TRUE(write_file(work.file("copy.mlir"), reformatted).ok());
  nlohmann::json copy = run_json(work.file("copy.mlir"));
  EXPECT_EQ(copy["cache"], "hit");
  EXPECT_EQ(copy["key"], key);

  EXPECT_EQ(run_json(mlp(), {"-O", "O1"})["cache"], "miss");
  EXPECT_EQ(run_json(mlp(), {"--disable-pass", "linalg-fuse-elementwise-ops"})["cache"], "miss");
  EXPECT_EQ(run_json(mlp(), {}, {"KILN_CPU_DEVICE_COUNT=2"})["cache"], "miss");
  EXPECT_EQ(run_json(mlp(), {}, {"KILN_CACHE_KEY_TAG=v2"})["cache"], "miss");
  EXPECT_EQ(run_json(mlp(), {"--set", "KILN_CACHE_KEY_TAG=v3"})["cache"], "miss");
  EXPECT_EQ(run_json(mlp(), {"--no-cache"})["cache"], "off");
  EXPECT_EQ(run_json(mlp())["cache"], "hit");
}

TEST_F(CliCacheTest, StatsLsExplainVerifyGcClear) {
  ASSERT_EQ(kiln({"run", mlp()}).exit_code, 0);
  ASSERT_EQ(kiln({"run", mlp()}).exit_code, 0);
  ASSERT_EQ(kiln({"run", program_path("softmax.mlir")}).exit_code, 0);

  ProcessResult stats = kiln({"cache", "stats", "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  nlohmann::json s = nlohmann::json::parse(stats.out);
  EXPECT_EQ(s["counters"]["hits"], 1);
  EXPECT_EQ(s["counters"]["misses"], 2);
  EXPECT_EQ(s["counters"]["writes"], 2);
  EXPECT_EQ(s["entries"], 2);  // executables only; the raw-bytes aliases are counted apart
  EXPECT_EQ(s["alias_records"], 2);

  ProcessResult ls = kiln({"cache", "ls"});
  EXPECT_THAT(ls.out, HasSubstr("module mlp"));
  EXPECT_THAT(ls.out, HasSubstr("module module"));  // softmax.mlir has no sym_name

  ProcessResult explain = kiln({"cache", "explain", mlp(), "-O", "O3"});
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  EXPECT_THAT(explain.out, HasSubstr("differing in: options"));
  EXPECT_THAT(kiln({"cache", "explain", mlp()}).out, HasSubstr("stored: yes"));

  // Damage the mlp entry: verify reports and removes it; the next run recompiles.
  auto names = Env::posix()->list_dir(dir_.path() + "/entries");
  for (const auto& name : *names) {
    if (name.rfind("mlp-", 0) != 0) continue;
    std::string path = dir_.path() + "/entries/" + name;
    std::string bytes = *read_file(path);
    bytes[60] ^= 1;
    ASSERT_TRUE(write_file(path, bytes).ok());
  }
  ProcessResult verify = kiln({"cache", "verify"});
  EXPECT_THAT(verify.out, HasSubstr("verified 2 entries, removed 1 bad ones"));
  EXPECT_EQ(run_json(mlp())["cache"], "miss");

  ProcessResult gc = kiln({"cache", "gc", "--max-entries", "1"});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_THAT(gc.out, HasSubstr("entries          1"));
  ASSERT_EQ(kiln({"cache", "clear"}).exit_code, 0);
  EXPECT_THAT(kiln({"cache", "ls"}).out, ::testing::Not(HasSubstr("module")));
}

TEST_F(CliCacheTest, ExportImportWarmsAnotherCacheWithIdenticalResults) {
  TempDir work, other;
  ASSERT_EQ(kiln({"run", mlp(), "--fill", "ones", "--output", work.file("a.npy")}).exit_code, 0);
  ASSERT_EQ(kiln({"cache", "export", work.file("bundle")}).exit_code, 0);
  ProcessResult imported = run_process(
      {kiln_binary(), "--cache-dir", other.path(), "cache", "import", work.file("bundle")});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_THAT(imported.out, HasSubstr("imported 1 entries"));
  ProcessResult run = run_process({kiln_binary(), "--cache-dir", other.path(), "run", mlp(),
                                   "--fill", "ones", "--output", work.file("b.npy")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("cache: hit"));
  EXPECT_EQ(*read_file(work.file("a.npy")), *read_file(work.file("b.npy")));
  ProcessResult junk =
      run_process({kiln_binary(), "--cache-dir", other.path(), "cache", "import", mlp()});
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_THAT(junk.err, HasSubstr("not a kiln cache bundle"));
}

}  // namespace
}  // namespace kiln::testing
