// The one place that lists every op group. Explicit calls rather than static
// registrars, so that no linker can drop an op.
#include <mutex>

#include "framework/op_registry.h"

namespace loom {

void RegisterActivationOps();
void RegisterCastOps();
void RegisterCollectiveOps();
void RegisterDropoutOps();
void RegisterElementwiseOps();
void RegisterEmbeddingOps();
void RegisterFillOps();
void RegisterGradNormOps();
void RegisterLayerNormOps();
void RegisterLrScheduleOps();
void RegisterMatmulOps();
void RegisterOptimizerOps();
void RegisterReduceOps();
void RegisterShapeOps();
void RegisterSoftmaxOps();

void RegisterAllOps() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterActivationOps();
    RegisterCastOps();
    RegisterCollectiveOps();
    RegisterDropoutOps();
    RegisterElementwiseOps();
    RegisterEmbeddingOps();
    RegisterFillOps();
    RegisterGradNormOps();
    RegisterLayerNormOps();
    RegisterLrScheduleOps();
    RegisterMatmulOps();
    RegisterOptimizerOps();
    RegisterReduceOps();
    RegisterShapeOps();
    RegisterSoftmaxOps();
  });
}

}  // namespace loom
