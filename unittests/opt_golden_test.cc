// Golden tests of `loom opt`, in the manner of LLVM's lit + FileCheck: each
// unittests/opt/*.pbtxt is a program whose leading comments say how to run
// it and what the output must hold:
//   # RUN: --passes=tensor-parallel{degree=2} --mp=2   (flags after FILE)
//   # CHECK: text         must appear, after the previous CHECK's match
//   # CHECK-NOT: text     must appear nowhere
//   # ERROR: text         the run must fail with this text on its one line
#include <algorithm>
#include <array>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "unittests/loom_cli.h"

namespace {

const char kDir[] = "unittests/opt";

std::vector<std::string> GoldenFiles() {
  std::vector<std::string> files;
  if (DIR* d = opendir(kDir)) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 6 && name.substr(name.size() - 6) == ".pbtxt") {
        files.push_back(name);
      }
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Directives {
  std::string run;
  std::vector<std::string> checks, check_nots, errors;
};

Directives Parse(const std::string& path) {
  Directives d;
  std::ifstream in(path);
  std::string line;
  auto take = [&](const std::string& prefix, std::string* out) {
    if (line.rfind(prefix, 0) != 0) return false;
    *out = line.substr(prefix.size());
    return true;
  };
  while (std::getline(in, line)) {
    std::string v;
    if (take("# RUN: ", &v)) d.run = v;
    else if (take("# CHECK: ", &v)) d.checks.push_back(v);
    else if (take("# CHECK-NOT: ", &v)) d.check_nots.push_back(v);
    else if (take("# ERROR: ", &v)) d.errors.push_back(v);
  }
  return d;
}

class OptGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(OptGolden, Matches) {
  const std::string path = std::string(kDir) + "/" + GetParam();
  Directives d = Parse(path);
  ASSERT_FALSE(d.run.empty()) << path << " has no '# RUN:' line";
  // Single quotes keep pipeline braces away from the shell.
  auto [code, out] = loom::Loom("opt " + path + " " + d.run);
  if (!d.errors.empty()) {
    EXPECT_EQ(code, 1) << out;
    for (const std::string& e : d.errors) {
      EXPECT_NE(out.find(e), std::string::npos) << "missing error: " << e << "\n" << out;
    }
    return;
  }
  ASSERT_EQ(code, 0) << out;
  size_t pos = 0;
  for (const std::string& c : d.checks) {
    size_t found = out.find(c, pos);
    ASSERT_NE(found, std::string::npos)
        << "CHECK not found after offset " << pos << ": " << c << "\n" << out;
    pos = found + c.size();
  }
  for (const std::string& c : d.check_nots) {
    EXPECT_EQ(out.find(c), std::string::npos) << "CHECK-NOT found: " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, OptGolden, ::testing::ValuesIn(GoldenFiles()),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.size() - 6);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
