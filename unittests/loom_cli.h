// Tests that run the loom binary (or any command) and read what it printed.
#ifndef LOOM_UNITTESTS_LOOM_CLI_H_
#define LOOM_UNITTESTS_LOOM_CLI_H_

#include <string>
#include <vector>

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

// The lines of `out` that report a step ("step K loss X ..."), each cut
// before its time_ms, which varies from run to run.
std::vector<std::string> LossLines(const std::string& out);

// The number printed right after `label` in `out`, or -1 where `label` is
// missing.
double FieldAfter(const std::string& out, const std::string& label);

// A whole file's bytes ("" where it cannot be read), and a file written.
std::string ReadWholeFile(const std::string& path);
void WriteWholeFile(const std::string& path, const std::string& bytes);

// A new, empty directory under the test's temporary directory, its name
// starting with `prefix`.
std::string MakeTempDir(const std::string& prefix);

// loom profile's flags for tests of coverage and bookkeeping rather than
// precision: few, short samples.
inline constexpr char kFastProfileFlags[] =
    " --profile_samples 3 --profile_warmup 1 --profile_min_sample_ms 0.05";

}  // namespace loom

#endif  // LOOM_UNITTESTS_LOOM_CLI_H_
