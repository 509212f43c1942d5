#include "profiling/net_probe.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  rusage usage = {};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Starts a phase on every member at (nearly) the same time.
Status Barrier(Communicator& comm) {
  Tensor token(TensorMeta{proto::FP32, {1}});
  token.data<float>()[0] = 0;
  return comm.AllReduce({&token}, ReduceOp::kSum);
}

}  // namespace

double NetProbeReport::SendMBps() const {
  return send_seconds > 0 ? static_cast<double>(bytes) * repeats / send_seconds / 1e6 : 0;
}

double NetProbeReport::AllReduceBusMBps() const {
  if (allreduce_seconds <= 0) return 0;
  const double sent = 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) * repeats;
  return sent / allreduce_seconds / 1e6;
}

StatusOr<NetProbeReport> RunNetProbe(Communicator& comm, const NetProbeOptions& options) {
  const int n = comm.size();
  const std::string where = StrCat("net probe on ", comm.name());
  if (n < 2) return InvalidArgument(where, ": needs at least 2 ranks, has ", n);
  if (options.bytes < 4 || options.bytes % 4 != 0) {
    return InvalidArgument(where, ": bytes must be a positive multiple of 4, not ", options.bytes);
  }
  if (options.repeats < 1) return InvalidArgument(where, ": repeats must be at least 1");
  Tensor buffer(TensorMeta{proto::FP32, {options.bytes / 4}});
  std::fill_n(buffer.data<float>(), buffer.numel(), 1.0f);

  LOOM_RETURN_IF_ERROR(Barrier(comm));
  const double cpu_start = CpuSeconds();
  const Clock::time_point start = Clock::now();
  double send_seconds = 0;
  for (int i = 0; i < options.repeats; ++i) {
    LOOM_RETURN_IF_ERROR(Barrier(comm));
    const Clock::time_point t = Clock::now();
    if (comm.rank() == 0) LOOM_RETURN_IF_ERROR(comm.Send(buffer, 1));
    if (comm.rank() == 1) LOOM_RETURN_IF_ERROR(comm.Recv(&buffer, 0));
    send_seconds += Since(t);
  }
  double allreduce_seconds = 0;
  for (int i = 0; i < options.repeats; ++i) {
    LOOM_RETURN_IF_ERROR(Barrier(comm));
    // Keep the values small: the sums only double per repeat otherwise.
    std::fill_n(buffer.data<float>(), buffer.numel(), 1.0f);
    const Clock::time_point t = Clock::now();
    LOOM_RETURN_IF_ERROR(comm.AllReduce({&buffer}, ReduceOp::kSum));
    allreduce_seconds += Since(t);
  }
  const double wall = Since(start);
  const double cpu = CpuSeconds() - cpu_start;

  // Every member's measurements, in group-rank order.
  Tensor mine(TensorMeta{proto::FP64, {1, 4}});
  double* m = mine.data<double>();
  m[0] = send_seconds;
  m[1] = allreduce_seconds;
  m[2] = cpu;
  m[3] = wall;
  Tensor all;
  LOOM_RETURN_IF_ERROR(comm.AllGather(mine, &all));
  const double* a = all.data<double>();
  NetProbeReport report;
  report.ranks = n;
  report.bytes = options.bytes;
  report.repeats = options.repeats;
  report.send_seconds = a[1 * 4 + 0];  // the receiver's
  for (int r = 0; r < n; ++r) {
    report.allreduce_seconds = std::max(report.allreduce_seconds, a[r * 4 + 1]);
    report.cpu_seconds.push_back(a[r * 4 + 2]);
    report.wall_seconds.push_back(a[r * 4 + 3]);
  }
  return report;
}

}  // namespace loom
