#include "executor/cuda/cuda_device.h"

#include "executor/cuda/cuda_probe.h"
#include "executor/cuda/cuda_status.h"
#include "executor/cuda/cuda_stream.h"

namespace loom {
namespace {

// The stream's handle, or the legacy default stream for none (setup
// outside the executor's streams).
cudaStream_t NativeOf(Stream* stream) {
  return stream == nullptr ? nullptr : static_cast<cudaStream_t>(stream->native_handle());
}

}  // namespace

CudaDevice::CudaDevice(int ordinal)
    : ordinal_(ordinal), name_(StrCat("cuda:", ordinal)), allocator_(ordinal) {}

StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int ordinal) {
  const CudaProbe probe = ProbeCuda();
  if (probe.devices == 0) {
    return Status(StatusCode::kUnavailable,
                  StrCat("--device cuda: no CUDA device (", probe.why_none, "; runtime ",
                         probe.runtime_version, ", driver ", probe.driver_version, ")"));
  }
  if (ordinal < 0 || ordinal >= probe.devices) {
    return InvalidArgument("cuda:", ordinal, " does not exist: this process sees ",
                           probe.devices, " device(s) (CUDA_VISIBLE_DEVICES)");
  }
  LOOM_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), StrCat("cuda:", ordinal));
  return std::unique_ptr<CudaDevice>(new CudaDevice(ordinal));
}

StatusOr<std::unique_ptr<Stream>> CudaDevice::CreateStream(const StreamOptions& options) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CudaStream> stream,
                        CudaStream::Create(ordinal_, options, &room_));
  return std::unique_ptr<Stream>(std::move(stream));
}

StatusOr<std::unique_ptr<EventArray>> CudaDevice::CreateEvents(int n) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CudaEventArray> events,
                        CudaEventArray::Create(ordinal_, n, &room_));
  return std::unique_ptr<EventArray>(std::move(events));
}

StatusOr<std::shared_ptr<void>> CudaDevice::Allocate(int64_t bytes, Stream* stream) {
  return allocator_.Allocate(bytes, NativeOf(stream));
}

void CudaDevice::MarkUsedOn(const std::shared_ptr<void>& memory, Stream* stream) {
  if (memory != nullptr) allocator_.MarkUsedOn(memory.get(), NativeOf(stream));
}

// The runtime's current device is per host thread, and the trainer's
// threads (feeds, the loss, checkpoints) serve ranks on several devices.
Status CudaDevice::MakeCurrent() const {
  return CudaStatus(cudaSetDevice(ordinal_), name_);
}

Status CudaDevice::Copy(void* dst, const void* src, int64_t bytes, Stream* stream) {
  if (bytes == 0) return Status::OK();
  LOOM_RETURN_IF_ERROR(MakeCurrent());
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, NativeOf(stream)),
                    StrCat(name_, ": copy of ", bytes, " bytes"));
}

Status CudaDevice::CopyFromHost(void* dst, const void* host_src, int64_t bytes, Stream* stream) {
  if (bytes == 0) return Status::OK();
  LOOM_RETURN_IF_ERROR(MakeCurrent());
  return CudaStatus(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, NativeOf(stream)),
                    StrCat(name_, ": copy of ", bytes, " bytes from the host"));
}

Status CudaDevice::CopyToHost(void* host_dst, const void* src, int64_t bytes, Stream* stream) {
  if (bytes == 0) return Status::OK();
  const std::string what = StrCat(name_, ": copy of ", bytes, " bytes to the host");
  LOOM_RETURN_IF_ERROR(MakeCurrent());
  LOOM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, NativeOf(stream)), what);
  return CudaStatus(cudaStreamSynchronize(NativeOf(stream)), what);
}

Status CudaDevice::Memset(void* dst, int byte, int64_t bytes, Stream* stream) {
  if (bytes == 0) return Status::OK();
  LOOM_RETURN_IF_ERROR(MakeCurrent());
  return CudaStatus(cudaMemsetAsync(dst, byte, bytes, NativeOf(stream)),
                    StrCat(name_, ": memset of ", bytes, " bytes"));
}

}  // namespace loom
