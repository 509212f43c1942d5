#include "executor/comm/gloo_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>

#include "executor/comm/deadline_store.h"
#include "executor/comm/reduce_fold.h"
#include "executor/cpu/host_threads.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

bool Contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// Cuts `total` elements into n near-equal parts (the first total % n one
// longer): where each starts and how many it has.
void SplitEven(int64_t total, int n, std::vector<int64_t>* offsets,
               std::vector<int64_t>* counts) {
  offsets->assign(n, 0);
  counts->assign(n, 0);
  int64_t at = 0;
  for (int q = 0; q < n; ++q) {
    (*counts)[q] = total / n + (q < total % n ? 1 : 0);
    (*offsets)[q] = at;
    at += (*counts)[q];
  }
}

bool IsReducible(DataType dtype) {
  return dtype == proto::FP32 || dtype == proto::FP64 || dtype == proto::BF16 ||
         dtype == proto::FP16;
}

// Calls fn(T*) with `data` as the element type of `dtype` (a reducible one).
template <typename Fn>
Status WithElementType(DataType dtype, void* data, Fn fn) {
  switch (dtype) {
    case proto::FP64: return fn(static_cast<double*>(data));
    case proto::BF16: return fn(static_cast<bfloat16*>(data));
    case proto::FP16: return fn(static_cast<float16*>(data));
    default: return fn(static_cast<float*>(data));
  }
}

// Parses the group rank at the end of a rendezvous key ("3", "rank_3").
int TrailingRank(const std::string& key) {
  size_t i = key.size();
  while (i > 0 && key[i - 1] >= '0' && key[i - 1] <= '9') --i;
  if (i == key.size()) return -1;
  return std::stoi(key.substr(i));
}

}  // namespace

StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    const std::string& name, const std::vector<int>& members, int global_rank,
    gloo::rendezvous::Store* store, const std::string& key_prefix,
    const std::shared_ptr<gloo::transport::Device>& device,
    const CommOptions& options) {
  const std::string where = StrCat("setup on group ", name);
  LOOM_ASSIGN_OR_RETURN(const int rank, GroupRankOf(name, members, global_rank, options));
  const int n = static_cast<int>(members.size());
  if (n == 1) {
    return std::unique_ptr<GlooCommunicator>(
        new GlooCommunicator(name, members, rank, nullptr, options));
  }
  if (store == nullptr || device == nullptr) {
    return InvalidArgument(where, ": a group of ", n,
                           " needs a store and a device");
  }

  const Clock::time_point deadline = Clock::now() + options.timeout;
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, n);
  context->setTimeout(options.timeout);
  gloo::rendezvous::PrefixStore prefixed(key_prefix, *store);
  DeadlineStore bounded(&prefixed, deadline);
  std::shared_ptr<gloo::transport::Device> dev = device;
  // The member the rendezvous was dealing with when it failed.
  auto culprit = [&]() -> std::string {
    if (bounded.last_keys().empty()) return "";
    int r = TrailingRank(bounded.last_keys().front());
    if (r < 0 || r >= n) return "";
    return StrCat("rank ", members[r]);
  };
  try {
    context->connectFullMesh(bounded, dev);
  } catch (const std::exception& e) {
    const std::string msg = StripGlooLocation(e.what());
    const std::string who = culprit();
    if (bounded.timed_out()) {
      return Status(
          StatusCode::kDeadlineExceeded,
          StrCat(where, ": timed out after ", FormatTimeout(options.timeout),
                 " waiting for ", who.empty() ? "a member" : who,
                 " to join (store key '", key_prefix, "/",
                 bounded.last_keys().front(), "')"));
    }
    if (Contains(msg, "already set") || Contains(msg, "already exists")) {
      return AlreadyExists(
          where, ": the store already holds keys under '", key_prefix,
          "' (another world used this store with the same job name; give "
          "each world a fresh job or store): ",
          msg);
    }
    // Gloo checks an address's size as it reads a peer's entry.
    if (Contains(msg, "bytes.size()")) {
      return DataLoss(where, ": the store's entry for ", who.empty() ? "a member" : who,
                      " under '", key_prefix,
                      "' is not an address a rank wrote (a corrupt store, or another "
                      "program's key): ",
                      msg);
    }
    if (bounded.store_failed()) {
      return Status(StatusCode::kUnavailable,
                    StrCat(where, ": the store failed",
                           bounded.last_keys().empty()
                               ? std::string()
                               : StrCat(" while waiting for ", who.empty() ? "a member" : who,
                                        " to join (store key '", key_prefix, "/",
                                        bounded.last_keys().front(), "')"),
                           ": ", msg));
    }
    return Status(StatusCode::kUnavailable,
                  StrCat(where, ": connecting to ",
                         who.empty() ? "the members" : who, " failed: ", msg));
  }
  std::unique_ptr<GlooCommunicator> comm(
      new GlooCommunicator(name, members, rank, std::move(context), options));
  LOOM_RETURN_IF_ERROR(comm->SetupBarrier(deadline));
  return comm;
}

