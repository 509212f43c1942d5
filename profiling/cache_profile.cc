#include "profiling/cache_profile.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace loom {
namespace {

// "32768K", "1M", "512": the bytes; -1 where it is none of those.
int64_t ParseCacheSize(const std::string& text) {
  size_t end = 0;
  int64_t n = 0;
  try {
    n = std::stoll(text, &end);
  } catch (...) {
    return -1;
  }
  const std::string unit = text.substr(end, text.find_first_of("\n ", end) - end);
  if (unit.empty()) return n;
  if (unit == "K") return n << 10;
  if (unit == "M") return n << 20;
  if (unit == "G") return n << 30;
  return -1;
}

// Bytes per second one thread reads summing `words`, best of `reps`
// passes after one untimed.
double ReadRate(const std::vector<uint64_t>& words, int reps) {
  uint64_t sink = 0;
  double best = 0;
  for (int r = 0; r <= reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= words.size(); i += 4) {
      a += words[i];
      b += words[i + 1];
      c += words[i + 2];
      d += words[i + 3];
    }
    sink += a + b + c + d;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0 && seconds > 0) best = std::max(best, words.size() * 8.0 / seconds);
  }
  asm volatile("" : : "r"(sink) : "memory");  // the sums are used
  return best;
}

// Seconds of `op`, median of `reps` runs each right after `evict` was
// read (its inputs then come from memory) or right after another run
// (from the cache).
template <typename Op>
double OpSeconds(Op op, const std::vector<uint64_t>* evict, int reps) {
  std::vector<double> t;
  op();
  for (int r = 0; r < reps; ++r) {
    if (evict != nullptr) {
      ReadRate(*evict, 0);
    } else {
      op();
    }
    const auto start = std::chrono::steady_clock::now();
    op();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

}  // namespace

StatusOr<int64_t> LastLevelCacheBytes(const std::string& sysfs_cpu0) {
  int best_level = 0;
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sysfs_cpu0 + "/cache", ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    int level = 0;
    std::string size;
    if (!(std::ifstream(entry.path() / "level") >> level)) continue;
    if (!(std::ifstream(entry.path() / "size") >> size)) continue;
    const int64_t b = ParseCacheSize(size);
    if (b > 0 && level > best_level) {
      best_level = level;
      bytes = b;
    }
  }
  if (bytes <= 0) return NotFound(sysfs_cpu0, "/cache lists no cache sizes");
  return bytes;
}

StatusOr<CacheCalibration> CalibrateCache() {
  CacheCalibration c;
  LOOM_ASSIGN_OR_RETURN(c.cache_bytes, LastLevelCacheBytes());
  std::vector<uint64_t> cached(std::max<int64_t>(c.cache_bytes / 8 / 8, 1024), 1);
  // Four times the cache (at most 1 GiB) leaves none of the op's operands there.
  const int64_t memory_bytes = std::min<int64_t>(4 * c.cache_bytes, int64_t{1} << 30);
  std::vector<uint64_t> memory(static_cast<size_t>(memory_bytes / 8), 1);
  c.cached_read_rate = ReadRate(cached, 50);
  c.memory_read_rate = ReadRate(memory, 5);
  if (c.cached_read_rate <= 0 || c.memory_read_rate <= 0) {
    return Internal("reading a buffer took no time: the clock is too coarse");
  }
  // An op as a step's backward runs it: a weight gradient, x^T dy, whose
  // x (1 MiB) and dy (256 KiB) its forward left, read from memory (after
  // `memory` pushed them out of the cache) or from the cache (after a run).
  // A stream of reads is the best case for memory, whose prefetchers see it
  // coming; the op reads its operands in the blocks its kernel packs, and
  // pays several times as much a byte.
  const int rows = 1024, in = 256, outs = 64;
  std::vector<float> x(rows * in, 1.0f), dy(rows * outs, 0.5f), dw(in * outs);
  auto weight_grad = [&] {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, outs, rows, 1.0f, x.data(), in,
                dy.data(), outs, 0.0f, dw.data(), outs);
  };
  const double in_bytes = (x.size() + dy.size()) * sizeof(float);
  c.uncached_read_seconds_per_byte = std::max(
      0.0, (OpSeconds(weight_grad, &memory, 15) - OpSeconds(weight_grad, nullptr, 15)) / in_bytes);
  return c;
}

}  // namespace loom
