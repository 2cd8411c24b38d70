// The cache through the real `kiln` binary in real processes: hits across runs, what changes the
// key, and the `kiln cache` maintenance commands.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/digest.h"
#include "kiln/cache.h"
#include "kiln/env.h"
#include "kiln/executable.h"
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
  // The files under entries/ whose names start with `prefix`.
  std::vector<std::string> entry_files(const std::string& prefix) {
    std::vector<std::string> paths;
    Result<std::vector<std::string>> names = Env::posix()->list_dir(dir_.path() + "/entries");
    if (!names.ok()) return paths;
    for (const std::string& name : *names)
      if (name.rfind(prefix, 0) == 0) paths.push_back(dir_.path() + "/entries/" + name);
    std::sort(paths.begin(), paths.end());
    return paths;
  }
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

// Durability, observed with strace on the real binary: every file published into the cache
// (entries, alias records, the ledger, the host description) was fsynced before its link or
// rename, and the directory it landed in was fsynced afterwards.
TEST_F(CliCacheTest, EveryPublishedFileAndItsDirectoryAreSynced) {
  TempDir trace_dir;
  std::string trace = trace_dir.file("strace.txt");
  // The calling thread does every cache write; without -f, strace never splits its calls into
  // "<unfinished ...>" pieces.
  ProcessResult r =
      run_process({"strace", "-o", trace, "-e",
                   "trace=openat,fsync,fdatasync,rename,renameat,renameat2,link,linkat",
                   kiln_binary(), "--cache-dir", dir_.path(), "run", mlp()});
  if (r.exit_code != 0 && r.err.find("ptrace") != std::string::npos)
    GTEST_SKIP() << "this machine does not allow ptrace: " << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Result<std::string> text = read_file(trace);
  ASSERT_TRUE(text.ok());
  std::map<std::string, std::string> fd_path;             // "pid:fd" -> path
  std::set<std::string> synced;                           // files and directories fsynced so far
  std::vector<std::pair<std::string, size_t>> published;  // destination, line index
  std::vector<std::pair<std::string, size_t>> dir_syncs;  // directory, line index
  std::regex open_re(R"re(^(\d*)\s*openat\(AT_FDCWD, "([^"]+)", [^)]*\) = (\d+))re");
  std::regex sync_re(R"re(^(\d*)\s*f(?:data)?sync\((\d+)\)\s+= 0)re");
  std::regex move_re(R"re(^(\d*)\s*(?:rename|link)\("([^"]+)", "([^"]+)"\) = 0)re");
  std::stringstream lines(*text);
  size_t index = 0;
  for (std::string line; std::getline(lines, line); ++index) {
    std::smatch m;
    if (std::regex_search(line, m, open_re)) {
      fd_path[m[1].str() + ":" + m[3].str()] = m[2];
    } else if (std::regex_search(line, m, sync_re)) {
      std::string path = fd_path[m[1].str() + ":" + m[2].str()];
      synced.insert(path);
      dir_syncs.push_back({path, index});
    } else if (std::regex_search(line, m, move_re)) {
      EXPECT_TRUE(synced.count(m[2])) << "published without fsync: " << m[2];
      published.push_back({m[3], index});
    }
  }
  ASSERT_GE(published.size(), 3u) << *text;  // at least an entry, its alias and the ledger
  bool entry_published = false;
  for (const auto& [destination, at] : published) {
    if (destination.find("/entries/mlp-") != std::string::npos) entry_published = true;
    std::string parent = destination.substr(0, destination.rfind('/'));
    bool parent_synced = std::any_of(dir_syncs.begin(), dir_syncs.end(), [&](const auto& sync) {
      return sync.first == parent && sync.second > at;
    });
    EXPECT_TRUE(parent_synced) << "directory not fsynced after publishing " << destination;
  }
  EXPECT_TRUE(entry_published) << *text;
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

// The host's description in LLVM's terms is kept next to the entries (so a warm process never
// asks LLVM), written only by the cache's writer, and believed only where nobody else can write.
TEST_F(CliCacheTest, TheHostDescriptionIsKeptByTheWriterAndBelievedOnlyWhenPrivate) {
  nlohmann::json first = run_json(mlp());
  Result<std::vector<std::string>> hosts = Env::posix()->list_dir(dir_.path() + "/hosts");
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 1u);
  std::string path = dir_.path() + "/hosts/" + hosts->front();
  std::string text = *read_file(path);
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(text.substr(at, end - at));
  ASSERT_EQ(lines.size(), 4u) << text;  // identity, triple, cpu, features
  EXPECT_THAT(lines[0], HasSubstr("kiln "));

  // What the file says is what the key is built from...
  lines[2] = "x86-64";
  std::string edited = lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n" + lines[3] + "\n";
  ASSERT_TRUE(write_file(path, edited).ok());
  EXPECT_NE(run_json(mlp())["key"], first["key"]);
  // ... unless another user could have written it: then LLVM is asked again, and the writer puts
  // the true description back.
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  nlohmann::json distrusted = run_json(mlp());
  EXPECT_EQ(distrusted["key"], first["key"]);
  EXPECT_EQ(distrusted["cache"], "hit");
  EXPECT_EQ(*read_file(path), text);

  // A process that is not the cache's writer writes nothing.
  TempDir other;
  ProcessResult reader = run_process({kiln_binary(), "--cache-dir", other.path(), "run", mlp()},
                                     {"KILN_CACHE_WRITER=1"});
  ASSERT_EQ(reader.exit_code, 0) << reader.err;
  EXPECT_FALSE(Env::posix()->file_exists(other.path() + "/hosts"));
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
  // Reads write nothing: the ledger counts what was written, not hits and misses.
  EXPECT_FALSE(s["counters"].contains("hits"));
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

TEST_F(CliCacheTest, AnEntryFiledUnderAnotherKeyIsACorruptMissThatHeals) {
  TempDir work;
  std::string softmax = program_path("softmax.mlir");
  ASSERT_EQ(kiln({"run", softmax, "--fill", "ones", "--output", work.file("want.npy")}).exit_code,
            0);
  ASSERT_EQ(kiln({"run", mlp()}).exit_code, 0);
  // Put mlp's code where softmax's entry lives (softmax.mlir's module is unnamed: "module-").
  std::vector<std::string> softmax_entries = entry_files("module-");
  std::vector<std::string> mlp_entries = entry_files("mlp-");
  ASSERT_EQ(softmax_entries.size(), 1u);
  ASSERT_EQ(mlp_entries.size(), 1u);
  ASSERT_TRUE(write_file(softmax_entries[0], *read_file(mlp_entries[0])).ok());

  ProcessResult run = kiln({"run", softmax, "--fill", "ones", "--output", work.file("got.npy")},
                           {"KILN_LOG_LEVEL=warning"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("cache: miss"));
  EXPECT_THAT(run.err, HasSubstr("was written for key 'mlp-"));
  EXPECT_EQ(*read_file(work.file("got.npy")), *read_file(work.file("want.npy")));
  EXPECT_EQ(run_json(softmax)["cache"], "hit");  // healed
  nlohmann::json stats = nlohmann::json::parse(kiln({"cache", "stats", "--json"}).out);
  EXPECT_EQ(stats["counters"]["corrupt"], 1);
}

// Another user (nobody, through setpriv) plants code, re-keyed so that only ownership gives it
// away, in a cache directory that was left writable by others.
TEST_F(CliCacheTest, CodePlantedByAnotherUserIsNeverLoaded) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to act as another user (DirectoryStoreTest covers the checks)";
  TempDir work;
  std::string softmax = program_path("softmax.mlir");
  ASSERT_EQ(kiln({"run", softmax, "--fill", "ones", "--output", work.file("want.npy")}).exit_code,
            0);
  ASSERT_EQ(kiln({"run", mlp()}).exit_code, 0);
  std::string victim = entry_files("module-")[0];
  std::string victim_key = victim.substr(victim.rfind('/') + 1);
  victim_key = victim_key.substr(0, victim_key.size() - 4);  // ".kce"
  std::string mlp_key = entry_files("mlp-")[0];
  mlp_key = mlp_key.substr(mlp_key.rfind('/') + 1);
  mlp_key = mlp_key.substr(0, mlp_key.size() - 4);
  auto mlp_entry = decode_cache_entry(*read_file(entry_files("mlp-")[0]), mlp_key);
  ASSERT_TRUE(mlp_entry.ok());
  CacheEntryMetadata forged = mlp_entry->metadata;
  forged.key = victim_key;
  std::string planted = work.file("planted.kce");
  ASSERT_TRUE(write_file(planted, encode_cache_entry(forged, mlp_entry->payload)).ok());
  ASSERT_EQ(chmod(work.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(planted.c_str(), 0644), 0);
  // The careless part: the cache directory is left open to everyone.
  ASSERT_EQ(chmod(dir_.path().c_str(), 0777), 0);
  ASSERT_EQ(chmod((dir_.path() + "/entries").c_str(), 0777), 0);
  ProcessResult plant =
      run_process({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
                   "cp \"$0\" \"$1.new\" && mv -f \"$1.new\" \"$1\"", planted, victim});
  ASSERT_EQ(plant.exit_code, 0) << plant.err;

  // While the directory is writable by others, kiln uses no cache at all.
  ProcessResult open_dir = kiln({"run", softmax, "--fill", "ones", "--output", work.file("a.npy")});
  ASSERT_EQ(open_dir.exit_code, 0) << open_dir.err;
  EXPECT_THAT(open_dir.err, HasSubstr(dir_.path() + " is writable by other users (mode 0777)"));
  EXPECT_THAT(open_dir.err, HasSubstr("KILN_CACHE_TRUST_SHARED_DIR"));
  EXPECT_EQ(*read_file(work.file("a.npy")), *read_file(work.file("want.npy")));

  // Closed again, the directory is used, but the planted entry is not: removed and rebuilt.
  ASSERT_EQ(chmod(dir_.path().c_str(), 0700), 0);
  ASSERT_EQ(chmod((dir_.path() + "/entries").c_str(), 0700), 0);
  ProcessResult closed = kiln({"run", softmax, "--fill", "ones", "--output", work.file("b.npy")});
  ASSERT_EQ(closed.exit_code, 0) << closed.err;
  EXPECT_THAT(closed.out, HasSubstr("cache: miss"));
  EXPECT_THAT(closed.err, HasSubstr(victim + " is owned by uid 65534"));
  EXPECT_EQ(*read_file(work.file("b.npy")), *read_file(work.file("want.npy")));
  EXPECT_EQ(run_json(softmax)["cache"], "hit");
  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);  // this user's own build now
}

// The bundle format, written by hand the way an attacker would.
std::string craft_bundle(const std::vector<std::pair<std::string, std::string>>& records) {
  auto u64 = [](uint64_t v) {
    std::string out;
    for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i));
    return out;
  };
  std::string out = "KILNBND1";
  for (const auto& [key, value] : records) out += u64(key.size()) + key + u64(value.size()) + value;
  return out + u64(xxh3_64(out));
}

