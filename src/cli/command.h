// The ptn command line: each `cmd_<name>.cpp` registers one subcommand with PTN_COMMAND.
// Options accept dashes or underscores (`--max-seq-length` = `--max_seq_length`): name them
// with opt("max-seq-length").
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ptn::cli {

// A subcommand adds itself to `app` and returns the function that runs it (its exit code).
using CommandSetup = std::function<std::function<int()>(CLI::App& app)>;

struct CommandRegistration {
  CommandRegistration(const char* name, CommandSetup setup);
};
struct RegisteredCommand {
  std::string name;
  CommandSetup setup;
};
std::vector<RegisteredCommand>& registered_commands();

// "--max-seq-length,--max_seq_length" for CLI11 (single letters passed as extra short names).
std::string opt(const std::string& dashed, const std::string& shorts = "");

// Prints an error line "ptn <cmd>: <message>" to stderr and returns exit code 1.
int report_error(const std::string& command, const std::exception& e);

}  // namespace ptn::cli

#define PTN_CONCAT_(a, b) a##b
#define PTN_CONCAT(a, b) PTN_CONCAT_(a, b)
#define PTN_COMMAND(name, setup) \
  static ::ptn::cli::CommandRegistration PTN_CONCAT(ptn_command_, __LINE__)(name, setup)