// connectFullMesh returning on one member does not mean the others are
// done: a member that left as soon as its own setup returned could fail a
// slower peer's. So every member sends a token to every other after
// connecting, and setup ends once all tokens are in.
Status GlooCommunicator::SetupBarrier(
    std::chrono::steady_clock::time_point deadline) {
  const int n = size();
  const uint8_t token = 1;
  std::vector<uint8_t> tokens(n);
  GlooExchange call = Exchange("setup", deadline);
  for (int q = 0; q < n; ++q) {
    if (q == rank_) continue;
    call.PostRecv(q, &tokens[q], 1, MakeSlot(SlotKind::kSetup, 0, 1));
  }
  for (int q = 0; q < n; ++q) {
    if (q == rank_) continue;
    call.PostSend(q, &token, 1, MakeSlot(SlotKind::kSetup, 0, 1));
  }
  return call.WaitAll();
}

GlooCommunicator::GlooCommunicator(std::string name, std::vector<int> members,
                                   int rank,
                                   std::shared_ptr<gloo::Context> context,
                                   const CommOptions& options)
    : name_(std::move(name)),
      members_(std::move(members)),
      rank_(rank),
      options_(options),
      context_(std::move(context)),
      send_seq_(members_.size(), 0),
      recv_seq_(members_.size(), 0) {}

GlooCommunicator::~GlooCommunicator() = default;

GlooExchange GlooCommunicator::Exchange(const char* op) {
  return Exchange(op, Clock::now() + options_.timeout);
}

GlooExchange GlooCommunicator::Exchange(
    const char* op, std::chrono::steady_clock::time_point deadline) {
  return GlooExchange(context_.get(), StrCat(op, " on group ", name_), members_,
                      options_.timeout, deadline,
                      [this](const Status& s) { MarkBroken(s); });
}

Status GlooCommunicator::CheckUsable(const char* op) const {
  if (!broken_.load(std::memory_order_acquire)) return Status::OK();
  std::lock_guard<std::mutex> lock(error_mu_);
  return Status(
      StatusCode::kUnavailable,
      StrCat(op, " on group ", name_,
             ": unusable after an earlier error: ", first_error_.message()));
}

void GlooCommunicator::MarkBroken(const Status& status) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (first_error_.ok()) first_error_ = status;
  broken_.store(true, std::memory_order_release);
}

Status GlooCommunicator::Invalid(const char* op,
                                 const std::string& what) const {
  return InvalidArgument(op, " on group ", name_, ": ", what);
}

Status GlooCommunicator::CheckPeer(const char* op, int peer) const {
  if (peer < 0 || peer >= size() || peer == rank_) {
    return Invalid(op, StrCat("peer ", peer, " is not another member (rank ",
                              rank_, " of ", size(), ")"));
  }
  return Status::OK();
}

Status GlooCommunicator::PrepareOut(const char* op, const TensorMeta& expected,
                                    Tensor* out) const {
  if (out == nullptr) return Invalid(op, "no output tensor");
  if (!out->initialized()) {
    out->Resize(expected);
    return Status::OK();
  }
  if (out->meta() != expected) {
    return Invalid(op, StrCat("the output is ", MetaToString(out->meta()),
                              ", expected ", MetaToString(expected)));
  }
  return Status::OK();
}

