#include "executor/comm/nccl_communicator.h"

#include <algorithm>
#include <set>
#include <utility>

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

// What a collective that timed out was waiting for, as far as one member
// can tell: NCCL does not say which peer of the ring is late.
constexpr char kCollectiveWait[] =
    " (a member did not make the same call, or is stuck or gone)";

bool IsReducible(DataType dtype) {
  return dtype == proto::FP32 || dtype == proto::FP64 || dtype == proto::BF16 ||
         dtype == proto::FP16;
}

ncclDataType_t NcclType(DataType dtype) {
  switch (dtype) {
    case proto::FP64: return ncclFloat64;
    case proto::BF16: return ncclBfloat16;
    case proto::FP16: return ncclFloat16;
    default: return ncclFloat32;
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kSum:
      break;
  }
  return ncclSum;
}

bool Failed(ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; }

}  // namespace

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const std::string& name, const std::vector<int>& members, int global_rank,
    std::shared_ptr<gloo::rendezvous::Store> store,
    const std::string& key_prefix, int cuda_device, int stream_priority,
    const CommOptions& options) {
  LOOM_ASSIGN_OR_RETURN(const int rank, GroupRankOf(name, members, global_rank, options));
  NcclLaneSpec spec;
  spec.group = name;
  spec.what = "setup";
  spec.members = members;
  spec.rank = rank;
  spec.store = store.get();
  spec.key = StrCat(key_prefix, "/nccl");
  spec.cuda_device = cuda_device;
  spec.stream_priority = stream_priority;
  spec.timeout = options.timeout;
  auto lane = NcclLane::Join(spec);
  if (!lane.ok()) return lane.status();
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(
      name, members, rank, std::move(store), key_prefix, cuda_device,
      stream_priority, options));
  comm->group_lane_ = std::move(lane).value();
  return comm;
}

NcclCommunicator::NcclCommunicator(
    std::string name, std::vector<int> members, int rank,
    std::shared_ptr<gloo::rendezvous::Store> store, std::string key_prefix,
    int cuda_device, int stream_priority, const CommOptions& options)
    : name_(std::move(name)),
      members_(std::move(members)),
      rank_(rank),
      store_(std::move(store)),
      key_prefix_(std::move(key_prefix)),
      cuda_device_(cuda_device),
      stream_priority_(stream_priority),
      options_(options) {
  for (size_t q = 0; q < members_.size(); ++q) {
    sends_.push_back(std::make_unique<Direction>());
    recvs_.push_back(std::make_unique<Direction>());
  }
}

NcclCommunicator::~NcclCommunicator() = default;

Status NcclCommunicator::AllReduce(const std::vector<Tensor*>& tensors,
                                   ReduceOp op) {
  const char* kOp = "all_reduce";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  if (tensors.empty()) return Status::OK();
  int64_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor* t = tensors[i];
    if (t == nullptr) return Invalid(kOp, StrCat("tensor ", i, " is null"));
    if (!IsReducible(t->dtype()) || t->dtype() != tensors[0]->dtype()) {
      return Invalid(kOp, StrCat("tensor ", i, " is ",
                                 DataTypeName(t->dtype()),
                                 "; a bucket is all of one float dtype (fp32, fp64, bf16 or fp16)"));
    }
    LOOM_RETURN_IF_ERROR(CheckOnDevice(kOp, "a tensor of the bucket", *t));
    bytes += t->bytes();
  }
  const ncclDataType_t type = NcclType(tensors[0]->dtype());
  const std::string what =
      StrCat(name_, ": all_reduce (", ReduceOpName(op), ") of ",
             tensors.size(), tensors.size() == 1 ? " tensor (" : " tensors (",
             FormatBytes(bytes), ")");
  return RunCollective(what, [&](ncclComm_t comm, cudaStream_t stream) {
    for (Tensor* t : tensors) {
      if (t->numel() == 0) continue;
      const ncclResult_t r = ncclAllReduce(t->raw_data(), t->raw_data(),
                                           static_cast<size_t>(t->numel()),
                                           type, NcclOp(op), comm, stream);
      if (Failed(r)) return r;
    }
    return ncclSuccess;
  });
}

Status NcclCommunicator::AllGather(const Tensor& in, Tensor* out) {
  const char* kOp = "all_gather";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  LOOM_RETURN_IF_ERROR(CheckOnDevice(kOp, "the input", in));
  if (in.rank() < 1) return Invalid(kOp, "the input is a scalar");
  TensorMeta expected = in.meta();
  expected.shape[0] *= size();
  LOOM_RETURN_IF_ERROR(CheckOut(kOp, expected, out));
  const std::string what = StrCat(name_, ": all_gather of ",
                                  FormatBytes(in.bytes()), " per member");
  return RunCollective(what, [&](ncclComm_t comm, cudaStream_t stream) {
    if (in.bytes() == 0) return ncclSuccess;
    // Bytes, whatever the dtype: nothing is reduced.
    return ncclAllGather(in.raw_data(), out->raw_data(),
                         static_cast<size_t>(in.bytes()), ncclUint8, comm,
                         stream);
  });
}