TEST_F(CliCacheTest, ACraftedBundleCannotRedirectAProgram) {
  TempDir work, victim;
  std::string softmax = program_path("softmax.mlir");
  ASSERT_EQ(kiln({"run", softmax, "--fill", "ones", "--output", work.file("want.npy")}).exit_code,
            0);
  ASSERT_EQ(kiln({"run", mlp()}).exit_code, 0);
  std::string softmax_entry = entry_files("module-")[0];
  std::string mlp_entry = entry_files("mlp-")[0];
  auto key_of = [](const std::string& path) {
    std::string name = path.substr(path.rfind('/') + 1);
    return name.substr(0, name.size() - 4);  // ".kce"
  };
  // softmax's raw-bytes alias, redirected to mlp's module; and mlp's code filed under softmax's
  // key.
  std::vector<std::string> aliases = entry_files("alias-");
  ASSERT_EQ(aliases.size(), 2u);
  std::string softmax_alias, mlp_alias_value;
  for (const std::string& a : aliases) {
    std::string value = *read_file(a);
    if (value.rfind("mlp\n", 0) == 0)
      mlp_alias_value = value;
    else
      softmax_alias = key_of(a);
  }
  ASSERT_FALSE(softmax_alias.empty());
  ASSERT_FALSE(mlp_alias_value.empty());
  std::string bundle = craft_bundle(
      {{softmax_alias, mlp_alias_value}, {key_of(softmax_entry), *read_file(mlp_entry)}});
  ASSERT_TRUE(write_file(work.file("crafted"), bundle).ok());
  ProcessResult imported = run_process(
      {kiln_binary(), "--cache-dir", victim.path(), "cache", "import", work.file("crafted")});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_THAT(imported.out, HasSubstr("imported 0 entries"));
  EXPECT_THAT(imported.out, HasSubstr("skipped 2"));
  ProcessResult run = run_process({kiln_binary(), "--cache-dir", victim.path(), "run", softmax,
                                   "--fill", "ones", "--output", work.file("got.npy")});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("cache: miss"));
  EXPECT_EQ(*read_file(work.file("got.npy")), *read_file(work.file("want.npy")));
}

