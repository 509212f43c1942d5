// The `loom` command line: one Command per subcommand, in one table that
// drives dispatch and help.
#ifndef LOOM_TOOLS_COMMAND_H_
#define LOOM_TOOLS_COMMAND_H_

#include <string>
#include <vector>

#include "framework/status.h"

namespace loom {

struct Command {
  const char* name;
  const char* summary;  // one line, for `loom help`
  const char* usage;    // "loom show FILE [--vars]" and a paragraph
  std::vector<const char*> flags;  // flags the command reads, for its help
  // Runs with the positional arguments left after flag parsing.
  Status (*run)(const std::vector<std::string>& args);
};

const std::vector<Command>& Commands();

// Prints "usage" and the command's flags with their current values.
void PrintCommandHelp(const Command& command);

}  // namespace loom

#endif  // LOOM_TOOLS_COMMAND_H_
