// `kiln flags`: every kiln flag with its type, default, the value in effect and where it came from;
// `kiln flags --markdown` writes docs/FLAGS.md.
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_flags_command(CLI::App& app);
bool flags_command_parsed();
int run_flags_command();

}  // namespace kiln::cli
