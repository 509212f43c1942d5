// Linked into every test binary (unittests/CMakeLists.txt): before any test
// runs, the process gets a cache directory of its own. XDG_CACHE_HOME
// points at a fresh temporary directory and LOOM_COST_TABLE is unset, so
// that no test, nor a loom binary it starts, reads or writes the user's
// ~/.cache/loom: after a `loom profile` there, plans and simulations would
// price ops by that host's measurements and print other figures. The
// directory is removed at exit.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace loom {
namespace {

class HermeticCache {
 public:
  HermeticCache() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/loom-test-cache-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (mkdtemp(name.data()) == nullptr) {
      std::perror(("loom tests: cannot make a cache directory from " + pattern).c_str());
      std::abort();
    }
    dir_ = name.data();
    setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
    unsetenv("LOOM_COST_TABLE");
  }
  ~HermeticCache() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

 private:
  std::string dir_;
};

const HermeticCache hermetic_cache;

}  // namespace
}  // namespace loom
