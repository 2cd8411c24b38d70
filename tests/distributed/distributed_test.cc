// Several real `kiln run` processes of one job, coordinated through a real redis-server.
#include "kiln/distributed.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "kiln/compile.h"
#include "kiln/file.h"
#include "redis_fixture.h"
#include "test_support.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

struct JobProcess {
  pid_t pid = -1;
  std::string out_path, err_path;
};

class DistributedTest : public ::testing::Test {
 protected:
  JobProcess start(int id, int n, const std::string& job, const std::string& program,
                   std::vector<std::string> extra = {}) {
    JobProcess p;
    p.out_path = work_.file(job + "-" + std::to_string(id) + ".out");
    p.err_path = work_.file(job + "-" + std::to_string(id) + ".err");
    std::vector<std::string> argv = {kiln_binary(), "--cache-dir",
                                     work_.file(job + "-cache" + std::to_string(id)), "--set",
                                     "KILN_SHARE_BINARY_BETWEEN_HOSTS=true"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::vector<std::string> run = {"run",
                                    program,
                                    "--json",
                                    "--fill",
                                    "ones",
                                    "--coordinator",
                                    server_.url(),
                                    "--num-processes",
                                    std::to_string(n),
                                    "--process-id",
                                    std::to_string(id),
                                    "--job",
                                    job,
                                    "--output",
                                    work_.file(job + "-" + std::to_string(id) + ".npy")};
    argv.insert(argv.end(), run.begin(), run.end());
    p.pid = spawn_process(argv, {}, p.out_path, p.err_path);
    return p;
  }
  int wait(const JobProcess& p) { return wait_process(p.pid); }
  std::string mlp() { return program_path("../../examples/mlp.mlir"); }

  RedisServer server_;
  TempDir work_;
};

TEST_F(DistributedTest, EightProcessesCompileOnceAndASecondJobIsAllHitsFromTheRemoteCache) {
  std::vector<std::string> remote = {"--set", "KILN_REMOTE_CACHE=" + server_.url()};
  std::vector<JobProcess> procs;
  for (int i = 0; i < 8; ++i) procs.push_back(start(i, 8, "job1", mlp(), remote));
  int compiles = 0;
  std::string first_output;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(wait(procs[i]), 0) << *read_file(procs[i].err_path);
    auto j = nlohmann::json::parse(*read_file(procs[i].out_path));
    compiles += j["compiled"].get<bool>() ? 1 : 0;
    EXPECT_EQ(j["shared"], i == 0 ? "leader" : "follower");
    std::string output = *read_file(work_.file("job1-" + std::to_string(i) + ".npy"));
    if (i == 0) first_output = output;
    EXPECT_EQ(output, first_output) << "process " << i;
  }
  EXPECT_EQ(compiles, 1);

  procs.clear();
  for (int i = 0; i < 8; ++i) procs.push_back(start(i, 8, "job2", mlp(), remote));
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(wait(procs[i]), 0) << *read_file(procs[i].err_path);
    auto j = nlohmann::json::parse(*read_file(procs[i].out_path));
    EXPECT_EQ(j["cache"], "hit") << "process " << i;
    EXPECT_FALSE(j["compiled"].get<bool>());
  }
}

// With a secret set, followers load only what their leader signed: a value planted under the share
// key (here the leader's own executable with its signature stripped) is refused.
TEST_F(DistributedTest, APlantedShareValueIsRefusedWhenASecretIsSet) {
  std::vector<std::string> secret = {"--set", "KILN_REMOTE_CACHE_SECRET=job-secret", "--set",
                                     "KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS=5000"};
  JobProcess leader = start(0, 2, "planted", mlp(), secret);
  JobProcess follower = start(1, 2, "planted", mlp(), secret);
  ASSERT_EQ(wait(leader), 0) << *read_file(leader.err_path);
  ASSERT_EQ(wait(follower), 0) << *read_file(follower.err_path);
  ProcessResult keys =
      run_process({"redis-cli", "-u", server_.url(), "--raw", "KEYS", "kiln:planted:share:*"});
  ASSERT_EQ(keys.exit_code, 0) << keys.err;
  std::string key = keys.out.substr(0, keys.out.find('\n'));
  ASSERT_FALSE(key.empty()) << keys.out;
  auto kv = RedisKeyValueStore::connect(server_.address(), 2000);
  ASSERT_TRUE(kv.ok()) << kv.status().to_string();
  auto signed_value = (*kv)->get(key);
  ASSERT_TRUE(signed_value.ok() && signed_value->has_value());
  ASSERT_TRUE((*kv)->set(key, (*signed_value)->substr(32)).ok());
  JobProcess victim = start(1, 2, "planted", mlp(), secret);
  EXPECT_EQ(wait(victim), 1);
  EXPECT_THAT(*read_file(victim.err_path),
              HasSubstr("is not signed with KILN_REMOTE_CACHE_SECRET"));
}

