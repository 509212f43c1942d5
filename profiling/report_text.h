// How the host measurements say what they measured: times, rates and the
// date in their reports and in the `source` notes of the files they fill.
#ifndef LOOM_PROFILING_REPORT_TEXT_H_
#define LOOM_PROFILING_REPORT_TEXT_H_

#include <cstdarg>
#include <cstdio>
#include <string>

namespace loom {

// "12.34 us", "5.678 ms", "1.234 s".
std::string Time(double seconds);
// "1.23 GB/s".
std::string Rate(double bytes_per_second);
// "2026-11-23".
std::string Today();

// fprintf to `out`, or nothing where `out` is null: a measurement's
// report goes wherever its caller asks, or nowhere.
inline void __attribute__((format(printf, 2, 3))) PrintTo(FILE* out, const char* format, ...) {
  if (out == nullptr) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(out, format, args);
  va_end(args);
}

// Progress lines of the link's measurements, on stderr.
void PrintCommProgress(const std::string& what);

// "CPU pressure 3% before measuring" (CpuPressure), with a warning when it
// is high; "" when unknown.
std::string PressureNote(double pressure);

}  // namespace loom

#endif  // LOOM_PROFILING_REPORT_TEXT_H_
