// Which ops run as views of their input's buffer, and where each output
// starts in it: the one answer that the cost model (no work), lowering (one
// temporary) and the executor (no copy) all take.
#ifndef LOOM_FRAMEWORK_OP_VIEW_H_
#define LOOM_FRAMEWORK_OP_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/program.h"

namespace loom {

struct OpView {
  std::string input;             // the var whose buffer the outputs view
  std::vector<int64_t> offsets;  // per output var, in elements
};

// The view `op` is, or nothing where it computes or copies: its schema has
// no ViewOf, its offsets function declines this instance, or an output is
// persistable (it outlives the step and others may accumulate into it, so
// it gets a buffer of its own).
std::optional<OpView> OpViewOf(const Op& op);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_OP_VIEW_H_
