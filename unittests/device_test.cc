// The Device, Stream and Event interfaces (executor/device.h, stream.h) on
// each backend: a dependency across streams is honoured, priorities map
// onto what the backend has, memory is stream-ordered. The CPU tests run
// everywhere; the CUDA ones need a device and skip, saying why, without.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "executor/cpu/cpu_device.h"
#include "executor/cpu/cpu_stream.h"
#include "executor/cpu/host_memory_cache.h"
#include "executor/device_placement.h"
#include "executor/serial_executor.h"
#include "executor/tensor.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"

#ifdef LOOM_WITH_CUDA
#include "executor/cuda/cuda_device.h"
#include "executor/cuda/cuda_probe.h"
#include "executor/cuda/cuda_stream.h"
#endif

namespace loom {
namespace {

// A waiting stream's thread goes on only once the other has recorded the
// event for the generation it waits for; a record of an earlier generation
// does not count.
TEST(CpuStreams, AWaitHoldsUntilTheRecordOfItsGeneration) {
  CpuDevice device;
  auto producer = device.CreateStream(StreamOptions{"calc"}).value();
  auto consumer = device.CreateStream(StreamOptions{"mp"}).value();
  auto events = device.CreateEvents(1).value();
  std::atomic<bool> abort{false};
  ASSERT_TRUE(producer->Record(*events, 0, 1).ok());
  std::atomic<int> written{0};
  std::thread waiter([&] {
    StatusOr<bool> waited = consumer->Wait(*events, 0, 2, abort);
    ASSERT_TRUE(waited.ok() && *waited);
    EXPECT_EQ(written.load(), 42);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  written = 42;
  ASSERT_TRUE(producer->Record(*events, 0, 2).ok());
  waiter.join();
}

TEST(CpuStreams, AbortReleasesAWaiter) {
  CpuDevice device;
  auto stream = device.CreateStream(StreamOptions{"calc"}).value();
  auto events = device.CreateEvents(1).value();
  std::atomic<bool> abort{false};
  std::thread waiter([&] {
    StatusOr<bool> waited = stream->Wait(*events, 0, 1, abort);
    ASSERT_TRUE(waited.ok());
    EXPECT_FALSE(*waited);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  abort = true;
  events->WakeAll();
  waiter.join();
}

// With low_priority_nice set, streams below the rank's highest priority
// run at that nice value and the highest outranks them; ranks whose
// streams share a priority, or a device without it, leave threads alike.
TEST(CpuStreams, PrioritiesBecomeNiceValues) {
  CpuDevice ranked(CpuDeviceOptions{5});
  auto calc = ranked.CreateStream(StreamOptions{"calc", 0, 1, 0}).value();
  auto mp = ranked.CreateStream(StreamOptions{"mp", 1, 1, 0}).value();
  EXPECT_EQ(static_cast<CpuStream*>(calc.get())->nice(), 5);
  EXPECT_FALSE(static_cast<CpuStream*>(calc.get())->outranks());
  EXPECT_EQ(static_cast<CpuStream*>(mp.get())->nice(), 0);
  EXPECT_TRUE(static_cast<CpuStream*>(mp.get())->outranks());
  auto flat = ranked.CreateStream(StreamOptions{"calc", 0, 0, 0}).value();
  EXPECT_EQ(static_cast<CpuStream*>(flat.get())->nice(), 0);
  EXPECT_FALSE(static_cast<CpuStream*>(flat.get())->outranks());
  CpuDevice plain;
  auto low = plain.CreateStream(StreamOptions{"calc", 0, 1, 0}).value();
  EXPECT_EQ(static_cast<CpuStream*>(low.get())->nice(), 0);
}

// A device pinned to a core keeps its streams' threads there; the others
// run where the OS puts them.
TEST(CpuStreams, APinnedDeviceKeepsItsThreadsToItsCore) {
  const std::vector<int> cores = CoresOfThisProcess();
  ASSERT_FALSE(cores.empty());
  auto affinity_after_issuing = [](Stream* stream) {
    std::vector<int> on;
    std::thread([&] {
      stream->OnIssuingThread();
      cpu_set_t set;
      if (sched_getaffinity(0, sizeof(set), &set) != 0) return;
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) on.push_back(c);
      }
    }).join();
    return on;
  };
  CpuDeviceOptions pinned;
  pinned.core = cores.back();
  CpuDevice device(pinned);
  auto calc = device.CreateStream(StreamOptions{"calc"}).value();
  auto mp = device.CreateStream(StreamOptions{"mp", 1, 1, 0}).value();
  EXPECT_EQ(affinity_after_issuing(calc.get()), std::vector<int>{cores.back()});
  EXPECT_EQ(affinity_after_issuing(mp.get()), std::vector<int>{cores.back()});
  CpuDevice free_device;
  auto any = free_device.CreateStream(StreamOptions{"calc"}).value();
  EXPECT_EQ(affinity_after_issuing(any.get()), cores);
}

TEST(CpuDevice, CopiesAndFills) {
  CpuDevice device;
  auto stream = device.CreateStream(StreamOptions{"calc"}).value();
  Tensor t;
  ASSERT_TRUE(t.Resize(TensorMeta{proto::FP32, {4}}, &device, stream.get()).ok());
  EXPECT_EQ(t.device_type(), DeviceType::kCpu);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  ASSERT_TRUE(device.Memset(t.raw_data(), 0, t.bytes(), stream.get()).ok());
  const std::vector<float> host = {1, 2, 3, 4};
  ASSERT_TRUE(device.CopyFromHost(t.raw_data(), host.data(), 8, stream.get()).ok());
  EXPECT_EQ(t.ToFloatVector(), (std::vector<float>{1, 2, 0, 0}));
}

// A host mirror keeps aliasing: the members of a flat buffer stay views of
// one buffer, so a write through one member's mirror lands in the buffer;
// copied back, the scope's buffer and every view of it see it.
TEST(CpuDevice, EachDeviceReusesTheMemoryItLetGo) {
  if (!HostMemoryCache::kCaches)
    GTEST_SKIP() << "the host memory cache is off under AddressSanitizer";
  // Two ranks of one process, each with its device: a block rank 0 let go
  // is in rank 0's core's cache, and serves rank 0's next tensor, not
  // rank 1's (which would then write lines the other core holds).
  CpuDevice rank0;
  CpuDevice rank1;
  constexpr int64_t kBytes = 3 << 20;
  std::shared_ptr<void> a = rank0.Allocate(kBytes, nullptr).value();
  std::shared_ptr<void> b = rank1.Allocate(kBytes, nullptr).value();
  void* rank0_block = a.get();
  void* rank1_block = b.get();
  a.reset();  // rank 0's first: the oldest block of that size
  b.reset();
  std::shared_ptr<void> c = rank1.Allocate(kBytes, nullptr).value();
  std::shared_ptr<void> d = rank0.Allocate(kBytes, nullptr).value();
  EXPECT_EQ(c.get(), rank1_block);
  EXPECT_EQ(d.get(), rank0_block);
}

TEST(DevicePlacement, AMirrorKeepsViewsOfOneBufferAndCopiesBack) {
  CpuDevice device;
  auto stream = device.CreateStream(StreamOptions{"io"}).value();
  Scope scope;
  Tensor* flat = scope.Var("flat");
  *flat = MakeTensor({6}, std::vector<float>{1, 2, 3, 4, 5, 6});
  *scope.Var("w") = flat->View(0, {2, 2});
  *scope.Var("b") = flat->View(4, {2});
  *scope.Var("lone") = MakeTensor({1}, std::vector<float>{9});
  scope.Var("empty");  // no data: not mirrored
  auto mirror = MirrorOnHost(scope, &device, stream.get()).value();
  EXPECT_EQ(mirror->LocalNames(), (std::vector<std::string>{"b", "flat", "lone", "w"}));
  Tensor* mw = mirror->FindLocal("w");
  Tensor* mb = mirror->FindLocal("b");
  EXPECT_EQ(mw->storage(), mirror->FindLocal("flat")->storage());
  EXPECT_EQ(mb->storage(), mw->storage());
  EXPECT_NE(mw->storage(), scope.FindLocal("w")->storage());  // a copy
  EXPECT_EQ(mb->ToFloatVector(), (std::vector<float>{5, 6}));
  mb->data<float>()[1] = 60;
  mirror->FindLocal("lone")->data<float>()[0] = 90;
  EXPECT_EQ(scope.FindLocal("b")->ToFloatVector(), (std::vector<float>{5, 6}));
  ASSERT_TRUE(CopyMirrorBack(*mirror, &scope, &device, stream.get()).ok());
  EXPECT_EQ(flat->ToFloatVector(), (std::vector<float>{1, 2, 3, 4, 5, 60}));
  EXPECT_EQ(scope.FindLocal("b")->ToFloatVector(), (std::vector<float>{5, 60}));
  EXPECT_EQ(scope.FindLocal("lone")->ToFloatVector(), (std::vector<float>{90}));
}

// A mirror whose tensor was given another shape cannot go back.
TEST(DevicePlacement, AReshapedMirrorIsRefused) {
  CpuDevice device;
  auto stream = device.CreateStream(StreamOptions{"io"}).value();
  Scope scope;
  *scope.Var("w") = MakeTensor({2}, std::vector<float>{1, 2});
  auto mirror = MirrorOnHost(scope, &device, stream.get()).value();
  mirror->FindLocal("w")->Resize(TensorMeta{proto::FP32, {3}});
  const Status s = CopyMirrorBack(*mirror, &scope, &device, stream.get());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("'w'"), std::string::npos) << s;
}

// The serial executor on a Device (what the op profiler times a device's
// kernels with) computes what it computes on the host, its outputs in the
// device's memory.
TEST(DeviceSerialExecutor, ACpuDeviceRunsAsTheHostDoes) {
  RegisterAllOps();
  Program p;
  Block& b = p.global_block();
  proto::VarDesc* x = b.AddVar("x");
  x->add_shape(3);
  x->set_is_data(true);
  ASSERT_TRUE(AppendOpInferShapes(
                  b, OpDescBuilder("scale").Input("X", "x").Output("Out", "y").Attr("scale", 2.0f))
                  .ok());
  CpuDevice device;
  auto stream = device.CreateStream(StreamOptions{"calc"}).value();
  SerialExecutorOptions options;
  options.fetch = {"y"};
  options.device = &device;
  options.stream = stream.get();
  Scope scope;
  *scope.Var("x") = MakeTensor({3}, std::vector<float>{1, 2, 3});
  auto exec = SerialExecutor::Create(p, &scope, options).value();
  ASSERT_TRUE(exec->Run().ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(scope.FindLocal("y")->ToFloatVector(), (std::vector<float>{2, 4, 6}));
}

TEST(Devices, ParseNamesEveryBackendAndRejectsOthers) {
  EXPECT_EQ(ParseDeviceType("cpu").value(), DeviceType::kCpu);
  EXPECT_EQ(ParseDeviceType("cuda").value(), DeviceType::kCuda);
  const Status bad = ParseDeviceType("tpu").status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("'tpu'"), std::string::npos) << bad;
}

#ifdef LOOM_WITH_CUDA
// Loom's priorities map linearly onto CUDA's range, the highest onto the
// most urgent; one priority for all gives every stream the default.
TEST(CudaStreams, PrioritiesMapOntoTheDeviceRange) {
  EXPECT_EQ(CudaPriorityFor(2, 0, 2, 0, -5), -5);
  EXPECT_EQ(CudaPriorityFor(0, 0, 2, 0, -5), 0);
  EXPECT_EQ(CudaPriorityFor(1, 0, 2, 0, -4), -2);
  EXPECT_EQ(CudaPriorityFor(3, 3, 3, 0, -5), 0);
  EXPECT_EQ(CudaPriorityFor(1, 0, 1, 0, 0), 0);
}

TEST(CudaDevice, WithoutADeviceCreationSaysWhy) {
  const CudaProbe probe = ProbeCuda();
  if (probe.devices > 0) GTEST_SKIP() << probe.devices << " CUDA device(s) here";
  const Status s = CudaDevice::Create(0).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("no CUDA device"), std::string::npos) << s;
}

// The device tests below need a GPU.
#define LOOM_NEED_CUDA_DEVICE()                                                          \
  const CudaProbe probe = ProbeCuda();                                                   \
  if (probe.devices == 0) {                                                              \
    GTEST_SKIP() << "no CUDA device (" << probe.why_none << "): compiled and linked only"; \
  }

// A copy on one stream after an event recorded on another sees the fill
// the event follows, though the fill is large and the copy's stream idle.
TEST(CudaStreams, ACrossStreamDependencyIsHonoured) {
  LOOM_NEED_CUDA_DEVICE();
  auto device = CudaDevice::Create(0).value();
  auto fill = device->CreateStream(StreamOptions{"calc", 0, 1, 0}).value();
  auto copy = device->CreateStream(StreamOptions{"mp", 1, 1, 0}).value();
  auto events = device->CreateEvents(1).value();
  const int64_t n = 64 << 20;
  auto memory = device->Allocate(n, fill.get()).value();
  ASSERT_TRUE(device->Memset(memory.get(), 0, n, fill.get()).ok());
  ASSERT_TRUE(device->Memset(memory.get(), 7, n, fill.get()).ok());
  ASSERT_TRUE(fill->Record(*events, 0, 1).ok());
  std::atomic<bool> abort{false};
  ASSERT_TRUE(copy->Wait(*events, 0, 1, abort).value());
  std::vector<uint8_t> host(n);
  ASSERT_TRUE(device->CopyToHost(host.data(), memory.get(), n, copy.get()).ok());
  for (int64_t i = 0; i < n; i += 4096) ASSERT_EQ(host[i], 7) << i;
}

TEST(CudaStreams, TheHighestPriorityStreamIsTheMostUrgent) {
  LOOM_NEED_CUDA_DEVICE();
  auto device = CudaDevice::Create(0).value();
  auto calc = device->CreateStream(StreamOptions{"calc", 0, 1, 0}).value();
  auto mp = device->CreateStream(StreamOptions{"mp", 1, 1, 0}).value();
  int least = 0, greatest = 0;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  if (least == greatest) GTEST_SKIP() << "this device has one stream priority";
  EXPECT_EQ(static_cast<CudaStream*>(mp.get())->cuda_priority(), greatest);
  EXPECT_EQ(static_cast<CudaStream*>(calc.get())->cuda_priority(), least);
}

// A freed block is reused by its stream at once; one used on another
// stream too is reused only after that stream's work has passed.
TEST(CudaAllocator, ReusesBlocksInStreamOrder) {
  LOOM_NEED_CUDA_DEVICE();
  auto device = CudaDevice::Create(0).value();
  auto a = device->CreateStream(StreamOptions{"calc"}).value();
  auto b = device->CreateStream(StreamOptions{"mp"}).value();
  void* first = nullptr;
  {
    auto m = device->Allocate(1 << 20, a.get()).value();
    first = m.get();
  }
  auto again = device->Allocate(1 << 20, a.get()).value();
  EXPECT_EQ(again.get(), first);
  device->MarkUsedOn(again, b.get());
  again.reset();
  ASSERT_TRUE(b->Synchronize().ok());
  auto third = device->Allocate(1 << 20, a.get()).value();
  EXPECT_EQ(third.get(), first);  // b's work has passed
  EXPECT_EQ(device->memory_stats().device_allocations, 1);
}
// State placed on the device comes back as it went, aliasing kept.
TEST(CudaPlacement, AScopeGoesToTheDeviceAndBack) {
  LOOM_NEED_CUDA_DEVICE();
  auto device = CudaDevice::Create(0).value();
  auto io = device->CreateStream(StreamOptions{"io"}).value();
  Scope scope;
  Tensor* flat = scope.Var("flat");
  *flat = MakeTensor({4}, std::vector<float>{1, 2, 3, 4});
  *scope.Var("b") = flat->View(2, {2});
  ASSERT_TRUE(PlaceScopeOn(&scope, device.get(), io.get()).ok());
  EXPECT_EQ(flat->device_type(), DeviceType::kCuda);
  EXPECT_EQ(scope.FindLocal("b")->storage(), flat->storage());
  auto mirror = MirrorOnHost(scope, device.get(), io.get()).value();
  EXPECT_EQ(mirror->FindLocal("b")->ToFloatVector(), (std::vector<float>{3, 4}));
}
#endif

}  // namespace
}  // namespace loom
