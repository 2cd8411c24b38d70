// Monitoring: named events and durations delivered to registered listeners (thread-safe).
// kiln records the events below (Event, DurationEvent); listeners receive their names
// (event_name), which are JAX's compilation-cache event names without the "/jax/..." prefix
// (jax_event_name gives the full one; docs/CACHE.md has the table). Applications may record
// events of their own by name.
#pragma once

#include <functional>
#include <string>

#include "kiln/export.h"

namespace kiln::monitoring {

enum class Event {
  kCompileRequestsUseCache,  // a lookup in the persistent cache (memory hits are not)
  kCacheHits,                // served from the persistent cache
  kCacheMisses,              // not there: compiled, or taken from the job's leader
  kCacheWrites,              // an entry written (kiln's own; JAX has no such event)
  kCacheCorrupt,             // an entry that did not decode or load: a miss (kiln's own)
  kTasksUsingCache,          // once per cache, on its first lookup
  kTaskDisabledCache,        // once per cache that is off
};

enum class DurationEvent {
  kCompileTimeSavedSec,     // per hit: the stored compile time less the retrieval time
  kCacheRetrievalTimeSec,   // per hit
  kBackendCompileDuration,  // per compile
};

// The name listeners receive: "cache_hits", "compile_time_saved_sec", ...
KILN_EXPORT const char* event_name(Event event);
KILN_EXPORT const char* event_name(DurationEvent event);
// JAX's name for the same event ("/jax/compilation_cache/cache_hits",
// "/jax/core/compile/backend_compile_duration"); "" for kiln's own events.
KILN_EXPORT const char* jax_event_name(Event event);
KILN_EXPORT const char* jax_event_name(DurationEvent event);

using EventListener = std::function<void(const std::string& event)>;
using DurationListener = std::function<void(const std::string& event, double seconds)>;

// Returns an id for unregistering.
KILN_EXPORT int add_event_listener(EventListener listener);
KILN_EXPORT int add_duration_listener(DurationListener listener);
KILN_EXPORT void remove_listener(int id);

KILN_EXPORT void record_event(Event event);
KILN_EXPORT void record_duration(DurationEvent event, double seconds);
// An application's own events, by name.
KILN_EXPORT void record_event(const std::string& event);
KILN_EXPORT void record_duration(const std::string& event, double seconds);

}  // namespace kiln::monitoring
