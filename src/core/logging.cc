#include "kiln/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <map>
#include <mutex>

#include "kiln/config.h"

namespace kiln::log {
namespace {

struct Sinks {
  std::mutex mutex;
  int next_id = 1;
  std::map<int, std::function<void(Level, const std::string&)>> sinks;
};

Sinks& sinks() {
  static Sinks s;
  return s;
}

spdlog::logger& stderr_logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l =
        std::make_shared<spdlog::logger>("kiln", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("kiln %l: %v");
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return *logger;
}

Level threshold() {
  auto v = config::get_string("KILN_LOG_LEVEL");
  std::string name = v.ok() ? *v : "warning";
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "error") return Level::kError;
  return Level::kWarning;
}

}  // namespace

const char* level_name(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "?";
}

void write(Level level, const std::string& message) {
  {
    Sinks& s = sinks();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& [id, sink] : s.sinks) sink(level, message);
  }
  if (level < threshold()) return;
  spdlog::level::level_enum spd = level == Level::kDebug     ? spdlog::level::debug
                                  : level == Level::kInfo    ? spdlog::level::info
                                  : level == Level::kWarning ? spdlog::level::warn
                                                             : spdlog::level::err;
  stderr_logger().log(spd, message);
}

int add_sink(std::function<void(Level, const std::string&)> sink) {
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sinks[s.next_id] = std::move(sink);
  return s.next_id++;
}

void remove_sink(int id) {
  Sinks& s = sinks();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sinks.erase(id);
}

}  // namespace kiln::log
