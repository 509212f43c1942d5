// Registry entries of the pass-manager test passes.
#ifndef LOOM_PASSES_TEST_PASSES_H_
#define LOOM_PASSES_TEST_PASSES_H_

#include "passes/pass.h"

namespace loom {

PassInfo NoOpPassInfo();
PassInfo FailPassInfo();
PassInfo BreakVerifierPassInfo();

}  // namespace loom

#endif  // LOOM_PASSES_TEST_PASSES_H_
