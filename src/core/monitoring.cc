#include "kiln/monitoring.h"

#include <map>
#include <mutex>

namespace kiln::monitoring {
namespace {

struct Listeners {
  std::mutex mutex;
  int next_id = 1;
  std::map<int, EventListener> events;
  std::map<int, DurationListener> durations;
};

Listeners& listeners() {
  static Listeners l;
  return l;
}

struct Names {
  const char* kiln;
  const char* jax;
};

Names names(Event event) {
  switch (event) {
    case Event::kCompileRequestsUseCache:
      return {"compile_requests_use_cache", "/jax/compilation_cache/compile_requests_use_cache"};
    case Event::kCacheHits:
      return {"cache_hits", "/jax/compilation_cache/cache_hits"};
    case Event::kCacheMisses:
      return {"cache_misses", "/jax/compilation_cache/cache_misses"};
    case Event::kCacheWrites:
      return {"cache_writes", ""};
    case Event::kCacheCorrupt:
      return {"cache_corrupt", ""};
    case Event::kTasksUsingCache:
      return {"tasks_using_cache", "/jax/compilation_cache/tasks_using_cache"};
    case Event::kTaskDisabledCache:
      return {"task_disabled_cache", "/jax/compilation_cache/task_disabled_cache"};
  }
  return {"unknown", ""};
}

Names names(DurationEvent event) {
  switch (event) {
    case DurationEvent::kCompileTimeSavedSec:
      return {"compile_time_saved_sec", "/jax/compilation_cache/compile_time_saved_sec"};
    case DurationEvent::kCacheRetrievalTimeSec:
      return {"cache_retrieval_time_sec", "/jax/compilation_cache/cache_retrieval_time_sec"};
    case DurationEvent::kBackendCompileDuration:
      return {"backend_compile_duration", "/jax/core/compile/backend_compile_duration"};
  }
  return {"unknown", ""};
}

}  // namespace

const char* event_name(Event event) { return names(event).kiln; }
const char* event_name(DurationEvent event) { return names(event).kiln; }
const char* jax_event_name(Event event) { return names(event).jax; }
const char* jax_event_name(DurationEvent event) { return names(event).jax; }

void record_event(Event event) { record_event(std::string(event_name(event))); }
void record_duration(DurationEvent event, double seconds) {
  record_duration(std::string(event_name(event)), seconds);
}

int add_event_listener(EventListener listener) {
  Listeners& l = listeners();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.events[l.next_id] = std::move(listener);
  return l.next_id++;
}

int add_duration_listener(DurationListener listener) {
  Listeners& l = listeners();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.durations[l.next_id] = std::move(listener);
  return l.next_id++;
}

void remove_listener(int id) {
  Listeners& l = listeners();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.events.erase(id);
  l.durations.erase(id);
}

void record_event(const std::string& event) {
  Listeners& l = listeners();
  std::lock_guard<std::mutex> lock(l.mutex);
  for (auto& [id, f] : l.events) f(event);
}

void record_duration(const std::string& event, double seconds) {
  Listeners& l = listeners();
  std::lock_guard<std::mutex> lock(l.mutex);
  for (auto& [id, f] : l.durations) f(event, seconds);
}

}  // namespace kiln::monitoring
