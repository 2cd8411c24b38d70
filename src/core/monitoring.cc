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

}  // namespace

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
