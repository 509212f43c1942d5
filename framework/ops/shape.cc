// Ops that move data without arithmetic: reshape, transpose, slice, split,
// concat, and the gradients that need an op of their own.
#include <algorithm>

#include "framework/ops/op_helpers.h"

namespace loom {
namespace {

// ---- reshape ----------------------------------------------------------------

Status InferReshape(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  const auto attr = ctx.Attr<std::vector<int64_t>>("shape");
  const int rank = static_cast<int>(x.shape.size());
  Shape out(attr.size());
  int inferred = -1;
  int64_t known = 1;
  for (int i = 0; i < static_cast<int>(attr.size()); ++i) {
    int64_t d = attr[i];
    if (d == -1) {
      if (inferred >= 0) {
        return InvalidArgument("attribute shape ", ShapeToString(attr),
                               " has more than one -1");
      }
      inferred = i;
      continue;
    }
    if (d == 0) {
      if (i >= rank) {
        return InvalidArgument("attribute shape ", ShapeToString(attr),
                               " copies dim ", i, " of X, but X is ",
                               ShapeToString(x.shape));
      }
      d = x.shape[i];
    } else if (d < 0) {
      return InvalidArgument("attribute shape ", ShapeToString(attr),
                             " has the negative dimension ", d);
    }
    out[i] = d;
    known *= d;
  }
  const int64_t n = NumElements(x.shape);
  if (inferred >= 0) {
    // A zero-sized known part would leave -1 undetermined.
    if (known == 0 || n % known != 0) {
      return InvalidArgument(
          "cannot reshape X of shape ", ShapeToString(x.shape), " (", n,
          " elements) to attribute shape ", ShapeToString(attr),
          ": no size for the -1 ", "makes ", n, " elements");
    }
    out[inferred] = n / known;
  }
  if (NumElements(out) != n) {
    return InvalidArgument("cannot reshape X of shape ", ShapeToString(x.shape),
                           " (", n, " elements) to attribute shape ",
                           ShapeToString(attr), " (", NumElements(out),
                           " elements)");
  }
  ctx.SetOutput("Out", TensorMeta{x.dtype, out});
  return Status::OK();
}

void RegisterReshape() {
  OpRegistry::Global().Register(
      OpSchema("reshape")
          .Input("X")
          .Output("Out")
          .RequiredAttr<std::vector<int64_t>>("shape")
          .SetInferShape(InferReshape)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, "reshape_grad", {"X"}, {}, {"Out"}, {"X"})};
          })
          .Doc("Out = X with a new shape, same row-major data. In the shape "
               "attribute a 0 copies X's dim at that position and one -1 is "
               "inferred from the element count."));
  OpRegistry::Global().Register(
      OpSchema("reshape_grad")
          .Input("X", SlotSpec::kNoBuffer)
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"))
          .RequiredAttr<std::vector<int64_t>>("shape")
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            const TensorMeta& x = ctx.Input("X");
            const TensorMeta& dout = ctx.Input(GradSlot("Out"));
            if (NumElements(x.shape) != NumElements(dout.shape)) {
              return InvalidArgument("Out@GRAD is ", MetaToString(dout),
                                     " but X is ", MetaToString(x));
            }
            ctx.ShareMeta("X", GradSlot("X"));
            return Status::OK();
          })
          .Doc("X@GRAD = Out@GRAD with X's shape."));
}

// ---- transpose --------------------------------------------------------------

Status InferTranspose(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  const auto perm = ctx.Attr<std::vector<int32_t>>("perm");
  const int rank = static_cast<int>(x.shape.size());
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int>(perm.size()) == rank;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    std::vector<int64_t> p(perm.begin(), perm.end());
    return InvalidArgument("attribute perm ", ShapeToString(p),
                           " is not a permutation of [0, ", rank,
                           ") for X of shape ", ShapeToString(x.shape));
  }
  Shape out(rank);
  for (int i = 0; i < rank; ++i) out[i] = x.shape[perm[i]];
  ctx.SetOutput("Out", TensorMeta{x.dtype, out});
  return Status::OK();
}

