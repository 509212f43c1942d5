#include "cost_model/cost_table.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "framework/file_util.h"

namespace loom {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

Status CheckEntry(const proto::CostEntry& e) {
  if (e.signature().empty()) return InvalidArgument("signature is missing");
  if (e.op_type().empty()) return InvalidArgument("op_type is missing");
  if (e.signature().compare(0, e.op_type().size(), e.op_type()) != 0) {
    return InvalidArgument("op_type '", e.op_type(),
                           "' does not begin the signature");
  }
  if (e.device().empty()) return InvalidArgument("device is missing");
  if (!(std::isfinite(e.median_seconds()) && e.median_seconds() > 0)) {
    return InvalidArgument("median_seconds must be positive, got ",
                           e.median_seconds());
  }
  if (e.flops() < 0 || e.bytes() < 0) {
    return InvalidArgument("flops and bytes must not be negative");
  }
  if (e.samples() < 1) {
    return InvalidArgument("samples must be at least 1, got ", e.samples());
  }
  if (e.has_cold_input_bytes() &&
      !(std::isfinite(e.cold_input_bytes()) && e.cold_input_bytes() >= 0)) {
    return InvalidArgument("cold_input_bytes must not be negative, got ", e.cold_input_bytes());
  }
  return Status::OK();
}

}  // namespace

std::string DefaultCostTablePath() {
  const std::string explicit_path = Env("LOOM_COST_TABLE");
  if (!explicit_path.empty()) return explicit_path;
  const std::string xdg = Env("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/loom/cost_table.pbtxt";
  const std::string home = Env("HOME");
  // Without a home directory the table lands in the working directory.
  return (home.empty() ? std::string(".") : home + "/.cache") +
         "/loom/cost_table.pbtxt";
}

std::string CostTablePath(const std::string& flag_value) {
  return flag_value.empty() ? DefaultCostTablePath() : flag_value;
}

std::string CostTable::Key(const std::string& signature,
                           const std::string& device) {
  return device + '\n' + signature;
}

StatusOr<CostTable> CostTable::FromProto(proto::CostTable table,
                                         const std::string& origin) {
  CostTable t;
  for (int i = 0; i < table.entry_size(); ++i) {
    const proto::CostEntry& e = table.entry(i);
    const std::string where = StrCat(origin, ": entry ", i, " (", e.signature(), ")");
    LOOM_RETURN_IF_ERROR(CheckEntry(e).WithContext(where));
    auto [it, fresh] = t.index_.emplace(Key(e.signature(), e.device()), i);
    if (!fresh) {
      return InvalidArgument(where, ": device '", e.device(),
                             "' already has this signature at entry ", it->second);
    }
  }
  t.table_ = std::move(table);
  return t;
}

StatusOr<CostTable> CostTable::Load(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  proto::CostTable table;
  LOOM_RETURN_IF_ERROR(ParseTextProto(text, path, &table));
  return FromProto(std::move(table), path);
}

StatusOr<CostTable> CostTable::LoadOrEmpty(const std::string& path) {
  auto t = Load(path);
  if (!t.ok() && t.status().code() == StatusCode::kNotFound) return CostTable();
  return t;
}

Status CostTable::Save(const std::string& path) const {
  return WriteFileAtomically(path, TextProtoToString(table_));
}

const proto::CostEntry* CostTable::Find(const std::string& signature,
                                        const std::string& device) const {
  auto it = index_.find(Key(signature, device));
  return it == index_.end() ? nullptr : &table_.entry(it->second);
}

std::vector<const proto::CostEntry*> CostTable::OfType(
    const std::string& op_type, const std::string& device) const {
  std::vector<const proto::CostEntry*> out;
  for (const proto::CostEntry& e : table_.entry()) {
    if (e.op_type() == op_type && e.device() == device) out.push_back(&e);
  }
  return out;
}

CostTable::MergeCounts CostTable::Merge(
    const std::vector<proto::CostEntry>& entries) {
  MergeCounts counts;
  for (const proto::CostEntry& e : entries) {
    Status valid = CheckEntry(e);
    CHECK(valid.ok()) << "merging an invalid entry (" << e.signature()
                      << "): " << valid.message();
    auto [it, fresh] =
        index_.emplace(Key(e.signature(), e.device()), table_.entry_size());
    if (fresh) {
      *table_.add_entry() = e;
      ++counts.added;
    } else {
      *table_.mutable_entry(it->second) = e;
      ++counts.replaced;
    }
  }
  return counts;
}

}  // namespace loom
