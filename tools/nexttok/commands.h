// The subcommands: each parses its own options and returns an exit code
// (cli::Exit). `args` excludes the program and subcommand names.
#pragma once

#include "cli.h"

const cli::Command& bench_command();
const cli::Command& check_command();
const cli::Command& show_command();

int run_bench(const cli::Args& args);
int run_check(const cli::Args& args);
int run_show(const cli::Args& args);

// "2026-11-30 22:50:01 UTC"
std::string utc_now();
// The commit the tool was built from.
const char* build_commit();
