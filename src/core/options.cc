#include "kiln/options.h"

namespace kiln {

const char* effort_level_name(EffortLevel level) {
  switch (level) {
    case EffortLevel::kUnknown:
      return "UNKNOWN";
    case EffortLevel::kO0:
      return "O0";
    case EffortLevel::kO1:
      return "O1";
    case EffortLevel::kO2:
      return "O2";
    case EffortLevel::kO3:
      return "O3";
  }
  return "UNKNOWN";
}

Result<EffortLevel> parse_effort_level(const std::string& text) {
  struct Name {
    const char* name;
    const char* number;
    EffortLevel level;
  };
  static const Name kNames[] = {{"UNKNOWN", "0", EffortLevel::kUnknown},
                                {"O0", "9", EffortLevel::kO0},
                                {"O1", "19", EffortLevel::kO1},
                                {"O2", "29", EffortLevel::kO2},
                                {"O3", "39", EffortLevel::kO3}};
  for (const Name& n : kNames) {
    if (text == n.name || text == n.number) return n.level;
  }
  return invalid_argument("unknown effort level '" + text +
                          "': use O0, O1, O2, O3 or UNKNOWN (or 9, 19, 29, 39, 0)");
}

EffortLevel resolve_effort_level(EffortLevel level) {
  return level == EffortLevel::kUnknown ? EffortLevel::kO2 : level;
}

}  // namespace kiln
