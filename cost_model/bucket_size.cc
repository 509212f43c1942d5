#include "cost_model/bucket_size.h"

#include <algorithm>
#include <cmath>


namespace loom {
namespace {

std::string Bytes(int64_t b) {
  if (b >= (int64_t{1} << 30)) return StrCat(std::round(b / 1073741824.0 * 10) / 10, " GiB");
  if (b >= (1 << 20)) return StrCat(std::round(b / 1048576.0 * 10) / 10, " MiB");
  if (b >= (1 << 10)) return StrCat(std::round(b / 1024.0 * 10) / 10, " KiB");
  return StrCat(b, " B");
}

}  // namespace

std::string BucketSizeChoice::Explain() const {
  std::string why = StrCat("bucket ", Bytes(bytes), ": ");
  if (seconds_per_byte <= 0) {
    return why + StrCat("the link costs nothing per byte here; ", total_bytes, " bytes of "
                        "gradients in ", min_buckets, " buckets");
  }
  why += StrCat("the call reaches ", std::round(efficiency * 100), "% of its bandwidth from ",
                Bytes(efficient_bytes), " (", std::round(latency_s * 1e7) / 10, " us + ",
                Bytes(static_cast<int64_t>(std::round(1 / seconds_per_byte))), "/s of bucket)");
  if (bytes < efficient_bytes) {
    why += StrCat(", capped at 1/", min_buckets, " of the ", Bytes(total_bytes),
                  " of gradients so that the last bucket, which nothing hides, stays short");
  }
  return why;
}

StatusOr<BucketSizeChoice> ChooseBucketBytes(const CommModel& comm, CommCall kind,
                                             CommAlgorithm algorithm,
                                             const std::vector<int>& group_ranks,
                                             int64_t total_bytes, double efficiency,
                                             int min_buckets) {
  if (!(efficiency > 0 && efficiency < 1)) {
    return InvalidArgument("bucket efficiency must be in (0, 1), got ", efficiency);
  }
  if (min_buckets < 1) return InvalidArgument("min_buckets must be at least 1, got ", min_buckets);
  if (total_bytes < 0) return InvalidArgument("total_bytes must not be negative, got ", total_bytes);
  BucketSizeChoice c;
  c.total_bytes = total_bytes;
  c.efficiency = efficiency;
  c.min_buckets = min_buckets;
  // a and b of the model as it stands for this group: two evaluations, so
  // whatever the model adds (collective-specific costs, half duplex) counts.
  constexpr int64_t kProbe = int64_t{1} << 30;
  c.latency_s = comm.CommSeconds(kind, algorithm, 0, group_ranks);
  c.seconds_per_byte = (comm.CommSeconds(kind, algorithm, kProbe, group_ranks) - c.latency_s) /
                       static_cast<double>(kProbe);
  const int64_t cap = std::max<int64_t>(1, total_bytes / min_buckets);
  if (c.seconds_per_byte <= 0) {
    c.efficient_bytes = 0;
    c.bytes = cap;
    return c;
  }
  const double efficient = efficiency / (1 - efficiency) * c.latency_s / c.seconds_per_byte;
  c.efficient_bytes = static_cast<int64_t>(
      std::min(std::ceil(efficient), static_cast<double>(int64_t{1} << 50)));
  c.bytes = std::max<int64_t>(1, std::min(c.efficient_bytes, cap));
  return c;
}

}  // namespace loom
