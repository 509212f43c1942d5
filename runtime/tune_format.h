// How `loom tune`'s explanations print a step and a size (runtime/tuner.h,
// runtime/tune_refine.h): "12.345 ms", "420.6 kB", "81.32 GB".
#ifndef LOOM_RUNTIME_TUNE_FORMAT_H_
#define LOOM_RUNTIME_TUNE_FORMAT_H_

#include <cstdint>
#include <string>

namespace loom {

std::string TuneMs(double seconds);
std::string TuneBytes(int64_t bytes);

}  // namespace loom

#endif  // LOOM_RUNTIME_TUNE_FORMAT_H_
