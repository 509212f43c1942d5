#include "scheduler/plan.h"

#include <set>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver_util.h>

namespace loom {

std::string JobProgramName(const JobProgramKey& key, bool with_chunk) {
  std::string name = JobTypeName(key.type);
  if (with_chunk) name += StrCat(".", key.chunk);
  return name;
}

ProgramSet ProgramSet::Clone() const {
  ProgramSet copy;
  for (const auto& [key, program] : programs) copy.programs.emplace(key, program.Clone());
  copy.startup = startup.Clone();
  return copy;
}

namespace {

const ProgramSet& EmptyProgramSet() {
  static const ProgramSet* const empty = new ProgramSet();
  return *empty;
}

}  // namespace

const std::map<JobProgramKey, Program>& RankPlan::programs() const {
  return (program_set ? *program_set : EmptyProgramSet()).programs;
}

const Program& RankPlan::startup() const {
  return (program_set ? *program_set : EmptyProgramSet()).startup;
}

ProgramSet& MutableProgramSet(RankPlan& rank) {
  if (rank.program_set == nullptr) {
    rank.program_set = std::make_shared<ProgramSet>();
  } else if (rank.program_set.use_count() > 1) {
    rank.program_set = std::make_shared<ProgramSet>(rank.program_set->Clone());
  }
  // Every set is created non-const (above, or by whoever wrapped it) and no
  // other rank holds this one now, so editing it is safe.
  return const_cast<ProgramSet&>(*rank.program_set);
}

int CountProgramSets(const Plan& plan) {
  std::set<const void*> sets;
  for (const RankPlan& rp : plan.ranks) sets.insert(rp.programs_key());
  return static_cast<int>(sets.size());
}

void JobToDesc(const Job& job, proto::JobDesc* desc) {
  desc->set_type(JobTypeName(job.type));
  desc->set_micro_batch(job.micro_batch);
  desc->set_chunk(job.chunk);
  if (job.whole()) return;
  desc->set_part(job.part);
  desc->set_op_begin(job.op_begin);
  if (job.op_end >= 0) desc->set_op_end(job.op_end);
}

std::string PlanToJson(const Plan& plan) {
  namespace pb = google::protobuf;
  proto::PlanListing listing;
  for (const RankPlan& rp : plan.ranks) {
    proto::PlanListing::Rank* r = listing.add_ranks();
    r->set_rank(rp.rank);
    r->mutable_coords()->set_dp(rp.coords.dp);
    r->mutable_coords()->set_mp(rp.coords.mp);
    r->mutable_coords()->set_pp(rp.coords.pp);
    for (const Job& job : rp.jobs) {
      JobToDesc(job, r->add_jobs());
    }
    for (const auto& [key, program] : rp.programs()) {
      pb::ListValue& ops =
          (*r->mutable_programs())[JobProgramName(key, rp.num_chunks > 1)];
      for (Op* op : program.global_block().ops()) {
        ops.add_values()->set_string_value(op->type());
      }
    }
  }
  // The JSON printer writes map entries in wire order. MessageToJsonString
  // serializes them in hash order, which changes from run to run;
  // deterministic serialization sorts them, so a plan always prints alike.
  std::string binary;
  {
    pb::io::StringOutputStream out(&binary);
    pb::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    CHECK(listing.SerializeToCodedStream(&coded));
  }
  static pb::util::TypeResolver* const resolver = pb::util::NewTypeResolverForDescriptorPool(
      "type.googleapis.com", pb::DescriptorPool::generated_pool());
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Fields set are printed (proto2 presence), zeros included; a whole
  // job's absent part fields are not.
  std::string json;
  const auto status = pb::util::BinaryToJsonString(
      resolver, "type.googleapis.com/" + listing.GetDescriptor()->full_name(), binary,
      &json, options);
  CHECK(status.ok()) << status.ToString();
  return json;
}

std::string PlanToText(const Plan& plan) {
  std::ostringstream os;
  for (const RankPlan& rp : plan.ranks) {
    os << "rank " << rp.rank << " (" << CoordsToString(rp.coords) << "): "
       << JobListToString(rp.jobs, rp.num_chunks > 1) << "\n";
    for (const auto& [key, program] : rp.programs()) {
      os << "  " << JobProgramName(key, rp.num_chunks > 1) << ": "
         << program.global_block().num_ops() << " ops\n";
    }
  }
  return os.str();
}

}  // namespace loom
