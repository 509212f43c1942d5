// Tests that run the loom binary (or any command) and read what it printed.
#ifndef LOOM_UNITTESTS_LOOM_CLI_H_
#define LOOM_UNITTESTS_LOOM_CLI_H_

#include <string>

namespace loom {

struct CliResult {
  int code;         // the exit status, or 128 + the signal that ended it
  std::string out;  // stdout and stderr together
};

// `command` under /bin/sh, stderr merged into stdout.
CliResult Shell(const std::string& command);

// The loom binary under test with `args`; `env` ("NAME=value ...") is set
// for it only.
CliResult Loom(const std::string& args, const std::string& env = "");

// How many lines `s` holds (its newlines): one-line errors are one.
int Lines(const std::string& s);

}  // namespace loom

#endif  // LOOM_UNITTESTS_LOOM_CLI_H_