TEST_F(CliCacheTest, WithASecretOnlyBundlesSignedWithItImport) {
  TempDir work, other;
  ASSERT_EQ(kiln({"run", mlp()}).exit_code, 0);
  ASSERT_EQ(
      kiln({"cache", "export", work.file("signed")}, {"KILN_REMOTE_CACHE_SECRET=team"}).exit_code,
      0);
  ASSERT_EQ(kiln({"cache", "export", work.file("plain")}).exit_code, 0);
  auto import = [&](const std::string& file, const std::string& secret) {
    std::vector<std::string> env;
    if (!secret.empty()) env.push_back("KILN_REMOTE_CACHE_SECRET=" + secret);
    return run_process({kiln_binary(), "--cache-dir", other.path(), "cache", "import", file}, env);
  };
  ProcessResult unsigned_with_secret = import(work.file("plain"), "team");
  EXPECT_EQ(unsigned_with_secret.exit_code, 1);
  EXPECT_THAT(unsigned_with_secret.err, HasSubstr("not signed"));
  ProcessResult wrong_secret = import(work.file("signed"), "other");
  EXPECT_EQ(wrong_secret.exit_code, 1);
  EXPECT_THAT(wrong_secret.err, HasSubstr("does not verify"));
  ProcessResult no_secret = import(work.file("signed"), "");
  EXPECT_EQ(no_secret.exit_code, 1);
  EXPECT_THAT(no_secret.err, HasSubstr("no secret is set"));
  std::string tampered = *read_file(work.file("signed"));
  tampered[tampered.size() - 40] ^= 1;  // the checksum, recomputed by nobody
  ASSERT_TRUE(write_file(work.file("tampered"), tampered).ok());
  EXPECT_EQ(import(work.file("tampered"), "team").exit_code, 1);
  EXPECT_EQ(entry_files("mlp-").size(), 1u);
  ProcessResult good = import(work.file("signed"), "team");
  ASSERT_EQ(good.exit_code, 0) << good.err;
  EXPECT_THAT(good.out, HasSubstr("imported 1 entries"));
  EXPECT_THAT(good.out, HasSubstr("signed bundle"));
}