template <typename T>
Status GlooCommunicator::ReduceChunk(GlooExchange& call, const T* in,
                                     const std::vector<int64_t>& offsets,
                                     const std::vector<int64_t>& counts, T* out,
                                     ReduceOp op, SlotKind slot_kind,
                                     uint64_t seq) {
  using A = Accumulation<T>;
  using Acc = typename A::Acc;
  const int n = size();
  const int64_t mine = counts[rank_];
  const size_t mine_bytes = mine * sizeof(T);
  // n-1 received copies of this member's chunk, then the accumulator (at an
  // offset that suits its type).
  const size_t acc_at = ((n - 1) * mine_bytes + alignof(Acc) - 1) / alignof(Acc) * alignof(Acc);
  scratch_.resize(acc_at + mine * sizeof(Acc));
  T* received = reinterpret_cast<T*>(scratch_.data());
  Acc* acc = reinterpret_cast<Acc*>(scratch_.data() + acc_at);
  auto copy_of = [&](int q) {
    return received + (q < rank_ ? q : q - 1) * mine;
  };

  std::vector<int> recv_id(n, -1);
  if (mine > 0) {
    for (int q = 0; q < n; ++q) {
      if (q == rank_) continue;
      recv_id[q] = call.PostRecv(q, copy_of(q), mine_bytes,
                                 MakeSlot(slot_kind, seq, mine_bytes));
    }
  }
  for (int q = 0; q < n; ++q) {
    if (q == rank_ || counts[q] == 0) continue;
    const size_t bytes = counts[q] * sizeof(T);
    call.PostSend(q, in + offsets[q], bytes, MakeSlot(slot_kind, seq, bytes));
  }
  // Fold in group-rank order, each copy as soon as it is here.
  if (mine > 0) {
    for (int q = 0; q < n; ++q) {
      const T* x = in + offsets[rank_];
      if (q != rank_) {
        LOOM_RETURN_IF_ERROR(call.Wait(recv_id[q]));
        x = copy_of(q);
      }
      if (q == 0) {
        for (int64_t i = 0; i < mine; ++i) acc[i] = A::Load(x[i]);
      } else {
        Fold(op, x, acc, mine);
      }
    }
    if (op == ReduceOp::kAvg) {
      const Acc divisor = static_cast<Acc>(n);
      for (int64_t i = 0; i < mine; ++i) acc[i] = acc[i] / divisor;
    }
  }
  LOOM_RETURN_IF_ERROR(call.WaitAll());
  // After the sends: `out` may overlap `in` (in-place reduce-scatter); the
  // accumulator is apart from both.
  for (int64_t i = 0; i < mine; ++i) out[i] = A::Store(acc[i]);
  return Status::OK();
}

Status GlooCommunicator::GatherChunks(GlooExchange& call, uint8_t* base,
                                      const std::vector<int64_t>& byte_offsets,
                                      const std::vector<int64_t>& byte_counts,
                                      SlotKind slot_kind, uint64_t seq) {
  const int n = size();
  std::vector<int> recv_id(n, -1);
  for (int q = 0; q < n; ++q) {
    if (q == rank_ || byte_counts[q] == 0) continue;
    recv_id[q] = call.PostRecv(q, base + byte_offsets[q], byte_counts[q],
                               MakeSlot(slot_kind, seq, byte_counts[q]));
  }
  const int64_t mine = byte_counts[rank_];
  if (mine > 0) {
    for (int q = 0; q < n; ++q) {
      if (q == rank_) continue;
      call.PostSend(q, base + byte_offsets[rank_], mine,
                    MakeSlot(slot_kind, seq, mine));
    }
  }
  for (int q = 0; q < n; ++q) {
    if (recv_id[q] >= 0) LOOM_RETURN_IF_ERROR(call.Wait(recv_id[q]));
  }
  return call.WaitAll();
}