void RegisterTranspose() {
  OpRegistry::Global().Register(
      OpSchema("transpose")
          .Input("X")
          .Output("Out")
          .RequiredAttr<std::vector<int32_t>>("perm")
          .SetInferShape(InferTranspose)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            // The gradient of a transpose is the inverse transpose.
            auto perm = AttrValue<std::vector<int32_t>>::Get(
                *FindAttrOrDefault(fwd, "perm"));
            std::vector<int32_t> inverse(perm.size());
            for (size_t i = 0; i < perm.size(); ++i) {
              inverse[perm[i]] = static_cast<int32_t>(i);
            }
            return std::vector<proto::OpDesc>{
                OpDescBuilder("transpose")
                    .Input("X", GradVarName(SlotVars(fwd.outputs(), "Out")[0]))
                    .Output("Out", GradVarName(SlotVars(fwd.inputs(), "X")[0]))
                    .Attr("perm", inverse)
                    .Build()};
          })
          .Doc("Out dim i = X dim perm[i]."));
}

// ---- slice ------------------------------------------------------------------

// A numpy index: negative counts from the end, then clamped to [0, dim].
int64_t ClampIndex(int64_t i, int64_t dim) {
  if (i < 0) i += dim;
  return std::min(std::max<int64_t>(i, 0), dim);
}

Status InferSlice(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  const auto axes = ctx.Attr<std::vector<int32_t>>("axes");
  const auto starts = ctx.Attr<std::vector<int64_t>>("starts");
  const auto ends = ctx.Attr<std::vector<int64_t>>("ends");
  if (axes.size() != starts.size() || axes.size() != ends.size()) {
    return InvalidArgument("attributes axes, starts and ends have lengths ",
                           axes.size(), ", ", starts.size(), " and ",
                           ends.size(), "; they must be equal");
  }
  const int rank = static_cast<int>(x.shape.size());
  Shape out = x.shape;
  std::vector<bool> seen(rank, false);
  for (size_t k = 0; k < axes.size(); ++k) {
    auto axis = NormalizeAxis(axes[k], rank);
    if (!axis.ok()) return axis.status().WithContext("attribute axes");
    if (seen[*axis]) {
      return InvalidArgument("attribute axes names axis ", *axis, " twice");
    }
    seen[*axis] = true;
    const int64_t dim = x.shape[*axis];
    const int64_t s = ClampIndex(starts[k], dim);
    const int64_t e = ClampIndex(ends[k], dim);
    out[*axis] = std::max<int64_t>(e - s, 0);
  }
  ctx.SetOutput("Out", TensorMeta{x.dtype, out});
  return Status::OK();
}

void RegisterSlice() {
  OpRegistry::Global().Register(
      OpSchema("slice")
          .Input("X")
          .Output("Out")
          .RequiredAttr<std::vector<int32_t>>("axes")
          .RequiredAttr<std::vector<int64_t>>("starts")
          .RequiredAttr<std::vector<int64_t>>("ends")
          .SetInferShape(InferSlice)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, "slice_grad", {"X"}, {}, {"Out"}, {"X"})};
          })
          .Doc("Out = X[starts[k]:ends[k]] along each axes[k], step 1, with "
               "numpy semantics: negative indices count from the end and "
               "indices are clamped to the dim."));
  OpRegistry::Global().Register(
      OpSchema("slice_grad")
          .Input("X", SlotSpec::kNoBuffer)
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"))
          .RequiredAttr<std::vector<int32_t>>("axes")
          .RequiredAttr<std::vector<int64_t>>("starts")
          .RequiredAttr<std::vector<int64_t>>("ends")
          .SetInferShape([](InferShapeContext& ctx) {
            ctx.ShareMeta("X", GradSlot("X"));
            return Status::OK();
          })
          .Doc("X@GRAD = Out@GRAD inside the slice, zero outside."));
}

// ---- split / concat ---------------------------------------------------------

