// The processes of one job: who this process is, and the key-value store they share (Redis).
#pragma once

#include <memory>
#include <string>

#include "kiln/export.h"
#include "kiln/kv_store.h"
#include "kiln/status.h"

namespace kiln::distributed {

struct KILN_EXPORT JobContext {
  std::string coordinator;  // redis://host:port[/db]
  int num_processes = 1;
  int process_id = 0;
  std::string job;  // namespaces every key of the job
  std::shared_ptr<KeyValueStore> kv;
  // "kiln:<job>:<name>"
  std::string key(const std::string& name) const { return "kiln:" + job + ":" + name; }
};

// Connects to the coordinator (a Redis server). `job` defaults to "default".
KILN_EXPORT Status initialize(const std::string& coordinator, int num_processes, int process_id,
                              const std::string& job = "");
// The same from KILN_COORDINATOR, KILN_NUM_PROCESSES, KILN_PROCESS_ID, KILN_JOB_ID; does nothing
// when KILN_COORDINATOR is unset.
KILN_EXPORT Status initialize_from_environment();
// For tests and single-process use: a job whose store is `kv` (e.g. InProcessKeyValueStore).
KILN_EXPORT void initialize_with_store(std::shared_ptr<KeyValueStore> kv, int num_processes,
                                       int process_id, const std::string& job = "");
// The current job, or nullptr when none was initialised.
KILN_EXPORT std::shared_ptr<const JobContext> context();
KILN_EXPORT void shutdown();

}  // namespace kiln::distributed
