// ptn: export Hugging Face / GGUF models to .ptn programs and run them on the CPU.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "core/cpu.h"
#include "core/error.h"

namespace ptn::cli {

std::vector<RegisteredCommand>& registered_commands() {
  static std::vector<RegisteredCommand> commands;
  return commands;
}

CommandRegistration::CommandRegistration(const char* name, CommandSetup setup) {
  registered_commands().push_back({name, std::move(setup)});
}

std::string opt(const std::string& dashed, const std::string& shorts) {
  std::string names = shorts.empty() ? "" : "-" + shorts + ",";
  names += "--" + dashed;
  std::string under = dashed;
  std::replace(under.begin(), under.end(), '-', '_');
  if (under != dashed) names += ",--" + under;
  return names;
}

int report_error(const std::string& command, const std::exception& e) {
  std::fprintf(stderr, "ptn %s: %s\n", command.c_str(), e.what());
  return 1;
}

}  // namespace ptn::cli

int main(int argc, char** argv) {
  using namespace ptn::cli;
  CLI::App app{"ptn: export LLMs into self-contained .ptn programs with an off-graph KV cache, "
               "and run and serve them on the CPU"};
  app.set_version_flag("--version", std::string("ptn ") + PTN_VERSION + " (simd: " +
                                        ptn::simd_level_name(ptn::detected_simd_level()) + ")");
  app.require_subcommand(0, 1);
  auto commands = registered_commands();
  std::sort(commands.begin(), commands.end(),
            [](const RegisteredCommand& a, const RegisteredCommand& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  for (auto& c : commands) {
    CLI::App* before = nullptr;
    auto run = c.setup(app);
    before = app.get_subcommand(c.name);
    runners.emplace_back(before, std::move(run));
  }
  // A PTN_SIMD that names no level of this build is refused, never run past at full speed.
  if (const std::string err = ptn::simd_env_error(); !err.empty()) {
    std::fprintf(stderr, "ptn: %s\n", err.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners) {
    if (sub && sub->parsed()) {
      try {
        return run();
      } catch (const std::exception& e) {
        return report_error(sub->get_name(), e);
      }
    }
  }
  std::cout << app.help();
  return 0;
}
