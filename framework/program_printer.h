// A readable listing of a program: one line per op with its index, role,
// type, inputs -> outputs, the attributes it sets, and any parallel
// annotations (stage, chunk, stream, events, param/grad pairs).
#ifndef LOOM_FRAMEWORK_PROGRAM_PRINTER_H_
#define LOOM_FRAMEWORK_PROGRAM_PRINTER_H_

#include <ostream>
#include <string>

#include "framework/program.h"

namespace loom {

struct PrintOptions {
  bool vars = false;  // also list every var with its meta and flags
};

std::string OpToString(const Op& op);
void PrintProgram(const Program& program, std::ostream& os,
                  const PrintOptions& options = {});

}  // namespace loom

#endif  // LOOM_FRAMEWORK_PROGRAM_PRINTER_H_