TEST_F(DistributedTest, LeaderKilledBeforePublishingFollowersFailWithinTheTimeout) {
  std::string model = work_.file("chain.mlir");
  ProcessResult made =
      run_process({"python3", std::string(KILN_BENCH_DIR) + "/make_chain_model.py", model, "60"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::vector<std::string> timeout = {"--set", "KILN_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS=2500"};
  auto start_time = std::chrono::steady_clock::now();
  // The leader dies at the named step: compiled, its followers not yet told.
  std::vector<std::string> crash = timeout;
  crash.insert(crash.end(), {"--set", "KILN_CRASH_AT_STEP=job-share:compiled"});
  JobProcess leader = start(0, 4, "killed", model, crash);
  std::vector<JobProcess> followers;
  for (int i = 1; i < 4; ++i) followers.push_back(start(i, 4, "killed", model, timeout));
  EXPECT_EQ(wait(leader), 128 + SIGKILL);
  for (const auto& f : followers) {
    EXPECT_EQ(wait(f), 1);
    std::string err = *read_file(f.err_path);
    EXPECT_THAT(err, HasSubstr("timed out after 2500 ms waiting for process 0 (the leader)"));
    EXPECT_THAT(err, HasSubstr("'chain60' with key 'chain60-"));
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  EXPECT_LT(seconds, 20);
}

TEST_F(DistributedTest, TheJobCanComeFromEnvironmentVariables) {
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> env = {
        "KILN_COORDINATOR=" + server_.url(),
        "KILN_NUM_PROCESSES=2",
        "KILN_PROCESS_ID=" + std::to_string(i),
        "KILN_JOB_ID=from-env",
        "KILN_SHARE_BINARY_BETWEEN_HOSTS=true",
        "KILN_CACHE_DIR=" + work_.file("env-cache" + std::to_string(i))};
    pids.push_back(spawn_process({kiln_binary(), "run", mlp(), "--json"}, env,
                                 work_.file("env-" + std::to_string(i) + ".json")));
  }
  int compiles = 0;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(wait_process(pids[i]), 0);
    auto j = nlohmann::json::parse(*read_file(work_.file("env-" + std::to_string(i) + ".json")));
    EXPECT_EQ(j["process"], i);
    compiles += j["compiled"].get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(compiles, 1);
}

TEST_F(DistributedTest, ALeaderCompileErrorMakesFollowersFailFastWithTheSameMessage) {
  std::string bad = program_path("bad/unsupported_op.mlir");
  auto start_time = std::chrono::steady_clock::now();
  std::vector<JobProcess> procs;
  for (int i = 0; i < 4; ++i) procs.push_back(start(i, 4, "broken", bad));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(wait(procs[i]), 1);
    std::string err = *read_file(procs[i].err_path);
    EXPECT_THAT(err, HasSubstr("failed to legalize operation 'tosa.custom'"));
    if (i > 0) {
      EXPECT_THAT(err, HasSubstr("process 0 (the leader) failed to compile"));
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  EXPECT_LT(seconds, 60);  // far below the default 20-minute wait
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// Two "processes" of one job as two clients in one test process, sharing an in-process store.
TEST(FdoProfileSharingTest, EveryProcessGetsTheLeadersProfile) {
  auto kv = std::make_shared<InProcessKeyValueStore>();
  distributed::initialize_with_store(kv, 2, 0, "fdo-test");
  auto leader = Client::create_cpu_for_job(1, 0, 2);
  auto follower = Client::create_cpu_for_job(1, 1, 2);
  ASSERT_TRUE(leader.ok() && follower.ok());
  EXPECT_EQ((*leader)->devices().size(), 2u);
  EXPECT_EQ((*follower)->devices()[1].process_index, 1);
  auto key = compute_cache_key(**leader, ModuleSource{"module @m {}", "<t>"}, {}, nullptr);
  ASSERT_TRUE(key.ok()) << key.status().to_string();
  Result<std::string> from_follower = std::string();
  std::thread follower_thread(
      [&] { from_follower = sync_fdo_profile(**follower, {}, *key, "follower's own profile"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto from_leader = sync_fdo_profile(**leader, {}, *key, "leader's profile");
  follower_thread.join();
  distributed::shutdown();
  ASSERT_TRUE(from_leader.ok() && from_follower.ok());
  EXPECT_EQ(*from_leader, "leader's profile");
  EXPECT_EQ(*from_follower, "leader's profile");
  // Both therefore compile under the same key.
  CompileOptions leader_options, follower_options;
  leader_options.fdo_profile = *from_leader;
  follower_options.fdo_profile = *from_follower;
  ModuleSource m{"module @m {}", "<t>"};
  EXPECT_EQ(compute_cache_key(**leader, m, leader_options, nullptr)->key,
            compute_cache_key(**follower, m, follower_options, nullptr)->key);
}

}  // namespace
}  // namespace kiln::testing
