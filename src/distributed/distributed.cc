#include "kiln/distributed.h"

#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "kiln/config.h"

namespace kiln::distributed {
namespace {

std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::shared_ptr<const JobContext>& current() {
  static std::shared_ptr<const JobContext> c;
  return c;
}

// A job has at most this many processes: every count a job waits on stays bounded.
constexpr int kMaxProcesses = 65536;

void install(const std::string& coordinator, std::shared_ptr<KeyValueStore> kv, int num_processes,
             int process_id, const std::string& job) {
  auto ctx = std::make_shared<JobContext>();
  ctx->coordinator = coordinator;
  ctx->num_processes = num_processes;
  ctx->process_id = process_id;
  ctx->job = job.empty() ? "default" : job;
  ctx->kv = std::move(kv);
  std::lock_guard<std::mutex> lock(mutex());
  current() = ctx;
}

}  // namespace

Status initialize(const std::string& coordinator, int num_processes, int process_id,
                  const std::string& job) {
  if (num_processes > kMaxProcesses)
    return invalid_argument("a job of " + std::to_string(num_processes) +
                            " processes is more than kiln supports (" +
                            std::to_string(kMaxProcesses) + ")");
  if (num_processes < 1 || process_id < 0 || process_id >= num_processes)
    return invalid_argument("process id " + std::to_string(process_id) + " is not in a job of " +
                            std::to_string(num_processes) + " processes");
  KILN_ASSIGN_OR_RETURN(RedisAddress address, parse_redis_url(coordinator));
  KILN_ASSIGN_OR_RETURN(auto kv, RedisKeyValueStore::connect(address, 5000));
  install(coordinator, std::move(kv), num_processes, process_id, job);
  return Status();
}

Status initialize_from_environment() {
  std::string coordinator = *config::get_string("KILN_COORDINATOR");
  if (coordinator.empty()) return Status();
  KILN_RETURN_IF_ERROR(config::check_environment_of("KILN_NUM_PROCESSES"));
  KILN_RETURN_IF_ERROR(config::check_environment_of("KILN_PROCESS_ID"));
  return initialize(coordinator, static_cast<int>(config::get_int("KILN_NUM_PROCESSES")),
                    static_cast<int>(config::get_int("KILN_PROCESS_ID")),
                    *config::get_string("KILN_JOB_ID"));
}

void initialize_with_store(std::shared_ptr<KeyValueStore> kv, int num_processes, int process_id,
                           const std::string& job) {
  install("in-process", std::move(kv), num_processes, process_id, job);
}

std::shared_ptr<const JobContext> context() {
  std::lock_guard<std::mutex> lock(mutex());
  return current();
}

void shutdown() {
  std::lock_guard<std::mutex> lock(mutex());
  current().reset();
}

}  // namespace kiln::distributed