template <typename T>
Status GlooCommunicator::RunAllReduce(T* data, int64_t numel, ReduceOp op,
                                      uint64_t seq) {
  const int n = size();
  std::vector<int64_t> offsets, counts;
  SplitEven(numel, n, &offsets, &counts);
  GlooExchange call = Exchange("allreduce");
  LOOM_RETURN_IF_ERROR(ReduceChunk<T>(call, data, offsets, counts,
                                      data + offsets[rank_], op,
                                      SlotKind::kAllReduceScatter, seq));
  std::vector<int64_t> byte_offsets(n), byte_counts(n);
  for (int q = 0; q < n; ++q) {
    byte_offsets[q] = offsets[q] * sizeof(T);
    byte_counts[q] = counts[q] * sizeof(T);
  }
  return GatherChunks(call, reinterpret_cast<uint8_t*>(data), byte_offsets,
                      byte_counts, SlotKind::kAllReduceGather, seq);
}

Status GlooCommunicator::AllReduce(const std::vector<Tensor*>& tensors,
                                   ReduceOp op) {
  constexpr const char* kOp = "allreduce";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  if (tensors.empty()) return Status::OK();
  int64_t numel = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor* t = tensors[i];
    if (t == nullptr || !t->initialized()) {
      return Invalid(kOp,
                     StrCat("tensor ", i, " of the bucket has no storage"));
    }
    if (!IsReducible(t->dtype()) || t->dtype() != tensors[0]->dtype()) {
      return Invalid(kOp, StrCat("tensor ", i, " of the bucket is ",
                                 DataTypeName(t->dtype()),
                                 "; a bucket is all of one float dtype (fp32, fp64, bf16 or fp16)"));
    }
    numel += t->numel();
  }
  // One member, or nothing to reduce: x op-folded over one member is x (and
  // x / 1 is x exactly).
  if (size() == 1 || numel == 0) return Status::OK();

  std::lock_guard<std::mutex> lock(collective_mu_);
  const uint64_t seq = collective_seq_++;
  const int64_t elem = SizeOf(tensors[0]->dtype());
  // A bucket whose tensors lie back to back (views of one flat buffer) is
  // reduced in place; any other is packed and unpacked.
  bool contiguous = true;
  for (size_t i = 1; i < tensors.size() && contiguous; ++i) {
    contiguous = tensors[i]->raw_data() ==
                 static_cast<const uint8_t*>(tensors[i - 1]->raw_data()) +
                     tensors[i - 1]->bytes();
  }
  uint8_t* data = static_cast<uint8_t*>(tensors[0]->raw_data());
  if (!contiguous) {
    pack_.resize(numel * elem);
    data = pack_.data();
    for (const Tensor* t : tensors) {
      std::memcpy(data, t->raw_data(), t->bytes());
      data += t->bytes();
    }
    data = pack_.data();
  }
  Status status = WithElementType(tensors[0]->dtype(), data, [&](auto* elements) {
    return RunAllReduce(elements, numel, op, seq);
  });
  if (status.ok() && !contiguous) {
    for (Tensor* t : tensors) {
      std::memcpy(t->raw_data(), data, t->bytes());
      data += t->bytes();
    }
  }
  return status;
}

Status GlooCommunicator::AllGather(const Tensor& in, Tensor* out) {
  constexpr const char* kOp = "allgather";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  if (!in.initialized()) return Invalid(kOp, "the input has no storage");
  if (in.rank() < 1) return Invalid(kOp, "the input is a scalar");
  TensorMeta expected = in.meta();
  expected.shape[0] *= size();
  LOOM_RETURN_IF_ERROR(PrepareOut(kOp, expected, out));
  const int64_t part = in.bytes();
  uint8_t* base = static_cast<uint8_t*>(out->raw_data());
  if (base + rank_ * part != in.raw_data()) {  // not already in place
    std::memmove(base + rank_ * part, in.raw_data(), part);
  }
  if (size() == 1 || part == 0) return Status::OK();

  std::lock_guard<std::mutex> lock(collective_mu_);
  const uint64_t seq = collective_seq_++;
  std::vector<int64_t> offsets(size()), counts(size(), part);
  for (int q = 0; q < size(); ++q) offsets[q] = q * part;
  GlooExchange call = Exchange(kOp);
  return GatherChunks(call, base, offsets, counts, SlotKind::kAllGather, seq);
}

