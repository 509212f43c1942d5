#include "framework/program_printer.h"

#include <iomanip>
#include <sstream>

#include "framework/shape_inference.h"

namespace loom {
namespace {

void PrintSlots(
    const google::protobuf::RepeatedPtrField<proto::OpDesc::Slot>& slots,
    std::ostream& os) {
  bool first = true;
  for (const auto& slot : slots) {
    if (!first) os << ' ';
    first = false;
    os << slot.name() << '=';
    if (slot.vars_size() != 1) os << '[';
    for (int i = 0; i < slot.vars_size(); ++i) {
      if (i) os << ',';
      os << (slot.vars(i).empty() ? "_" : slot.vars(i));
    }
    if (slot.vars_size() != 1) os << ']';
  }
  if (first) os << "()";
}

std::string HumanCount(int64_t n) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  if (n >= 1000000000) {
    os << n / 1e9 << "B";
  } else if (n >= 1000000) {
    os << n / 1e6 << "M";
  } else if (n >= 1000) {
    os << n / 1e3 << "K";
  } else {
    return std::to_string(n);
  }
  return os.str();
}

}  // namespace

std::string OpToString(const Op& op) {
  const proto::OpDesc& d = op.desc();
  std::ostringstream os;
  os << std::setw(6) << op.index() << "  " << std::left << std::setw(14)
     << role::ToString(d.role()) << ' ' << std::setw(28) << d.type()
     << std::right << ' ';
  PrintSlots(d.inputs(), os);
  os << " -> ";
  PrintSlots(d.outputs(), os);
  for (const auto& a : d.attrs()) os << "  " << a.name() << '=' << AttrToString(a);
  if (d.layer() >= 0) os << "  @layer=" << d.layer();
  if (d.pipeline_stage() >= 0) os << "  @stage=" << d.pipeline_stage();
  if (d.chunk() >= 0) os << "  @chunk=" << d.chunk();
  if (!d.stream().empty()) os << "  @stream=" << d.stream();
  if (d.stream_priority() != 0) os << "  @priority=" << d.stream_priority();
  for (const auto& e : d.record_events()) os << "  @record=" << e;
  for (const auto& e : d.wait_events()) os << "  @wait=" << e;
  for (const auto& pg : d.param_grads()) {
    os << "  @param_grad=" << pg.param() << ':' << pg.grad();
  }
  if (d.last_micro_batch_only()) os << "  @last_micro_batch_only";
  if (d.first_micro_batch_only()) os << "  @first_micro_batch_only";
  if (!d.creation_pass().empty()) os << "  @pass=" << d.creation_pass();
  return os.str();
}

void PrintProgram(const Program& program, std::ostream& os,
                  const PrintOptions& options) {
  int64_t ops = 0, vars = 0, params = 0, param_elements = 0;
  for (int b = 0; b < program.num_blocks(); ++b) {
    const Block& block = program.block(b);
    ops += block.num_ops();
    vars += block.vars().size();
    for (const auto& [name, v] : block.vars()) {
      if (!v.is_parameter()) continue;
      ++params;
      param_elements += NumElements(MetaOf(v).shape);
    }
  }
  os << "program: " << program.num_blocks() << " block(s), " << ops
     << " ops, " << vars << " vars, " << params << " parameters ("
     << HumanCount(param_elements) << " elements)\n";
  for (int b = 0; b < program.num_blocks(); ++b) {
    const Block& block = program.block(b);
    os << "block " << b << " (" << block.num_ops() << " ops)\n";
    for (Op* op : block.ops()) os << OpToString(*op) << '\n';
    if (!options.vars) continue;
    os << "vars of block " << b << ":\n";
    for (const auto& [name, v] : block.vars()) {
      os << "  " << name << ": " << MetaToString(MetaOf(v));
      if (v.is_parameter()) os << " parameter";
      if (v.persistable() && !v.is_parameter()) os << " persistable";
      if (v.is_data()) os << " data";
      if (v.stop_gradient()) os << " stop_gradient";
      if (v.has_flat()) os << " in " << v.flat().buffer() << " at " << v.flat().offset();
      os << '\n';
    }
  }
}

}  // namespace loom
