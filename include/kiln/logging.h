// kiln's log: levelled lines to stderr (via spdlog) and to any registered sinks (tests capture
// lines this way). The stderr threshold is KILN_LOG_LEVEL (default "warning").
#pragma once

#include <functional>
#include <string>

#include "kiln/export.h"

namespace kiln::log {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

KILN_EXPORT const char* level_name(Level level);
KILN_EXPORT void write(Level level, const std::string& message);
inline void debug(const std::string& m) { write(Level::kDebug, m); }
inline void info(const std::string& m) { write(Level::kInfo, m); }
inline void warning(const std::string& m) { write(Level::kWarning, m); }
inline void error(const std::string& m) { write(Level::kError, m); }

// Sinks see every line, whatever the stderr threshold. Returns an id for remove_sink.
KILN_EXPORT int add_sink(std::function<void(Level, const std::string&)> sink);
KILN_EXPORT void remove_sink(int id);

}  // namespace kiln::log
