// Flat buffers in a scope: each persistable var that a program places in a
// flat buffer (VarDesc.flat) becomes a view of that buffer's tensor, which
// is allocated once, zeroed, and lives as long as the scope. A member that
// already holds values (a parameter the startup program initialized) has
// them copied into its place first, once; from then on every op that
// writes the member writes the buffer, and a collective over the buffer
// moves every member with nothing copied.
#ifndef LOOM_EXECUTOR_FLAT_BUFFERS_H_
#define LOOM_EXECUTOR_FLAT_BUFFERS_H_

#include <functional>

#include "executor/scope.h"
#include "framework/program.h"
#include "framework/shape_inference.h"
#include "framework/status.h"

namespace loom {

// Binds the flat buffers `block` declares in `scope`. Idempotent: members
// already viewing their buffer are left alone, so several programs of one
// rank (its job programs) may bind the same buffers in turn. A shard
// (FlatSlot.shard_ring) views the part at the rank's group rank on that
// ring, `ring_index(ring)`. Errors name the var whose held values do not
// match its declared meta, or whose shard the rank does not have.
Status BindFlatBuffers(const Block& block, Scope* scope,
                       const std::function<int(int ring)>& ring_index = nullptr);

}  // namespace loom

#endif  // LOOM_EXECUTOR_FLAT_BUFFERS_H_
