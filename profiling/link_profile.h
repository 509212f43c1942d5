// `loom profile --comm`'s measurement of the links between ranks: Gloo
// collectives in each regime a training step meets them (parties arriving
// together or apart, cores kept awake, after longer compute, two groups on
// the same cores), then what communication does to the host
// (host_effects_profile.h), fitted (link_fit.h) into a cluster file's link.
// In one process over loopback, or as one member of a `loom launch` (its
// rank 0 fits and records), on one node or several.
#ifndef LOOM_PROFILING_LINK_PROFILE_H_
#define LOOM_PROFILING_LINK_PROFILE_H_

#include <vector>

#include "cost_model/cluster.pb.h"
#include "framework/status.h"
#include "profiling/link_profile_options.h"

namespace loom {

// Measures and fits the links the ranks span into `cluster`: under a
// launch across nodes, the link inside node 0 and then the link between
// nodes; elsewhere the one link the ranks span. `*measured` is the links
// fitted, empty on a launch's ranks other than 0 (they only take part, and
// write nothing).
Status MeasureComm(const LinkProfileOptions& options, proto::Cluster* cluster,
                   std::vector<proto::Link*>* measured);

}  // namespace loom

#endif  // LOOM_PROFILING_LINK_PROFILE_H_