Status GlooCommunicator::ReduceScatter(const Tensor& in, Tensor* out,
                                       ReduceOp op) {
  constexpr const char* kOp = "reduce_scatter";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  if (!in.initialized()) return Invalid(kOp, "the input has no storage");
  if (!IsReducible(in.dtype())) {
    return Invalid(kOp, StrCat("the input is ", DataTypeName(in.dtype()),
                               "; only fp32, fp64, bf16 and fp16 reduce"));
  }
  if (in.rank() < 1 || in.dim(0) % size() != 0) {
    return Invalid(kOp,
                   StrCat("dim 0 of the input ", MetaToString(in.meta()),
                          " does not split into ", size(), " equal parts"));
  }
  TensorMeta expected = in.meta();
  expected.shape[0] /= size();
  LOOM_RETURN_IF_ERROR(PrepareOut(kOp, expected, out));
  const int64_t part = out->numel();
  if (size() == 1) {
    if (out->raw_data() != in.raw_data()) {
      std::memmove(out->raw_data(), in.raw_data(), in.bytes());
    }
    return Status::OK();
  }
  if (part == 0) return Status::OK();

  std::lock_guard<std::mutex> lock(collective_mu_);
  const uint64_t seq = collective_seq_++;
  std::vector<int64_t> offsets(size()), counts(size(), part);
  for (int q = 0; q < size(); ++q) offsets[q] = q * part;
  GlooExchange call = Exchange(kOp);
  void* const in_data = const_cast<void*>(in.raw_data());
  return WithElementType(in.dtype(), in_data, [&](auto* elements) {
    using T = std::remove_pointer_t<decltype(elements)>;
    return ReduceChunk<T>(call, elements, offsets, counts, static_cast<T*>(out->raw_data()), op,
                          SlotKind::kReduceScatter, seq);
  });
}

Status GlooCommunicator::Broadcast(Tensor* t, int root) {
  constexpr const char* kOp = "broadcast";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  if (root < 0 || root >= size()) {
    return Invalid(
        kOp, StrCat("root ", root, " is not a member (group of ", size(), ")"));
  }
  if (t == nullptr || !t->initialized()) {
    return Invalid(kOp, "the tensor has no storage");
  }
  const size_t bytes = t->bytes();
  if (size() == 1 || bytes == 0) return Status::OK();

  std::lock_guard<std::mutex> lock(collective_mu_);
  const uint64_t seq = collective_seq_++;
  const uint64_t slot = MakeSlot(SlotKind::kBroadcast, seq, bytes);
  GlooExchange call = Exchange(kOp);
  if (rank_ == root) {
    for (int q = 0; q < size(); ++q) {
      if (q != root) call.PostSend(q, t->raw_data(), bytes, slot);
    }
    return call.WaitAll();
  }
  return call.Wait(call.PostRecv(root, t->raw_data(), bytes, slot));
}

Status GlooCommunicator::Send(const Tensor& t, int peer) {
  constexpr const char* kOp = "send";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  LOOM_RETURN_IF_ERROR(CheckPeer(kOp, peer));
  if (!t.initialized()) return Invalid(kOp, "the tensor has no storage");
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    seq = send_seq_[peer]++;
  }
  const size_t bytes = t.bytes();
  if (bytes == 0) return Status::OK();
  GlooExchange call = Exchange(kOp);
  return call.Wait(call.PostSend(peer, t.raw_data(), bytes,
                                 MakeSlot(SlotKind::kP2p, seq, bytes)));
}

Status GlooCommunicator::Recv(Tensor* t, int peer) {
  constexpr const char* kOp = "recv";
  LOOM_RETURN_IF_ERROR(CheckUsable(kOp));
  LOOM_RETURN_IF_ERROR(CheckPeer(kOp, peer));
  if (t == nullptr || !t->initialized()) {
    return Invalid(kOp,
                   "the receiving tensor has no storage (set its meta "
                   "and allocate it first)");
  }
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(p2p_mu_);
    seq = recv_seq_[peer]++;
  }
  const size_t bytes = t->bytes();
  if (bytes == 0) return Status::OK();
  GlooExchange call = Exchange(kOp);
  return call.Wait(call.PostRecv(peer, t->raw_data(), bytes,
                                 MakeSlot(SlotKind::kP2p, seq, bytes)));
}

}  // namespace loom
