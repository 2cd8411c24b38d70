// `kiln cache ...`: inspect and maintain the persistent compilation cache.
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::cli {

// Adds the `cache` subcommand and its children to `app`; run_cache_command runs whichever parsed.
void add_cache_command(CLI::App& app);
bool cache_command_parsed();
int run_cache_command();

}  // namespace kiln::cli
