// Moving a scope's tensors between the host and a device. The startup
// program runs on the host (its random initializers are CPU kernels); the
// trainer then places the rank's state on its device, feeds each step's
// batch there, and reads the loss and, for checkpoints, the state back.
//
// Aliasing is kept: tensors that share a buffer (a flat buffer's members,
// ZeRO shards' views) share one buffer on the other side too, so a flat
// all-reduce still updates every parameter it covers.
#ifndef LOOM_EXECUTOR_DEVICE_PLACEMENT_H_
#define LOOM_EXECUTOR_DEVICE_PLACEMENT_H_

#include <memory>

#include "executor/device.h"
#include "executor/scope.h"
#include "executor/tensor.h"

namespace loom {

// Moves every tensor of `scope` that holds host memory (its own tensors,
// not its parents') into `device`'s, and waits until the copies are done.
// The host buffers are let go.
Status PlaceScopeOn(Scope* scope, Device* device, Stream* stream);

// A host scope holding a copy of each of `scope`'s own tensors that holds
// data, aliasing kept; done when it returns.
StatusOr<std::unique_ptr<Scope>> MirrorOnHost(const Scope& scope, Device* device, Stream* stream);

// Writes `mirror`'s tensors (a MirrorOnHost of `scope`, maybe changed)
// back into `scope`'s device memory; every tensor must still have the
// meta it has in `scope`. Done when it returns.
Status CopyMirrorBack(const Scope& mirror, Scope* scope, Device* device, Stream* stream);

// `host` (a host tensor) written into `dst` in `device`'s memory, which is
// allocated with host's meta. Ordered on `stream`; not waited for.
Status CopyToDevice(const Tensor& host, Tensor* dst, Device* device, Stream* stream);

// A host copy of `t` (a tensor of `device`, or of the host); done when it
// returns.
StatusOr<Tensor> CopyToHostTensor(const Tensor& t, Device* device, Stream* stream);

}  // namespace loom

#endif  // LOOM_EXECUTOR_DEVICE_PLACEMENT_H_
