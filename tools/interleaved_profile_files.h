// Records what an InterleavedProfile (profiling/interleaved_profile.h)
// measured between a run's steps: its op timings merged into a cost table,
// and, where asked, the cluster file with the profile's lockstep slowdowns
// and the core wait fitted to its calls. For loom run --interleaved_profile
// and loom demo.
#ifndef LOOM_TOOLS_INTERLEAVED_PROFILE_FILES_H_
#define LOOM_TOOLS_INTERLEAVED_PROFILE_FILES_H_

#include <cstdio>
#include <string>

#include "framework/status.h"
#include "profiling/interleaved_profile.h"

namespace loom {

struct InterleavedProfileFiles {
  std::string cost_table;   // merged into
  std::string device;       // the table's device (TableDevice of the cluster)
  std::string cluster_out;  // the profile's cluster written here; empty: not written
  FILE* report = stdout;    // what was measured and written is said here (null: nowhere)
};

// Before the run, so that a bad output fails before the steps rather than
// after them: the table loads, the cluster file can be written, and
// core-wait calls have a cluster file to go into.
Status CheckInterleavedProfileFiles(const InterleavedProfileOptions& options,
                                    const InterleavedProfileFiles& files);

// After the run: merges the timings into files.cost_table and writes
// files.cluster_out (the process that profiled; others have nothing to
// write).
Status WriteInterleavedProfile(const InterleavedProfile& profile,
                               const InterleavedProfileFiles& files);

}  // namespace loom

#endif  // LOOM_TOOLS_INTERLEAVED_PROFILE_FILES_H_
