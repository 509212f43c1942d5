#include "executor/cuda/cuda_allocator.h"

#include <algorithm>

#include "executor/cuda/cuda_status.h"

namespace loom {

CudaAllocator::~CudaAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  cudaSetDevice(device_);
  for (Pending& p : pending_) {
    for (cudaEvent_t e : p.events) cudaEventSynchronize(e);
  }
  CollectPendingLocked();
  EmptyCacheLocked();
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  // Blocks still live (a tensor outliving its device) are the process's
  // to lose at exit; freeing them under a user would be worse.
}

StatusOr<std::shared_ptr<void>> CudaAllocator::Allocate(int64_t bytes, cudaStream_t stream) {
  const int64_t size = RoundUp(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  CollectPendingLocked();
  void* ptr = nullptr;
  int64_t got = size;
  auto it = free_.lower_bound({stream, size});
  if (it != free_.end() && it->first.first == stream && it->first.second <= 2 * size) {
    ptr = it->second;
    got = it->first.second;
    stats_.cached -= got;
    free_.erase(it);
  } else {
    LOOM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), StrCat("cuda:", device_));
    cudaError_t e = cudaMalloc(&ptr, size);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      EmptyCacheLocked();
      e = cudaMalloc(&ptr, size);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      return ResourceExhausted("cuda:", device_, ": out of memory allocating ", bytes,
                               " bytes (", stats_.in_use, " in use, ", stats_.cached,
                               " cached): ", cudaGetErrorString(e));
    }
    ++stats_.device_allocations;
  }
  live_[ptr] = Block{ptr, got, stream, {}};
  stats_.in_use += got;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return std::shared_ptr<void>(ptr, [this](void* p) { Release(p); });
}

void CudaAllocator::MarkUsedOn(const void* memory, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(const_cast<void*>(memory));
  if (it == live_.end() || it->second.stream == stream) return;
  std::vector<cudaStream_t>& on = it->second.used_on;
  if (std::find(on.begin(), on.end(), stream) == on.end()) on.push_back(stream);
}

void CudaAllocator::Release(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  Block block = std::move(it->second);
  live_.erase(it);
  stats_.in_use -= block.size;
  stats_.cached += block.size;
  if (block.used_on.empty()) {
    free_.emplace(std::make_pair(block.stream, block.size), block.ptr);
    return;
  }
  Pending pending{std::move(block), {}};
  for (cudaStream_t s : pending.block.used_on) {
    StatusOr<cudaEvent_t> event = EventLocked();
    // Without an event the block cannot be proven idle: wait for the
    // stream instead (slow, but never wrong).
    if (!event.ok() || cudaEventRecord(*event, s) != cudaSuccess) {
      cudaStreamSynchronize(s);
      if (event.ok()) spare_events_.push_back(*event);
      continue;
    }
    pending.events.push_back(*event);
  }
  pending_.push_back(std::move(pending));
}

void CudaAllocator::CollectPendingLocked() {
  auto done = [&](Pending& p) {
    for (cudaEvent_t e : p.events) {
      if (cudaEventQuery(e) == cudaErrorNotReady) return false;
    }
    cudaGetLastError();
    for (cudaEvent_t e : p.events) spare_events_.push_back(e);
    free_.emplace(std::make_pair(p.block.stream, p.block.size), p.block.ptr);
    return true;
  };
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), done), pending_.end());
}

void CudaAllocator::EmptyCacheLocked() {
  for (const auto& [key, ptr] : free_) {
    cudaFree(ptr);
    stats_.cached -= key.second;
  }
  free_.clear();
}

StatusOr<cudaEvent_t> CudaAllocator::EventLocked() {
  if (!spare_events_.empty()) {
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  LOOM_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                            StrCat("cuda:", device_, ": cudaEventCreate"));
  return e;
}

CudaAllocator::Stats CudaAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace loom