// The sizes of the parts split makes along a dim of size `dim`.
StatusOr<std::vector<int64_t>> SplitSizes(const InferShapeContext& ctx,
                                          int axis, const Shape& x) {
  const int num = ctx.Attr<int32_t>("num");
  auto sections = ctx.Attr<std::vector<int64_t>>("sections");
  const int64_t dim = x[axis];
  if (num < 0) return InvalidArgument("attribute num is ", num);
  if (num > 0 && !sections.empty()) {
    return InvalidArgument("attributes num (", num, ") and sections ",
                           ShapeToString(sections), " are both set; set one");
  }
  if (num > 0) {
    if (dim % num != 0) {
      return InvalidArgument("attribute num ", num, " does not divide dim ",
                             axis, " (", dim, ") of X ", ShapeToString(x));
    }
    return std::vector<int64_t>(num, dim / num);
  }
  if (sections.empty()) {
    return InvalidArgument("neither attribute num nor sections is set");
  }
  int inferred = -1;
  int64_t known = 0;
  for (int i = 0; i < static_cast<int>(sections.size()); ++i) {
    if (sections[i] == -1 && inferred < 0) {
      inferred = i;
    } else if (sections[i] < 0) {
      return InvalidArgument("attribute sections ", ShapeToString(sections),
                             " may hold one -1 and no other negative size");
    } else {
      known += sections[i];
    }
  }
  if (inferred >= 0 ? known > dim : known != dim) {
    return InvalidArgument("attribute sections ", ShapeToString(sections),
                           " does not add up to dim ", axis, " (", dim,
                           ") of X ", ShapeToString(x));
  }
  if (inferred >= 0) sections[inferred] = dim - known;
  return sections;
}

Status InferSplit(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  auto axis = NormalizeAxis(ctx.Attr<int32_t>("axis"),
                            static_cast<int>(x.shape.size()));
  if (!axis.ok()) return axis.status().WithContext("attribute axis");
  LOOM_ASSIGN_OR_RETURN(auto sizes, SplitSizes(ctx, *axis, x.shape));
  if (static_cast<int>(sizes.size()) != ctx.OutputCount("Out")) {
    return InvalidArgument("output Out holds ", ctx.OutputCount("Out"),
                           " vars but the split makes ", sizes.size(),
                           " parts");
  }
  for (int i = 0; i < static_cast<int>(sizes.size()); ++i) {
    Shape part = x.shape;
    part[*axis] = sizes[i];
    ctx.SetOutput("Out", TensorMeta{x.dtype, part}, i);
  }
  return Status::OK();
}

Status InferConcat(InferShapeContext& ctx) {
  const TensorMeta& first = ctx.Input("X", 0);
  const int rank = static_cast<int>(first.shape.size());
  auto axis = NormalizeAxis(ctx.Attr<int32_t>("axis"), rank);
  if (!axis.ok()) return axis.status().WithContext("attribute axis");
  Shape out = first.shape;
  for (int i = 1; i < ctx.InputCount("X"); ++i) {
    const TensorMeta& x = ctx.Input("X", i);
    bool fits =
        x.dtype == first.dtype && static_cast<int>(x.shape.size()) == rank;
    for (int d = 0; fits && d < rank; ++d) {
      fits = d == *axis || x.shape[d] == first.shape[d];
    }
    if (!fits) {
      return InvalidArgument("X[", i, "] is ", MetaToString(x), " but X[0] is ",
                             MetaToString(first),
                             "; they must agree except "
                             "along axis ",
                             *axis);
    }
    out[*axis] += x.shape[*axis];
  }
  ctx.SetOutput("Out", TensorMeta{first.dtype, out});
  return Status::OK();
}

