#include "runtime/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom {
namespace {

using Json = nlohmann::json;

// The format's own cap on the header, so a corrupt length cannot make
// the reader allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100 << 20;

constexpr std::pair<DataType, const char*> kDtypeNames[] = {
    {proto::FP32, "F32"}, {proto::FP16, "F16"},  {proto::BF16, "BF16"}, {proto::FP64, "F64"},
    {proto::INT32, "I32"}, {proto::INT64, "I64"}, {proto::BOOL, "BOOL"},
};

const char* DtypeName(DataType dtype) {
  for (const auto& [d, name] : kDtypeNames) {
    if (d == dtype) return name;
  }
  return nullptr;
}

StatusOr<DataType> DtypeOf(const std::string& name) {
  for (const auto& [d, n] : kDtypeNames) {
    if (name == n) return d;
  }
  return InvalidArgument("dtype '", name, "' is not one Loom holds (F32, F16, BF16, F64, I32, "
                         "I64, BOOL)");
}

void PutLittleEndian64(uint64_t v, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t GetLittleEndian64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

struct Entry {
  std::string name;
  DataType dtype;
  Shape shape;
  uint64_t begin, end;
};

// One tensor's header entry, checked on its own.
StatusOr<Entry> ParseEntry(const std::string& name, const Json& j) {
  if (!j.is_object()) return InvalidArgument("is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!j.contains(key)) return InvalidArgument("has no '", key, "'");
  }
  Entry e;
  e.name = name;
  if (!j["dtype"].is_string()) return InvalidArgument("dtype is not a string");
  LOOM_ASSIGN_OR_RETURN(e.dtype, DtypeOf(j["dtype"].get<std::string>()));
  if (!j["shape"].is_array()) return InvalidArgument("shape is not an array");
  uint64_t elements = 1;
  for (const Json& d : j["shape"]) {
    if (!d.is_number_unsigned()) return InvalidArgument("shape holds ", d.dump());
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && elements > std::numeric_limits<int64_t>::max() / 8 / dim) {
      return InvalidArgument("shape ", j["shape"].dump(), " is too large");
    }
    elements *= dim;
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  const Json& offsets = j["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return InvalidArgument("data_offsets ", offsets.dump(), " is not [begin, end]");
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  const uint64_t bytes = elements * SizeOf(e.dtype);
  if (e.end < e.begin || e.end - e.begin != bytes) {
    return InvalidArgument("data_offsets ", offsets.dump(), " hold ",
                           e.end < e.begin ? 0 : e.end - e.begin, " bytes, but ",
                           j["dtype"].get<std::string>(), " ", j["shape"].dump(), " needs ",
                           bytes);
  }
  return e;
}

}  // namespace

std::string EncodeSafetensors(const SafetensorsContents& contents) {
  Json header = Json::object();
  if (!contents.metadata.empty()) header["__metadata__"] = contents.metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : contents.tensors) {
    const char* dtype = DtypeName(t.dtype());
    CHECK(dtype != nullptr) << name << ": no safetensors dtype for " << DataTypeName(t.dtype());
    const uint64_t bytes = t.initialized() ? t.bytes() : 0;
    CHECK_EQ(bytes, static_cast<uint64_t>(t.bytes())) << name << " has no storage";
    header[name] = {{"dtype", dtype}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  PutLittleEndian64(text.size(), out.data());
  out.reserve(8 + text.size() + offset);
  out += text;
  for (const auto& [name, t] : contents.tensors) {
    out.append(static_cast<const char*>(t.raw_data()), t.bytes());
  }
  return out;
}

StatusOr<SafetensorsContents> DecodeSafetensors(const std::string& bytes,
                                                const std::string& origin) {
  auto bad = [&](auto&&... what) {
    return InvalidArgument(origin, ": not a valid safetensors file: ", what...);
  };
  if (bytes.size() < 8) return bad("shorter than its 8-byte header length");
  const uint64_t header_bytes = GetLittleEndian64(bytes.data());
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - 8) {
    return bad("the header claims ", header_bytes, " bytes but the file has ", bytes.size());
  }
  Json header = Json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_bytes, nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return bad("the header is not a JSON object");
  }
  SafetensorsContents out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) return bad("__metadata__ '", key, "' is not a string");
        out.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    StatusOr<Entry> e = ParseEntry(name, value);
    if (!e.ok()) return bad("tensor '", name, "': ", e.status().message());
    entries.push_back(std::move(*e));
  }
  // The byte ranges must tile the data exactly: no overlap, no gap.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  const uint64_t data_bytes = bytes.size() - 8 - header_bytes;
  uint64_t next = 0;
  for (const Entry& e : entries) {
    if (e.begin != next) {
      return bad("tensor '", e.name, "' starts at byte ", e.begin, " where ", next,
                 " was expected (ranges overlap or leave a gap)");
    }
    next = e.end;
  }
  if (next != data_bytes) {
    return bad("the tensors hold ", next, " bytes but the file has ", data_bytes,
               " after the header");
  }
  const char* data = bytes.data() + 8 + header_bytes;
  for (const Entry& e : entries) {
    Tensor t(TensorMeta{e.dtype, e.shape});
    if (e.end > e.begin) std::memcpy(t.raw_data(), data + e.begin, e.end - e.begin);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

}  // namespace loom
