#include "unittests/loom_cli.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include <glog/logging.h>
#include <gtest/gtest.h>

namespace loom {

CliResult Shell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {127, "popen failed: " + command};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

CliResult Loom(const std::string& args, const std::string& env) {
  return Shell(env + (env.empty() ? "" : " ") + LOOM_BIN + " " + args);
}

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

std::string MakeTempDir(const std::string& prefix) {
  std::string dir = ::testing::TempDir() + "/" + prefix + "XXXXXX";
  CHECK(mkdtemp(dir.data()) != nullptr) << dir;
  return dir;
}

}  // namespace loom
