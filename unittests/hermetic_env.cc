// Linked into every test binary (unittests/CMakeLists.txt): before any test
// runs, the process gets a directory of its own, removed at exit.
// - XDG_CACHE_HOME points at its cache/ and LOOM_COST_TABLE is unset, so
//   that no test, nor a loom binary it starts, reads or writes the user's
//   ~/.cache/loom: after a `loom profile` there, plans and simulations would
//   price ops by that host's measurements and print other figures.
// - TEST_TMPDIR (which ::testing::TempDir() reads) and TMPDIR point at its
//   tmp/, so that the files and directories tests and their loom processes
//   make go with it instead of piling up in /tmp run after run.
// - FLAGS_wait_for_quiet_seconds is 0: tests run beside each other, so a
//   `loom profile` they start would otherwise wait for a quiet host that
//   the other tests keep busy.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace loom {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::perror(("loom tests: " + what).c_str());
  std::abort();
}

class HermeticDirectory {
 public:
  HermeticDirectory() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/loom-test-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (mkdtemp(name.data()) == nullptr) Fail("cannot make a directory from " + pattern);
    dir_ = name.data();
    const std::string cache = dir_ + "/cache", temp = dir_ + "/tmp";
    if (mkdir(cache.c_str(), 0700) != 0) Fail("cannot make " + cache);
    if (mkdir(temp.c_str(), 0700) != 0) Fail("cannot make " + temp);
    setenv("XDG_CACHE_HOME", cache.c_str(), 1);
    unsetenv("LOOM_COST_TABLE");
    setenv("TEST_TMPDIR", temp.c_str(), 1);
    setenv("TMPDIR", temp.c_str(), 1);
    setenv("FLAGS_wait_for_quiet_seconds", "0", 1);
  }
  ~HermeticDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

 private:
  std::string dir_;
};

const HermeticDirectory hermetic_directory;

}  // namespace
}  // namespace loom