Status NcclCommunicator::ReduceScatter(const Tensor& in, Tensor* out,
                                       ReduceOp op) {
  const char* kOp = "reduce_scatter";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  LOOM_RETURN_IF_ERROR(CheckOnDevice(kOp, "the input", in));
  if (!IsReducible(in.dtype())) {
    return Invalid(kOp, StrCat("the input is ", DataTypeName(in.dtype()),
                               ", not FP32 or FP64"));
  }
  if (in.rank() < 1 || in.dim(0) % size() != 0) {
    return Invalid(kOp, StrCat("the input ", MetaToString(in.meta()),
                               " does not split into ", size(),
                               " equal parts along dim 0"));
  }
  TensorMeta expected = in.meta();
  expected.shape[0] /= size();
  LOOM_RETURN_IF_ERROR(CheckOut(kOp, expected, out));
  const size_t count = static_cast<size_t>(in.numel() / size());
  const std::string what =
      StrCat(name_, ": reduce_scatter (", ReduceOpName(op), ") of ",
             FormatBytes(in.bytes()));
  return RunCollective(what, [&](ncclComm_t comm, cudaStream_t stream) {
    if (count == 0) return ncclSuccess;
    return ncclReduceScatter(in.raw_data(), out->raw_data(), count,
                             NcclType(in.dtype()), NcclOp(op), comm, stream);
  });
}

Status NcclCommunicator::Broadcast(Tensor* t, int root) {
  const char* kOp = "broadcast";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  if (root < 0 || root >= size()) {
    return Invalid(kOp, StrCat("root ", root, " is not a member (", size(),
                               " members)"));
  }
  if (t == nullptr) return Invalid(kOp, "no tensor");
  LOOM_RETURN_IF_ERROR(CheckOnDevice(kOp, "the tensor", *t));
  const std::string what =
      StrCat(name_, ": broadcast of ", FormatBytes(t->bytes()), " from rank ",
             members_[root]);
  return RunCollective(what, [&](ncclComm_t comm, cudaStream_t stream) {
    if (t->bytes() == 0) return ncclSuccess;
    return ncclBroadcast(t->raw_data(), t->raw_data(),
                         static_cast<size_t>(t->bytes()), ncclUint8, root,
                         comm, stream);
  });
}

Status NcclCommunicator::Send(const Tensor& t, int peer) {
  const char* kOp = "send";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  LOOM_RETURN_IF_ERROR(CheckPeer(kOp, peer));
  LOOM_RETURN_IF_ERROR(CheckOnDevice(kOp, "the tensor", t));
  // The receiver's byte count is the same (the contract): both skip.
  if (t.bytes() == 0) return Status::OK();
  Direction* d = sends_[peer].get();
  std::lock_guard<std::mutex> lock(d->mu);
  auto lane = PairLane(d, peer, /*sending=*/true);
  if (!lane.ok()) return lane.status();
  const std::string what = StrCat(name_, ": send of ", FormatBytes(t.bytes()),
                                  " to rank ", members_[peer]);
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  Status s = (*lane)->Activate(what);
  if (!s.ok()) return Broken(s);
  s = (*lane)->CheckIssued(
      ncclSend(t.raw_data(), static_cast<size_t>(t.bytes()), ncclUint8,
               /*peer=*/1, (*lane)->comm(), (*lane)->stream()),
      what);
  if (!s.ok()) return Broken(s);
  return Finish(*lane, what,
                StrCat(" waiting for rank ", members_[peer], " to receive"),
                deadline);
}

Status NcclCommunicator::Recv(Tensor* t, int peer) {
  const char* kOp = "recv";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  LOOM_RETURN_IF_ERROR(CheckPeer(kOp, peer));
  if (t == nullptr) return Invalid(kOp, "no tensor");
  LOOM_RETURN_IF_ERROR(CheckOnDevice(kOp, "the tensor", *t));
  if (t->bytes() == 0) return Status::OK();
  Direction* d = recvs_[peer].get();
  std::lock_guard<std::mutex> lock(d->mu);
  auto lane = PairLane(d, peer, /*sending=*/false);
  if (!lane.ok()) return lane.status();
  const std::string what = StrCat(name_, ": recv of ", FormatBytes(t->bytes()),
                                  " from rank ", members_[peer]);
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  Status s = (*lane)->Activate(what);
  if (!s.ok()) return Broken(s);
  s = (*lane)->CheckIssued(
      ncclRecv(t->raw_data(), static_cast<size_t>(t->bytes()), ncclUint8,
               /*peer=*/0, (*lane)->comm(), (*lane)->stream()),
      what);
  if (!s.ok()) return Broken(s);
  return Finish(*lane, what,
                StrCat(" waiting for rank ", members_[peer], " to send"),
                deadline);
}

