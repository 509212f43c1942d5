// The op cost table: profiled medians keyed by (signature, device), in a
// text-format file (cost_table.proto) that `loom profile` merges into and
// the op cost model reads.
#ifndef LOOM_COST_MODEL_COST_TABLE_H_
#define LOOM_COST_MODEL_COST_TABLE_H_

#include <string>
#include <unordered_map>
#include <vector>

#include "cost_model/cost_table.pb.h"
#include "framework/status.h"

namespace loom {

// $LOOM_COST_TABLE if set and not empty, else
// $XDG_CACHE_HOME/loom/cost_table.pbtxt, else ~/.cache/loom/cost_table.pbtxt.
std::string DefaultCostTablePath();
// `flag_value` (a --cost_table) when given, else the default.
std::string CostTablePath(const std::string& flag_value);

class CostTable {
 public:
  CostTable() = default;

  // Errors name the file, then the line and field, or the entry at fault.
  static StatusOr<CostTable> Load(const std::string& path);
  // An empty table when the file does not exist (nothing profiled yet).
  static StatusOr<CostTable> LoadOrEmpty(const std::string& path);
  // Checks every entry (signature, type, device present; median positive;
  // no (signature, device) twice); `origin` names the text in errors.
  static StatusOr<CostTable> FromProto(proto::CostTable table,
                                       const std::string& origin);

  // Text format, written atomically.
  Status Save(const std::string& path) const;

  // The entry of `signature` measured on `device`, or nullptr.
  const proto::CostEntry* Find(const std::string& signature,
                               const std::string& device) const;
  // Every entry of `op_type` measured on `device`, in file order.
  std::vector<const proto::CostEntry*> OfType(const std::string& op_type,
                                              const std::string& device) const;

  struct MergeCounts {
    int added = 0;
    int replaced = 0;
  };
  // Adds each entry; one with the signature and device of an existing
  // entry replaces it in place (a re-profile updates, never duplicates).
  // The entries must be valid (as FromProto checks).
  MergeCounts Merge(const std::vector<proto::CostEntry>& entries);

  int size() const { return table_.entry_size(); }
  const proto::CostTable& proto() const { return table_; }

 private:
  static std::string Key(const std::string& signature, const std::string& device);

  proto::CostTable table_;
  std::unordered_map<std::string, int> index_;  // Key -> entry index
};

}  // namespace loom

#endif  // LOOM_COST_MODEL_COST_TABLE_H_