// Where `parts` start in `whole`, split or joined along `axis`, when they
// are consecutive blocks of it (every dim before the axis is 1, as for the
// rows of a [rows, cols] matrix); nothing when they are strided.
std::vector<int64_t> BlockOffsets(const Op& op, const std::string& whole,
                                  const google::protobuf::RepeatedPtrField<std::string>& parts) {
  const proto::VarDesc* w = op.block()->FindVar(whole);
  if (w == nullptr) return {};
  const Shape shape = MetaOf(*w).shape;
  auto axis = NormalizeAxis(op.GetAttr<int32_t>("axis"), static_cast<int>(shape.size()));
  if (!axis.ok()) return {};
  for (int d = 0; d < *axis; ++d) {
    if (shape[d] != 1) return {};
  }
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const std::string& part : parts) {
    const proto::VarDesc* v = part.empty() ? nullptr : op.block()->FindVar(part);
    if (v == nullptr) return {};
    offsets.push_back(at);
    at += NumElements(MetaOf(*v).shape);
  }
  return offsets;
}

// A split into consecutive blocks: the parts view X. A concat of them: the
// parts' producers may write them into Out. Strided ones copy.
std::vector<int64_t> SplitViewOffsets(const Op& op) {
  return BlockOffsets(op, op.Input("X"), op.Outputs("Out"));
}
std::vector<int64_t> ConcatJoinOffsets(const Op& op) {
  return BlockOffsets(op, op.Output("Out"), op.Inputs("X"));
}

// flat_concat: each part starts where the one before ends.
std::vector<int64_t> FlatConcatOffsets(const Op& op) {
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const std::string& x : op.Inputs("X")) {
    offsets.push_back(at);
    const proto::VarDesc* v = op.block() == nullptr ? nullptr : op.block()->FindVar(x);
    if (v == nullptr) return {};
    at += NumElements(MetaOf(*v).shape);
  }
  return offsets;
}

Status InferFlatConcat(InferShapeContext& ctx) {
  int64_t n = 0;
  const DataType dtype = ctx.Input("X", 0).dtype;
  for (int i = 0; i < ctx.InputCount("X"); ++i) {
    const TensorMeta& x = ctx.Input("X", i);
    if (x.dtype != dtype) {
      return InvalidArgument("X ", i, " is ", DataTypeName(x.dtype), " but X 0 is ",
                             DataTypeName(dtype));
    }
    n += NumElements(x.shape);
  }
  ctx.SetOutput("Out", TensorMeta{dtype, {n}});
  return Status::OK();
}

// flat_split: output i is `shapes` dims [begin_i, begin_i + ranks[i]) at
// element offsets[i] of the 1-D X.
std::vector<int64_t> FlatSplitOffsets(const Op& op) {
  return op.GetAttr<std::vector<int64_t>>("offsets");
}

Status InferFlatSplit(InferShapeContext& ctx) {
  const TensorMeta& x = ctx.Input("X");
  if (x.shape.size() != 1) return InvalidArgument("X is ", MetaToString(x), ", not 1-D");
  const auto offsets = ctx.Attr<std::vector<int64_t>>("offsets");
  const auto dims = ctx.Attr<std::vector<int64_t>>("dims");
  const auto ranks = ctx.Attr<std::vector<int32_t>>("ranks");
  if (static_cast<int>(offsets.size()) != ctx.OutputCount("Out") ||
      ranks.size() != offsets.size()) {
    return InvalidArgument(ctx.OutputCount("Out"), " outputs but ", offsets.size(),
                           " offsets and ", ranks.size(), " ranks");
  }
  size_t at = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (ranks[i] < 0 || at + ranks[i] > dims.size()) {
      return InvalidArgument("output ", i, ": rank ", ranks[i], " runs past the ", dims.size(),
                             " dims");
    }
    Shape shape(dims.begin() + at, dims.begin() + at + ranks[i]);
    at += ranks[i];
    for (int64_t d : shape) {
      if (d < 0) return InvalidArgument("output ", i, ": negative dim ", d);
    }
    const int64_t n = NumElements(shape);
    if (offsets[i] < 0 || offsets[i] + n > x.shape[0]) {
      return InvalidArgument("output ", i, ": elements [", offsets[i], ", ", offsets[i] + n,
                             ") lie outside X's ", x.shape[0]);
    }
    ctx.SetOutput("Out", TensorMeta{x.dtype, shape}, static_cast<int>(i));
  }
  if (at != dims.size()) return InvalidArgument(dims.size() - at, " dims left over");
  return Status::OK();
}

