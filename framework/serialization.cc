#include "framework/serialization.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "framework/file_util.h"
#include "framework/verifier.h"

namespace loom {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'P', 'R', 'O', 'G'};
constexpr size_t kHeaderSize = sizeof(kMagic) + 2 * sizeof(uint64_t);

uint64_t Fnv1a64(const std::string& data) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// Collects text-format parse errors into one line.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) {
      first_ = StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

bool IsTextFormatPath(const std::string& path) {
  auto ends_with = [&](const std::string& s) {
    return path.size() >= s.size() &&
           path.compare(path.size() - s.size(), s.size(), s) == 0;
  };
  return ends_with(".pbtxt") || ends_with(".txt");
}

std::string SerializeProgramBinary(const Program& program) {
  std::string payload;
  CHECK(program.ToProto().SerializeToString(&payload));
  uint64_t size = payload.size();
  uint64_t sum = Fnv1a64(payload);
  std::string out(kHeaderSize, '\0');
  std::memcpy(&out[0], kMagic, sizeof(kMagic));
  std::memcpy(&out[sizeof(kMagic)], &size, sizeof(size));
  std::memcpy(&out[sizeof(kMagic) + sizeof(size)], &sum, sizeof(sum));
  return out + payload;
}

std::string SerializeProgramText(const Program& program) {
  std::string out;
  CHECK(google::protobuf::TextFormat::PrintToString(program.ToProto(), &out));
  return out;
}

StatusOr<Program> ParseProgram(const std::string& bytes, bool text_format) {
  proto::ProgramDesc desc;
  if (text_format) {
    google::protobuf::TextFormat::Parser parser;
    ErrorCollector errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(bytes, &desc)) {
      return DataLoss("not a text-format program: ", errors.first());
    }
  } else {
    if (bytes.size() < kHeaderSize ||
        std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
      return DataLoss("not a Loom binary program (bad magic; text-format "
                      "files must end in .pbtxt)");
    }
    uint64_t size, sum;
    std::memcpy(&size, bytes.data() + sizeof(kMagic), sizeof(size));
    std::memcpy(&sum, bytes.data() + sizeof(kMagic) + sizeof(size),
                sizeof(sum));
    std::string payload = bytes.substr(kHeaderSize);
    if (payload.size() != size) {
      return DataLoss("truncated program: header promises ", size,
                      " bytes, file holds ", payload.size());
    }
    if (Fnv1a64(payload) != sum) {
      return DataLoss("corrupted program: checksum mismatch");
    }
    if (!desc.ParseFromString(payload)) {
      return DataLoss("corrupted program: payload does not parse");
    }
  }
  LOOM_ASSIGN_OR_RETURN(Program program, Program::FromProto(desc));
  LOOM_RETURN_IF_ERROR(VerifyProgram(program));
  return program;
}

Status SaveProgram(const Program& program, const std::string& path) {
  std::string bytes = IsTextFormatPath(path) ? SerializeProgramText(program)
                                             : SerializeProgramBinary(program);
  return WriteFileAtomically(path, bytes);
}

StatusOr<Program> LoadProgram(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto program = ParseProgram(bytes, IsTextFormatPath(path));
  if (!program.ok()) return program.status().WithContext(path);
  return program;
}

}  // namespace loom
