#include "unittests/loom_cli.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

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

std::vector<std::string> LossLines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("step ", 0) == 0) lines.push_back(line.substr(0, line.find(" time_ms")));
  }
  return lines;
}

double FieldAfter(const std::string& out, const std::string& label) {
  const size_t at = out.find(label);
  return at == std::string::npos ? -1 : std::atof(out.c_str() + at + label.size());
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string MakeTempDir(const std::string& prefix) {
  std::string dir = ::testing::TempDir() + "/" + prefix + "XXXXXX";
  CHECK(mkdtemp(dir.data()) != nullptr) << dir;
  return dir;
}

}  // namespace loom