// An entry whose code has a constructor that leaves a mark: verify must not run it.
TEST_F(CliCacheTest, VerifyChecksEntriesWithoutRunningTheirCode) {
  TempDir work;
  std::string marker = work.file("constructor-ran");
  ASSERT_TRUE(write_file(work.file("planted.c"),
                         "#include <stdio.h>\n"
                         "__attribute__((constructor)) static void mark(void) {\n"
                         "  FILE* f = fopen(\"" +
                             marker +
                             "\", \"w\"); if (f) fclose(f);\n}\n"
                             "void _kiln_entry_main(void** args) { (void)args; }\n"
                             "const unsigned int _kiln_contract_version = 1;\n")
                  .ok());
  ProcessResult cc = run_process(
      {"cc", "-shared", "-fPIC", "-o", work.file("planted.so"), work.file("planted.c")});
  ASSERT_EQ(cc.exit_code, 0) << cc.err;
  ExecutableInfo info;
  info.module_name = "planted";
  info.platform_version = "test";
  info.effort_level = "O1";
  EntryPoint entry;
  entry.name = "main";
  std::string exe =
      Executable::serialize_parts(info, {entry}, *read_file(work.file("planted.so")), {});
  CacheEntryMetadata meta;
  meta.key = "planted-" + std::string(64, '0');
  meta.module_name = "planted";
  meta.producer_version = "test";
  {
    auto store = DirectoryStore::open({dir_.path(), -1, -1, nullptr});
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->put(meta.key, encode_cache_entry(meta, exe)).ok());
  }
  ProcessResult verify = kiln({"cache", "verify"});
  ASSERT_EQ(verify.exit_code, 0) << verify.err;
  EXPECT_THAT(verify.out, HasSubstr("verified 1 entries, removed 0 bad ones"));
  EXPECT_FALSE(Env::posix()->file_exists(marker));
  // The opt-in loads the code, and so shows that the planted constructor is real.
  ProcessResult load = kiln({"cache", "verify", "--load"});
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_TRUE(Env::posix()->file_exists(marker));
}

}  // namespace
}  // namespace kiln::testing
