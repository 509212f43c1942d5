#include "runtime/checkpoint.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "framework/file_util.h"
#include "runtime/safetensors.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kManifest[] = "manifest.json";
constexpr char kModelFile[] = "model.safetensors";
constexpr char kOptimizerFile[] = "optimizer.safetensors";
constexpr char kFormat[] = "loom-checkpoint";
constexpr int kVersion = 1;
constexpr char kStepPrefix[] = "step-";
// A save in progress: `.step-NNNNNNNN.partial-<pid>`.
constexpr char kPartialMarker[] = ".partial-";

std::string Crc32Hex(const std::string& bytes) {
  const uLong crc = crc32_z(crc32_z(0L, Z_NULL, 0),
                            reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08lx", crc);
  return hex;
}

std::string StepDirName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "%s%08lld", kStepPrefix, static_cast<long long>(step));
  return name;
}

// The step a checkpoint directory's name gives, or -1 if it is not one.
int64_t StepOfDirName(const std::string& name) {
  const size_t n = sizeof(kStepPrefix) - 1;
  if (name.size() <= n || name.compare(0, n, kStepPrefix) != 0 || name.size() > n + 18) return -1;
  int64_t step = 0;
  for (size_t i = n; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// Checkpoint directories under `save_dir`, newest first.
std::vector<std::pair<int64_t, fs::path>> CheckpointsIn(const fs::path& save_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(save_dir, ec)) {
    const int64_t step = StepOfDirName(entry.path().filename().string());
    if (step >= 0 && entry.is_directory(ec)) found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  return found;
}

Status RemoveAll(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  return ec ? DataLoss(path.string(), ": cannot remove: ", ec.message()) : Status::OK();
}

Json ManifestOf(const CheckpointInfo& info, const Json& files) {
  Json m;
  m["format"] = kFormat;
  m["version"] = kVersion;
  m["step"] = info.step;
  m["model"] = info.model;
  m["layout"] = info.layout;
  m["data"] = {{"source", info.data}, {"next_step", info.step}};
  // Dropout keys its masks on (seed, step, global position): that is the
  // whole RNG state.
  auto seed = info.model.find("seed");
  m["rng"] = {{"kind", "counter-based: (seed, step, global position)"},
              {"seed", seed == info.model.end() ? "" : seed->second},
              {"step", info.step}};
  m["files"] = files;
  return m;
}

StatusOr<CheckpointInfo> InfoOf(const Json& m) {
  if (!m.is_object() || m.value("format", "") != kFormat) {
    return InvalidArgument("not a Loom checkpoint manifest (format is not '", kFormat, "')");
  }
  if (m.value("version", 0) != kVersion) {
    return InvalidArgument("manifest version ", m.value("version", Json()).dump(),
                           " is not ", kVersion);
  }
  CheckpointInfo info;
  if (!m["step"].is_number_integer() || m["step"].get<int64_t>() < 0) {
    return InvalidArgument("step ", m["step"].dump(), " is not a count of steps");
  }
  info.step = m["step"].get<int64_t>();
  if (!m["model"].is_object()) return InvalidArgument("model is not an object");
  for (const auto& [key, value] : m["model"].items()) {
    if (!value.is_string()) return InvalidArgument("model ", key, " is not a string");
    info.model[key] = value.get<std::string>();
  }
  info.layout = m.value("layout", "");
  if (m.contains("data") && m["data"].is_object()) info.data = m["data"].value("source", "");
  return info;
}

// Reads `dir` as one checkpoint, verifying every file the manifest lists.
StatusOr<Checkpoint> LoadOne(const fs::path& dir) {
  const std::string where = dir.string();
  StatusOr<std::string> manifest_text = ReadFile((dir / kManifest).string());
  if (!manifest_text.ok()) {
    return NotFound(where, ": no ", kManifest, " (not a checkpoint, or a save that never finished)");
  }
  const Json manifest = Json::parse(*manifest_text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded()) return DataLoss(where, "/", kManifest, ": not JSON");
  StatusOr<CheckpointInfo> info = InfoOf(manifest);
  if (!info.ok()) return info.status().WithContext(StrCat(where, "/", kManifest));
  Checkpoint out;
  out.path = where;
  out.info = std::move(*info);
  if (!manifest["files"].is_object()) return DataLoss(where, "/", kManifest, ": files is not an object");
  for (const char* name : {kModelFile, kOptimizerFile}) {
    const std::string path = (dir / name).string();
    if (!manifest["files"].contains(name)) return DataLoss(where, "/", kManifest, ": does not list ", name);
    const Json& expect = manifest["files"][name];
    LOOM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
    if (!expect.is_object() || expect.value("bytes", Json()) != Json(bytes.size()) ||
        expect.value("crc32", "") != Crc32Hex(bytes)) {
      return DataLoss(path, ": ", bytes.size(), " bytes with CRC-32 ", Crc32Hex(bytes),
                      ", but the manifest says ", expect.dump(), " (the file is damaged)");
    }
    LOOM_ASSIGN_OR_RETURN(SafetensorsContents contents, DecodeSafetensors(bytes, path));
    (name == kModelFile ? out.state.parameters : out.state.optimizer) = std::move(contents.tensors);
  }
  return out;
}

}  // namespace

StatusOr<std::string> SaveCheckpoint(const std::string& save_dir, const CheckpointInfo& info,
                                     const TrainingState& state, int keep) {
  if (keep < 1) return InvalidArgument("keep ", keep, " checkpoints: must be at least 1");
  const fs::path root(save_dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return NotFound(save_dir, ": cannot create: ", ec.message());
  // Partial saves of killed runs (one writer per save_dir, so none is live).
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().filename().string().find(kPartialMarker) != std::string::npos) {
      LOOM_RETURN_IF_ERROR(RemoveAll(entry.path()));
    }
  }
  const std::string name = StepDirName(info.step);
  const fs::path partial = root / StrCat(".", name, kPartialMarker, getpid());
  const fs::path final_dir = root / name;
  fs::create_directories(partial, ec);
  if (ec) return NotFound(partial.string(), ": cannot create: ", ec.message());

  Json files = Json::object();
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"loom_step", std::to_string(info.step)}};
  for (const auto& [file, tensors] : {std::pair{kModelFile, &state.parameters},
                                      std::pair{kOptimizerFile, &state.optimizer}}) {
    const std::string bytes = EncodeSafetensors({*tensors, metadata});
    files[file] = {{"bytes", bytes.size()}, {"crc32", Crc32Hex(bytes)}};
    LOOM_RETURN_IF_ERROR(WriteFileAtomically((partial / file).string(), bytes));
  }
  // The manifest last: a directory without one was never finished.
  LOOM_RETURN_IF_ERROR(
      WriteFileAtomically((partial / kManifest).string(), ManifestOf(info, files).dump(2) + "\n"));
  if (fs::exists(final_dir, ec)) LOOM_RETURN_IF_ERROR(RemoveAll(final_dir));
  fs::rename(partial, final_dir, ec);
  if (ec) return DataLoss(final_dir.string(), ": cannot rename the finished save into place: ", ec.message());
  LOOM_RETURN_IF_ERROR(SyncDirectory(root.string()));
  const auto all = CheckpointsIn(root);
  for (size_t i = keep; i < all.size(); ++i) LOOM_RETURN_IF_ERROR(RemoveAll(all[i].second));
  return final_dir.string();
}

