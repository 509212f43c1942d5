// loom show: prints a program file as a readable listing.
#include <iostream>

#include "framework/program_printer.h"
#include "framework/serialization.h"
#include "tools/command.h"

DEFINE_bool(vars, false, "also list every var with its dtype, shape and flags");

namespace loom {

Status RunShow(const std::vector<std::string>& args) {
  if (args.size() != 1) return InvalidArgument("expects one FILE");
  LOOM_ASSIGN_OR_RETURN(Program program, LoadProgram(args[0]));
  PrintOptions options;
  options.vars = FLAGS_vars;
  PrintProgram(program, std::cout, options);
  return Status::OK();
}

}  // namespace loom
