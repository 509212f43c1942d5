#include "framework/serialization.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "framework/file_util.h"
#include "framework/verifier.h"

namespace loom {
namespace {

constexpr const char* kProgramMagic = "LOOMPROG";
constexpr size_t kMagicSize = 8;
constexpr size_t kHeaderSize = kMagicSize + 2 * sizeof(uint64_t);

uint64_t Fnv1a64(const std::string& data) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}


}  // namespace

bool IsTextFormatPath(const std::string& path) {
  auto ends_with = [&](const std::string& s) {
    return path.size() >= s.size() &&
           path.compare(path.size() - s.size(), s.size(), s) == 0;
  };
  return ends_with(".pbtxt") || ends_with(".txt");
}

Status ParseTextFormat(const std::string& text, const std::string& what,
                       google::protobuf::Message* message) {
  Status s = ParseTextProto(text, StrCat("not a text-format ", what), message);
  return s.ok() ? s : Status(StatusCode::kDataLoss, s.message());
}

Status ParseBinaryPayload(const std::string& payload, const std::string& what,
                          google::protobuf::Message* message) {
  // Partial, then checked: ParseFromString would log protobuf's own line
  // about missing required fields ahead of Loom's one-line error.
  if (!message->ParsePartialFromString(payload)) {
    return DataLoss("corrupted ", what, ": payload does not parse");
  }
  if (!message->IsInitialized()) {
    return DataLoss("corrupted ", what, ": missing required fields: ",
                    message->InitializationErrorString());
  }
  return Status::OK();
}

std::string FrameBytes(const std::string& magic, const std::string& payload) {
  CHECK_EQ(magic.size(), kMagicSize);
  uint64_t size = payload.size();
  uint64_t sum = Fnv1a64(payload);
  std::string out(kHeaderSize, '\0');
  std::memcpy(&out[0], magic.data(), kMagicSize);
  std::memcpy(&out[kMagicSize], &size, sizeof(size));
  std::memcpy(&out[kMagicSize + sizeof(size)], &sum, sizeof(sum));
  return out + payload;
}

StatusOr<std::string> UnframeBytes(const std::string& bytes,
                                   const std::string& magic,
                                   const std::string& what) {
  CHECK_EQ(magic.size(), kMagicSize);
  if (bytes.size() < kHeaderSize ||
      std::memcmp(bytes.data(), magic.data(), kMagicSize) != 0) {
    return DataLoss("not a Loom binary ", what, " (bad magic; text-format "
                    "files must end in .pbtxt)");
  }
  uint64_t size, sum;
  std::memcpy(&size, bytes.data() + kMagicSize, sizeof(size));
  std::memcpy(&sum, bytes.data() + kMagicSize + sizeof(size), sizeof(sum));
  std::string payload = bytes.substr(kHeaderSize);
  if (payload.size() != size) {
    return DataLoss("truncated ", what, ": header promises ", size,
                    " bytes, file holds ", payload.size());
  }
  if (Fnv1a64(payload) != sum) {
    return DataLoss("corrupted ", what, ": checksum mismatch");
  }
  return payload;
}

std::string SerializeProgramBinary(const Program& program) {
  std::string payload;
  CHECK(program.ToProto().SerializeToString(&payload));
  return FrameBytes(kProgramMagic, payload);
}

std::string SerializeProgramText(const Program& program) {
  std::string out;
  CHECK(google::protobuf::TextFormat::PrintToString(program.ToProto(), &out));
  return out;
}

StatusOr<Program> ParseProgram(const std::string& bytes, bool text_format) {
  proto::ProgramDesc desc;
  if (text_format) {
    LOOM_RETURN_IF_ERROR(ParseTextFormat(bytes, "program", &desc));
  } else {
    LOOM_ASSIGN_OR_RETURN(std::string payload,
                          UnframeBytes(bytes, kProgramMagic, "program"));
    LOOM_RETURN_IF_ERROR(ParseBinaryPayload(payload, "program", &desc));
  }
  LOOM_ASSIGN_OR_RETURN(Program program, Program::FromProto(desc));
  LOOM_RETURN_IF_ERROR(VerifyProgram(program));
  return program;
}

Status SaveProgram(const Program& program, const std::string& path) {
  return WriteFileAtomically(path, IsTextFormatPath(path)
                                       ? SerializeProgramText(program)
                                       : SerializeProgramBinary(program));
}

StatusOr<Program> LoadProgram(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto program = ParseProgram(bytes, IsTextFormatPath(path));
  if (!program.ok()) return program.status().WithContext(path);
  return program;
}

}  // namespace loom
