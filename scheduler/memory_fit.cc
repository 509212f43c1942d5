#include "scheduler/memory_fit.h"

#include <algorithm>
#include <cstdio>

namespace loom {
namespace {

std::string InUnits(int64_t bytes, double unit_bytes, const char* unit) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.1f %s", static_cast<double>(bytes) / unit_bytes, unit);
  return buf;
}

std::string Gigabytes(int64_t bytes) { return InUnits(bytes, 1e9, "GB"); }

}  // namespace

std::vector<MemoryPart> MemoryBreakdown(const RankMetrics& m) {
  auto temporary = [&](MemoryKind kind) {
    return m.peak_temporaries_by_kind[static_cast<int>(kind)];
  };
  std::vector<MemoryPart> parts = {
      {"activations", temporary(MemoryKind::kActivation)},
      {"parameters", m.persistent.parameters + temporary(MemoryKind::kParameterCopy)},
      {"master weights", m.persistent.master_weights},
      {"gradients", m.persistent.gradients + temporary(MemoryKind::kGradient)},
      {"optimizer state", m.persistent.optimizer_state},
      {"comm buffers", temporary(MemoryKind::kCommBuffer)},
      {"temporaries", temporary(MemoryKind::kWorkspace)},
  };
  parts.erase(std::remove_if(parts.begin(), parts.end(),
                             [](const MemoryPart& p) { return p.bytes <= 0; }),
              parts.end());
  std::stable_sort(parts.begin(), parts.end(),
                   [](const MemoryPart& a, const MemoryPart& b) { return a.bytes > b.bytes; });
  return parts;
}

std::string MemoryBreakdownText(const RankMetrics& m, double unit_bytes, const char* unit) {
  std::string s;
  for (const MemoryPart& p : MemoryBreakdown(m)) {
    s += StrCat(s.empty() ? "" : ", ", p.name, " ", InUnits(p.bytes, unit_bytes, unit));
    if (p.name == "activations" && m.layers > 0) {
      s += StrCat(" (", m.layers, m.layers == 1 ? " layer, " : " layers, ",
                  m.recomputed_layers, " recomputed)");
    }
  }
  return s;
}

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
                Gigabytes(device_bytes), ": ", MemoryBreakdownText(m));
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
