#include "framework/op_work.h"

#include <algorithm>
#include <vector>

#include "framework/op_registry.h"
#include "framework/op_view.h"
#include "framework/shape_inference.h"
#include "framework/wire_dtype.h"

namespace loom {
namespace {

const proto::VarDesc* VarOf(const Op& op, const std::string& name) {
  return name.empty() ? nullptr : op.block()->FindVar(name);
}

Shape VarShape(const Op& op, const std::string& name) {
  const proto::VarDesc* v = VarOf(op, name);
  return v == nullptr ? Shape{} : MetaOf(*v).shape;
}

double VarBytes(const Op& op, const std::string& name) {
  const proto::VarDesc* v = VarOf(op, name);
  if (v == nullptr) return 0;
  const TensorMeta m = MetaOf(*v);
  return static_cast<double>(NumElements(m.shape) * SizeOf(m.dtype));
}

// 2*M*N*K of Out = X @ Y, from the shapes of X and Out.
double MatmulFlops(const Op& op, const std::string& out) {
  Shape x = VarShape(op, op.Input("X"));
  Shape o = VarShape(op, out);
  if (x.size() < 2 || o.empty()) return 0;
  const bool tx = op.GetAttr<bool>("transpose_x");
  const double k = static_cast<double>(tx ? x[x.size() - 2] : x.back());
  return 2.0 * static_cast<double>(NumElements(o)) * k;
}

double Flops(const Op& op) {
  if (op.type() == "matmul") return MatmulFlops(op, op.Output("Out"));
  if (op.type() == "matmul_grad") {
    // Each gradient present is one product as large as the forward one.
    const double one = MatmulFlops(op, op.Input("Out@GRAD"));
    return one * (op.HasOutput("X@GRAD") + op.HasOutput("Y@GRAD"));
  }
  double n = 0;
  for (const std::string& out : op.OutputVars()) {
    n += static_cast<double>(NumElements(VarShape(op, out)));
  }
  return n;
}

// Attributes that name a peer, a ring or a seed move no work.
bool IgnoredInSignature(const std::string& attr) {
  return attr == "ring_id" || attr == "peer" || attr == "seed" ||
         attr == "root";
}

void AppendVar(const Op& op, const std::string& name, std::string* out) {
  const proto::VarDesc* v = VarOf(op, name);
  if (v == nullptr) {
    *out += " -";
    return;
  }
  const TensorMeta m = MetaOf(*v);
  *out += StrCat(" ", DataTypeName(m.dtype), ShapeToString(m.shape));
}

// The product whose output is `out`, where it has one.
void AddProduct(const Op& op, const std::string& out, OpWork* w) {
  const Shape s = VarShape(op, out);
  if (out.empty() || s.size() < 2 || s[s.size() - 2] <= 0 || s.back() <= 0) return;
  OpWork::Product& p = w->products[w->num_products++];
  p.rows = s[s.size() - 2];
  p.cols = s.back();
  p.batch = NumElements(s) / (p.rows * p.cols);
}

}  // namespace

OpWork WorkOf(const Op& op) {
  OpWork w;
  w.flops = Flops(op);
  if (op.type() == "matmul") {
    AddProduct(op, op.Output("Out"), &w);
  } else if (op.type() == "matmul_grad") {
    if (op.HasOutput("X@GRAD")) AddProduct(op, op.Output("X@GRAD"), &w);
    if (op.HasOutput("Y@GRAD")) AddProduct(op, op.Output("Y@GRAD"), &w);
  }
  const OpSchema* schema = OpRegistry::Global().Find(op.type());
  for (const auto& slot : op.desc().inputs()) {
    if (!ReadsInputData(schema, op, slot.name())) continue;
    for (const std::string& v : slot.vars()) w.bytes += VarBytes(op, v);
  }
  for (const std::string& v : op.OutputVars()) w.bytes += VarBytes(op, v);
  // A view does no work, nor does a join whose parts were written in place.
  if (OpViewOf(op) || OpJoinOf(op)) return OpWork{};

  switch (schema == nullptr ? CommKind::kNone : schema->comm_kind()) {
    case CommKind::kNone:
      break;
    case CommKind::kSend:
      w.comm_bytes = static_cast<int64_t>(VarBytes(op, op.Input("X")));
      w.comm_calls = 1;
      w.flops = 0;
      break;
    case CommKind::kRecv:
      w.comm_bytes = static_cast<int64_t>(VarBytes(op, op.Output("Out")));
      w.comm_calls = 1;
      w.flops = 0;
      break;
    case CommKind::kCollective:
      if (op.type() == "c_softmax_with_cross_entropy") {
        // Row maxima, row sums of exponentials, target logits: one float
        // per row each (the rows are Loss's elements).
        w.comm_bytes = static_cast<int64_t>(VarBytes(op, op.Output("Loss")));
        w.comm_calls = 3;
        break;
      }
      // A gradient reduction in a narrower wire dtype moves that many
      // bytes (framework/wire_dtype.h).
      for (const std::string& v : op.Inputs("X")) {
        const proto::VarDesc* var = VarOf(op, v);
        if (var == nullptr) continue;
        w.comm_bytes +=
            NumElements(MetaOf(*var).shape) * SizeOf(WireDtypeOf(op, *var));
      }
      w.comm_calls = 1;
      w.flops = 0;
      break;
  }
  return w;
}

std::string OpSignature(const Op& op) {
  std::string s = op.type();
  for (const auto& slot : op.desc().inputs()) {
    for (const std::string& v : slot.vars()) AppendVar(op, v, &s);
  }
  s += " ->";
  for (const auto& slot : op.desc().outputs()) {
    for (const std::string& v : slot.vars()) AppendVar(op, v, &s);
  }
  std::vector<const proto::Attr*> attrs;
  for (const proto::Attr& a : op.desc().attrs()) {
    if (!IgnoredInSignature(a.name())) attrs.push_back(&a);
  }
  std::sort(attrs.begin(), attrs.end(),
            [](const proto::Attr* a, const proto::Attr* b) { return a->name() < b->name(); });
  for (const proto::Attr* a : attrs) {
    switch (a->type()) {
      case proto::INT:
        s += StrCat(" ", a->name(), "=", a->i());
        break;
      case proto::LONG:
        s += StrCat(" ", a->name(), "=", a->l());
        break;
      case proto::BOOLEAN:
        s += StrCat(" ", a->name(), "=", a->b() ? 1 : 0);
        break;
      case proto::STRING:
        s += StrCat(" ", a->name(), "=", a->s());
        break;
      default:
        break;  // float values and lists scale no work
    }
  }
  return s;
}

}  // namespace loom
