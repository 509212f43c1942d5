// The files of configs/clusters/, compiled into the library (the generated
// cluster_presets.cc, see embed_presets.cmake), so that `--cluster a100`
// works from any directory.
#ifndef LOOM_COST_MODEL_CLUSTER_PRESETS_H_
#define LOOM_COST_MODEL_CLUSTER_PRESETS_H_

#include <vector>

namespace loom {

struct ClusterPresetFile {
  const char* name;  // "a100"
  const char* path;  // "configs/clusters/a100.pbtxt", for error messages
  const char* text;
};

// Sorted by name.
const std::vector<ClusterPresetFile>& ClusterPresetFiles();

}  // namespace loom

#endif  // LOOM_COST_MODEL_CLUSTER_PRESETS_H_
