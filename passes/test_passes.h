// The passes that test the pass manager itself: no-op, test-fail and
// test-break-verifier. Not among the product's passes (RegisterAllPasses,
// `loom passes`): the pass manager's tests register them, and `loom opt`
// does only under its hidden --test_passes flag, for the golden tests.
#ifndef LOOM_PASSES_TEST_PASSES_H_
#define LOOM_PASSES_TEST_PASSES_H_

namespace loom {

// Registers the product's passes and these; once, however often called.
void RegisterTestPasses();

}  // namespace loom

#endif  // LOOM_PASSES_TEST_PASSES_H_
