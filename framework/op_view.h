// Which ops run as views of their input's buffer (and which joins have
// their inputs written into their output's), and where each part starts:
// the one answer that the cost model (no work), lowering (one temporary)
// and the executor (no copy) all take.
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

// The reverse: a join (OpSchema::JoinOf, a concat along a leading dim)
// whose inputs their producers write straight into its output's buffer,
// so that it copies nothing. The program must allow it: every input a
// temporary written by one op (not a view or another join) on one stream,
// before the join, and read by nothing else; the output a temporary too.
struct OpJoin {
  std::string output;
  std::vector<std::string> parts;  // the inputs, in order
  std::vector<int64_t> offsets;    // where each starts in the output, elements
};
std::optional<OpJoin> OpJoinOf(const Op& op);

// Where `var`, an output of its producer, is written: inside the output of
// the join that reads it, from `offset` (elements).
struct PlacedPart {
  std::string whole;
  int64_t offset = 0;
};
std::optional<PlacedPart> PlacedPartOf(const Block& block, const std::string& var);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_OP_VIEW_H_
