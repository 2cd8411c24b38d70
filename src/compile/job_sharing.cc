// One compile per job: the leader compiles and publishes through the job's key-value store; the
// other processes load what it published. FDO profiles are shared the same way.
#include <map>
#include <set>

#include "compile/cache_parts.h"
#include "core/crash_point.h"
#include "core/digest.h"
#include "kiln/kv_store.h"
#include "kiln/logging.h"

namespace kiln::cache_parts {
namespace {

// A shared value names the key it was published for and, with a secret, carries an HMAC over
// both, exactly as remote-tier entries do: a follower loads code only from its leader.
//   [32-byte tag] key '\n' body
std::string seal_share_value(const std::string& key, const std::string& body,
                             const std::string& secret) {
  std::string named = key + "\n" + body;
  return secret.empty() ? named : hmac_tag(secret, "share", named) + named;
}

Result<std::string_view> open_share_value(const std::string& key, std::string_view value,
                                          const std::string& secret) {
  if (!secret.empty()) {
    if (value.size() < kHmacTagSize ||
        !same_tag(value.substr(0, kHmacTagSize),
                  hmac_tag(secret, "share", value.substr(kHmacTagSize))))
      return corruption("the job's shared executable for key '" + key +
                        "' is not signed with KILN_REMOTE_CACHE_SECRET; refused");
    value.remove_prefix(kHmacTagSize);
  }
  if (value.size() <= key.size() || value.substr(0, key.size()) != key || value[key.size()] != '\n')
    return corruption("the job's shared value under key '" + key +
                      "' names another key (or none); refused");
  return value.substr(key.size() + 1);
}

}  // namespace

SharePlan plan_sharing(const Client& client, const CompileOptions& options, bool share) {
  SharePlan plan;
  plan.job = distributed::context();
  if (!plan.job || !share) return plan;
  std::map<int, int> owner;  // device id → process
  for (const Device& d : client.devices()) owner[d.id] = d.process_index;
  std::set<int> ids;
  for (const auto& row : options.device_assignment)
    for (int id : row) ids.insert(id);
  if (ids.empty())
    for (const auto& [id, process] : owner) ids.insert(id);
  std::set<int> processes;
  for (int id : ids) processes.insert(owner.count(id) ? owner[id] : 0);
  if (processes.size() < 2) return plan;
  plan.active = true;
  plan.leader_process = owner.count(*ids.begin()) ? owner[*ids.begin()] : 0;
  plan.leader = client.process_index() == plan.leader_process;
  return plan;
}

void publish_to_followers(const SharePlan& plan, const CacheKey& key,
                          const Result<std::shared_ptr<Executable>>& compiled,
                          const std::string& secret) {
  crash_point("job-share:compiled");
  std::string body = compiled.ok() ? "X" + zstd_compress((*compiled)->serialize())
                                   : "E" + compiled.status().message();
  Status s =
      plan.job->kv->set(plan.job->key("share:" + key.key), seal_share_value(key.key, body, secret));
  if (!s.ok())
    log::warning("could not share the executable of '" + key.module_name +
                 "' with the job: " + s.message());
}

Result<std::shared_ptr<Executable>> wait_for_leader(const SharePlan& plan, const CacheKey& key,
                                                    const std::string& secret, int64_t timeout_ms) {
  std::string leader = "process " + std::to_string(plan.leader_process) + " (the leader)";
  auto value = plan.job->kv->blocking_get(plan.job->key("share:" + key.key), timeout_ms);
  if (!value.ok() && value.status().code() == StatusCode::kDeadlineExceeded) {
    return deadline_exceeded("timed out after " + std::to_string(timeout_ms) + " ms waiting for " +
                             leader + " to share the executable of '" + key.module_name +
                             "' with key '" + key.key + "' (" + value.status().message() + ")");
  }
  if (!value.ok()) {
    return Status(value.status().code(), "waiting for " + leader + " to share the executable of '" +
                                             key.module_name + "': " + value.status().message());
  }
  KILN_ASSIGN_OR_RETURN(std::string_view body, open_share_value(key.key, *value, secret));
  if (body.empty() || body[0] == 'E') {
    return compile_error(leader + " failed to compile '" + key.module_name +
                         "': " + std::string(body.empty() ? "" : body.substr(1)));
  }
  KILN_ASSIGN_OR_RETURN(std::string bytes, zstd_decompress(body.substr(1), size_t{4} << 30));
  return Executable::deserialize(bytes);
}

Result<std::string> sync_profile(const Client& client, const CompileOptions& options,
                                 const CacheKey& empty_profile_key, std::string profile,
                                 int64_t timeout_ms) {
  SharePlan plan = plan_sharing(client, options, /*share=*/true);
  if (!plan.active) return profile;
  std::string sync_key = plan.job->key("fdo:" + empty_profile_key.key + "_fdo_sync");
  if (plan.leader) {
    KILN_RETURN_IF_ERROR(plan.job->kv->set(sync_key, profile));
    return profile;
  }
  auto shared = plan.job->kv->blocking_get(sync_key, timeout_ms);
  std::string waiting_for = "process " + std::to_string(plan.leader_process) +
                            " (the leader) to share the FDO profile of '" +
                            empty_profile_key.module_name + "'";
  if (!shared.ok() && shared.status().code() == StatusCode::kDeadlineExceeded)
    return deadline_exceeded("timed out after " + std::to_string(timeout_ms) + " ms waiting for " +
                             waiting_for);
  if (!shared.ok())
    return Status(shared.status().code(),
                  "waiting for " + waiting_for + ": " + shared.status().message());
  return std::move(*shared);
}

}  // namespace kiln::cache_parts