StatusOr<NcclLane*> NcclCommunicator::PairLane(Direction* d, int peer,
                                               bool sending) {
  if (d->lane != nullptr) return d->lane.get();
  // The sender is lane rank 0 and makes the id.
  const int src = sending ? rank_ : peer;
  const int dst = sending ? peer : rank_;
  NcclLaneSpec spec;
  spec.group = name_;
  spec.what = StrCat("setup of the ", sending ? "send to" : "recv from",
                     " rank ", members_[peer]);
  spec.members = {members_[src], members_[dst]};
  spec.rank = sending ? 0 : 1;
  spec.store = store_.get();
  spec.key = StrCat(key_prefix_, "/nccl/p2p_", src, "_to_", dst);
  spec.cuda_device = cuda_device_;
  spec.stream_priority = stream_priority_;
  spec.timeout = options_.timeout;
  auto lane = NcclLane::Join(spec);
  if (!lane.ok()) return Broken(lane.status());
  d->lane = std::move(lane).value();
  return d->lane.get();
}

template <typename IssueFn>
Status NcclCommunicator::RunCollective(const std::string& what,
                                       IssueFn issue) {
  std::lock_guard<std::mutex> lock(collective_mu_);
  // Another thread's collective may have broken it while this one waited.
  if (broken_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> error_lock(error_mu_);
    return Status(StatusCode::kUnavailable,
                  StrCat(what, ": unusable after an earlier error: ",
                         first_error_.message()));
  }
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  NcclLane* lane = group_lane_.get();
  Status s = lane->Activate(what);
  if (!s.ok()) return Broken(s);
  // One group: a bucket's tensors go out as one NCCL launch.
  ncclResult_t r = ncclGroupStart();
  if (!Failed(r)) {
    const ncclResult_t issued = issue(lane->comm(), lane->stream());
    const ncclResult_t ended = ncclGroupEnd();  // closes it even after a failure
    r = Failed(issued) ? issued : ended;
  }
  s = lane->CheckIssued(r, what);
  if (!s.ok()) return Broken(s);
  return Finish(lane, what, size() > 1 ? kCollectiveWait : "", deadline);
}

Status NcclCommunicator::Finish(NcclLane* lane, const std::string& what,
                                const std::string& waiting,
                                Clock::time_point deadline) {
  Status s = lane->Wait(what, waiting, deadline);
  return s.ok() ? s : Broken(s);
}

Status NcclCommunicator::CheckUsable(const char* op) const {
  if (!broken_.load(std::memory_order_acquire)) return Status::OK();
  std::lock_guard<std::mutex> lock(error_mu_);
  return Status(StatusCode::kUnavailable,
                StrCat(name_, ": ", op, ": unusable after an earlier error: ",
                       first_error_.message()));
}

Status NcclCommunicator::Broken(const Status& status) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (first_error_.ok()) first_error_ = status;
  broken_.store(true, std::memory_order_release);
  return status;
}

Status NcclCommunicator::Invalid(const char* op,
                                 const std::string& what) const {
  return InvalidArgument(name_, ": ", op, ": ", what);
}

Status NcclCommunicator::CheckPeer(const char* op, int peer) const {
  if (peer < 0 || peer >= size() || peer == rank_) {
    return Invalid(op, StrCat("peer ", peer, " is not another member (rank ",
                              rank_, " of ", size(), ")"));
  }
  return Status::OK();
}

Status NcclCommunicator::CheckOnDevice(const char* op, const char* which,
                                       const Tensor& t) const {
  if (!t.initialized()) return Invalid(op, StrCat(which, " has no storage"));
  if (t.device_type() != DeviceType::kCuda) {
    return FailedPrecondition(name_, ": ", op, ": ", which, " is in ",
                              DeviceTypeName(t.device_type()),
                              " memory; NCCL moves CUDA device memory");
  }
  return Status::OK();
}

Status NcclCommunicator::CheckOut(const char* op, const TensorMeta& expected,
                                  const Tensor* out) const {
  if (out == nullptr) return Invalid(op, "no output tensor");
  if (!out->initialized()) {
    return FailedPrecondition(
        name_, ": ", op, ": the output has no storage; an NCCL communicator "
        "cannot allocate it, so it must be ", MetaToString(expected),
        " on the device already");
  }
  if (out->meta() != expected) {
    return Invalid(op, StrCat("the output is ", MetaToString(out->meta()),
                              ", expected ", MetaToString(expected)));
  }
  return CheckOnDevice(op, "the output", *out);
}

}  // namespace loom