bool HoldsCheckpoint(const std::string& save_dir) {
  return !save_dir.empty() && !CheckpointsIn(save_dir).empty();
}

StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  const fs::path dir(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(path, ": not a directory");
  if (fs::exists(dir / kManifest, ec)) return LoadOne(dir);
  const auto all = CheckpointsIn(dir);
  if (all.empty()) return NotFound(path, ": holds no checkpoint (no ", kManifest, ", no step-N)");
  Status newest;
  for (const auto& [step, candidate] : all) {
    StatusOr<Checkpoint> c = LoadOne(candidate);
    if (c.ok()) return c;
    std::fprintf(stderr, "loom: skipping a checkpoint that does not read back: %s\n",
                 c.status().message().c_str());
    if (newest.ok()) newest = c.status();
  }
  return DataLoss(path, ": no checkpoint reads back whole; the newest: ", newest.message());
}

Status CheckResumable(const Checkpoint& checkpoint,
                      const std::map<std::string, std::string>& model) {
  const auto& saved = checkpoint.info.model;
  // A program file's run records the program's identity, a preset's its
  // config: across the two, name both rather than a first key.
  auto program = [](const std::map<std::string, std::string>& m) -> std::string {
    auto it = m.find("program_crc32");
    return it == m.end() ? "" : StrCat("a program file (CRC-32 ", it->second, ")");
  };
  if (program(saved) != program(model)) {
    auto name = [&](const std::map<std::string, std::string>& m) {
      return program(m).empty() ? std::string("a preset model") : program(m);
    };
    return InvalidArgument(checkpoint.path, ": saved by a run of ", name(saved),
                           ", but this run trains ", name(model));
  }
  for (const auto& [key, value] : model) {
    auto it = saved.find(key);
    const std::string was = it == saved.end() ? "(none)" : it->second;
    if (was != value) {
      return InvalidArgument(checkpoint.path, ": saved by a run with model ", key, " = ", was,
                             ", but this run has ", value);
    }
  }
  return Status::OK();
}

}  // namespace loom