void RegisterSplitConcat() {
  OpRegistry::Global().Register(
      OpSchema("flat_concat")
          .Input("X", SlotSpec::kDuplicable)
          .Output("Out")
          .JoinOf("X", FlatConcatOffsets)
          .SetInferShape(InferFlatConcat)
          .Doc("Joins the X vars, each read as a flat run of its elements, into the 1-D "
               "Out, in slot order: a gradient bucket. Where the X are temporaries "
               "their producers write them in place and nothing is copied."));
  OpRegistry::Global().Register(
      OpSchema("flat_split")
          .Input("X")
          .Output("Out", SlotSpec::kDuplicable)
          .ViewOf("X", FlatSplitOffsets)
          .Attr<std::vector<int64_t>>("offsets", {})
          .Attr<std::vector<int64_t>>("dims", {})
          .Attr<std::vector<int32_t>>("ranks", {})
          .SetInferShape(InferFlatSplit)
          .Doc("The reverse of flat_concat: output i is the elements of the 1-D X from "
               "offsets[i], shaped as the next ranks[i] of dims (a gathered parameter "
               "bucket handing out its parameters). The outputs view X: nothing is "
               "copied."));
  OpRegistry::Global().Register(
      OpSchema("split")
          .Input("X")
          .Output("Out", SlotSpec::kDuplicable)
          .ViewOf("X", SplitViewOffsets)
          .Attr<int32_t>("axis", 0)
          .Attr<int32_t>("num", 0)
          .Attr<std::vector<int64_t>>("sections", {})
          .SetInferShape(InferSplit)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            // Autodiff fills zeros for the gradients of unused parts.
            std::vector<std::string> douts = SlotVars(fwd.outputs(), "Out");
            for (auto& v : douts) v = GradVarName(v);
            return std::vector<proto::OpDesc>{
                OpDescBuilder("concat")
                    .Input("X", douts)
                    .Output("Out", GradVarName(SlotVars(fwd.inputs(), "X")[0]))
                    .RawAttr(*FindAttrOrDefault(fwd, "axis"))
                    .Build()};
          })
          .Doc("Splits X along axis into num equal parts, or into parts of "
               "the given sections (one of which may be -1: the rest)."));
  OpRegistry::Global().Register(
      OpSchema("concat")
          .Input("X", SlotSpec::kDuplicable)
          .Output("Out")
          .JoinOf("X", ConcatJoinOffsets)
          .Attr<int32_t>("axis", 0)
          .SetInferShape(InferConcat)
          .SetGradMaker([](const proto::OpDesc& fwd) {
            return std::vector<proto::OpDesc>{
                MakeGradOp(fwd, "concat_grad", {"X"}, {}, {"Out"}, {"X"})};
          })
          .Doc("Joins the X vars along axis, in slot order."));
  OpRegistry::Global().Register(
      OpSchema("concat_grad")
          .Input("X", SlotSpec::kDuplicable | SlotSpec::kNoBuffer)
          .Input(GradSlot("Out"))
          .Output(GradSlot("X"), SlotSpec::kDuplicable | SlotSpec::kOptional)
          .Attr<int32_t>("axis", 0)
          .SetInferShape([](InferShapeContext& ctx) -> Status {
            if (ctx.OutputCount(GradSlot("X")) > ctx.InputCount("X")) {
              return InvalidArgument("output X@GRAD holds ",
                                     ctx.OutputCount(GradSlot("X")),
                                     " vars but X only ", ctx.InputCount("X"));
            }
            for (int i = 0; i < ctx.OutputCount(GradSlot("X")); ++i) {
              ctx.ShareMeta("X", GradSlot("X"), i);
            }
            return Status::OK();
          })
          .Doc("Cuts Out@GRAD back into the parts X[i] came from; pruned "
               "X@GRAD entries are skipped."));
}

}  // namespace

void RegisterShapeOps() {
  RegisterReshape();
  RegisterTranspose();
  RegisterSlice();
  RegisterSplitConcat();
}

}  // namespace loom
