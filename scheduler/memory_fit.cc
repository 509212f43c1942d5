#include "scheduler/memory_fit.h"

#include <algorithm>
#include <cstdio>

namespace loom {
namespace {

std::string Gigabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

std::vector<const RankMetrics*> RanksOverDeviceMemory(const SimulationResult& result,
                                                      int64_t device_bytes) {
  std::vector<const RankMetrics*> over;
  if (device_bytes <= 0) return over;
  for (const RankMetrics& m : result.ranks) {
    if (m.peak_bytes() > device_bytes) over.push_back(&m);
  }
  std::stable_sort(over.begin(), over.end(), [](const RankMetrics* a, const RankMetrics* b) {
    return a->peak_bytes() > b->peak_bytes();
  });
  return over;
}

std::string OverDeviceMemoryMessage(const RankMetrics& m, int64_t device_bytes) {
  return StrCat("rank ", m.rank, " needs ", Gigabytes(m.peak_bytes()), " of ",
                Gigabytes(device_bytes), ": temporaries ", Gigabytes(m.peak_temporary_bytes),
                ", parameters ", Gigabytes(m.persistent.parameters), ", gradients ",
                Gigabytes(m.persistent.gradients), ", optimizer state ",
                Gigabytes(m.persistent.optimizer_state));
}

std::string DeviceMemorySummary(const SimulationResult& result, int64_t device_bytes,
                                int named) {
  if (device_bytes <= 0 || result.ranks.empty()) return "";
  const std::vector<const RankMetrics*> over = RanksOverDeviceMemory(result, device_bytes);
  if (over.empty()) {
    const RankMetrics& peak = result.PeakRank();
    return StrCat("every rank fits ", Gigabytes(device_bytes), " (largest peak ",
                  Gigabytes(peak.peak_bytes()), ", rank ", peak.rank, ")");
  }
  std::string s = StrCat(over.size(), " of ", result.ranks.size(), " ranks do not fit ",
                         Gigabytes(device_bytes), ": ");
  for (int i = 0; i < static_cast<int>(over.size()) && i < named; ++i) {
    s += StrCat(i > 0 ? "; " : "", OverDeviceMemoryMessage(*over[i], device_bytes));
  }
  if (static_cast<int>(over.size()) > named) {
    s += StrCat("; and ", over.size() - named, " more");
  }
  return s;
}

}  // namespace loom
