// Monitoring: named events and durations delivered to registered listeners (thread-safe).
// Event names used by kiln: compile_requests_use_cache, cache_hits, cache_misses, cache_writes,
// cache_corrupt, tasks_using_cache, task_disabled_cache; durations (seconds):
// compile_time_saved_sec, cache_retrieval_time_sec, backend_compile_duration.
#pragma once

#include <functional>
#include <string>

#include "kiln/export.h"

namespace kiln::monitoring {

using EventListener = std::function<void(const std::string& event)>;
using DurationListener = std::function<void(const std::string& event, double seconds)>;

// Returns an id for unregistering.
KILN_EXPORT int add_event_listener(EventListener listener);
KILN_EXPORT int add_duration_listener(DurationListener listener);
KILN_EXPORT void remove_listener(int id);

KILN_EXPORT void record_event(const std::string& event);
KILN_EXPORT void record_duration(const std::string& event, double seconds);

}  // namespace kiln::monitoring
