// The Plan as an artifact: proto conversion, validation, files.
#include <set>
#include <unordered_map>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include "framework/serialization.h"
#include "framework/verifier.h"
#include "scheduler/plan.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

constexpr const char* kPlanMagic = "LOOMPLAN";

void SetCoords(const RankCoords& c, proto::Coords* out) {
  out->set_dp(c.dp);
  out->set_mp(c.mp);
  out->set_pp(c.pp);
}

RankCoords CoordsOf(const proto::Coords& c) { return RankCoords{c.dp(), c.mp(), c.pp()}; }

void ProgramSetToProto(const ProgramSet& set, proto::ProgramSetDesc* out) {
  for (const auto& [key, program] : set.programs) {
    proto::JobProgramDesc* p = out->add_programs();
    p->set_type(JobTypeName(key.type));
    p->set_chunk(key.chunk);
    *p->mutable_program() = program.ToProto();
  }
  *out->mutable_startup() = set.startup.ToProto();
}

StatusOr<Program> ProgramFromProto(const proto::ProgramDesc& desc) {
  LOOM_ASSIGN_OR_RETURN(Program program, Program::FromProto(desc));
  LOOM_RETURN_IF_ERROR(VerifyProgram(program));
  return program;
}

StatusOr<ProgramSet> ProgramSetFromProto(const proto::ProgramSetDesc& desc) {
  ProgramSet set;
  // Programs are named as in listings: with their chunk when the set has
  // chunks.
  bool with_chunk = false;
  for (const proto::JobProgramDesc& p : desc.programs()) with_chunk |= p.chunk() != 0;
  for (int i = 0; i < desc.programs_size(); ++i) {
    const proto::JobProgramDesc& p = desc.programs(i);
    StatusOr<JobType> type = ParseJobType(p.type());
    if (!type.ok()) return type.status().WithContext(StrCat("program ", i));
    const JobProgramKey key{*type, p.chunk()};
    const std::string name = JobProgramName(key, with_chunk);
    if (p.chunk() < 0) return InvalidArgument("program ", i, " (", name, "): negative chunk");
    if (set.programs.count(key)) return InvalidArgument("program ", i, ": a second ", name, " program");
    StatusOr<Program> program = ProgramFromProto(p.program());
    if (!program.ok()) return program.status().WithContext(StrCat(name, " program"));
    set.programs.emplace(key, std::move(program).value());
  }
  StatusOr<Program> startup = ProgramFromProto(desc.startup());
  if (!startup.ok()) return startup.status().WithContext("startup program");
  set.startup = std::move(startup).value();
  return set;
}

Status CheckLayout(const proto::PlanDesc& desc) {
  const proto::Coords& l = desc.layout();
  for (auto [field, value] : {std::pair{"layout.dp", l.dp()}, std::pair{"layout.mp", l.mp()},
                              std::pair{"layout.pp", l.pp()}}) {
    if (value < 1) return InvalidArgument(field, " must be at least 1, got ", value);
  }
  const int64_t world = int64_t{l.dp()} * l.mp() * l.pp();
  if (desc.ranks_size() != world) {
    return InvalidArgument("the plan lists ", desc.ranks_size(), " ranks but layout dp=",
                           l.dp(), " mp=", l.mp(), " pp=", l.pp(), " has ", world);
  }
  const int n = desc.sharding_degree();
  if (n < 0 || (n > 0 && (n < 2 || n >= l.dp() || l.dp() % n != 0))) {
    return InvalidArgument("sharding_degree ", n, " must be 0 or a divisor of layout.dp (",
                           l.dp(), ") between 2 and dp/2");
  }
  return Status::OK();
}

// Checks one rank's fields against the layout and its program set, and
// fills everything but the program set.
Status RankFromProto(const proto::RankPlanDesc& desc, int index, const ParallelLayout& layout,
                     const std::vector<std::shared_ptr<const ProgramSet>>& sets,
                     RankPlan* rp) {
  if (desc.rank() != index) {
    return InvalidArgument("ranks[", index, "] is rank ", desc.rank(),
                           "; ranks must be listed in order from 0");
  }
  rp->rank = index;
  const std::string where = StrCat("rank ", index);
  rp->coords = CoordsOf(desc.coords());
  const RankCoords want = layout.Coords(index);
  if (!(rp->coords == want)) {
    return InvalidArgument(where, ": coords ", CoordsToString(rp->coords),
                           " do not match the layout, which puts it at ", CoordsToString(want));
  }
  if (desc.program_set() < 0 || desc.program_set() >= static_cast<int>(sets.size())) {
    return NotFound(where, ": program_set ", desc.program_set(), " does not exist (the plan has ",
                    sets.size(), ")");
  }
  rp->program_set = sets[desc.program_set()];
  rp->num_chunks = desc.has_num_chunks() ? desc.num_chunks() : 1;
  if (rp->num_chunks < 1) {
    return InvalidArgument(where, ": num_chunks must be at least 1, got ", rp->num_chunks);
  }
  for (int j = 0; j < desc.jobs_size(); ++j) {
    const proto::JobDesc& jd = desc.jobs(j);
    StatusOr<JobType> type = ParseJobType(jd.type());
    if (!type.ok()) return type.status().WithContext(StrCat(where, ", job ", j));
    Job job{*type, jd.micro_batch(), jd.chunk()};
    job.part = jd.part();
    job.op_begin = jd.op_begin();
    job.op_end = jd.has_op_end() ? jd.op_end() : -1;
    const bool with_chunk = rp->num_chunks > 1 || job.chunk != 0;
    const std::string at = StrCat(where, ", job ", j, " (", JobToString(job, with_chunk), ")");
    if (job.micro_batch < 0) return InvalidArgument(at, ": negative micro_batch");
    if (job.chunk < 0 || job.chunk >= rp->num_chunks) {
      return InvalidArgument(at, ": chunk ", job.chunk, " is outside the rank's ",
                             rp->num_chunks, " chunk(s)");
    }
    if (rp->ProgramFor(job) == nullptr) {
      return NotFound(at, ": program set ", desc.program_set(), " has no ",
                      JobProgramName({job.type, job.chunk}, rp->num_chunks > 1), " program");
    }
    const int ops = rp->ProgramFor(job)->global_block().num_ops();
    if (job.part < 0 || job.op_begin < 0 || job.op_begin > ops ||
        (job.op_end >= 0 && (job.op_end <= job.op_begin || job.op_end > ops))) {
      return InvalidArgument(at, ": part ", job.part, " with ops ", job.op_begin, "-",
                             job.op_end, " does not fit its program's ", ops, " ops");
    }
    rp->jobs.push_back(job);
  }
  return Status::OK();
}

}  // namespace

proto::PlanDesc PlanToProto(const Plan& plan) {
  proto::PlanDesc desc;
  *desc.mutable_resolved() = plan.resolved;
  desc.mutable_layout()->set_dp(plan.layout.dp);
  desc.mutable_layout()->set_mp(plan.layout.mp);
  desc.mutable_layout()->set_pp(plan.layout.pp);
  if (plan.layout.sharding > 0) desc.set_sharding_degree(plan.layout.sharding);
  desc.mutable_model()->set_name(plan.model_name);
  for (const auto& [key, value] : plan.model_config) {
    (*desc.mutable_model()->mutable_config())[key] = value;
  }
  // Each distinct set once, in order of first use.
  std::unordered_map<const void*, int> index;
  for (const RankPlan& rp : plan.ranks) {
    auto [it, fresh] = index.emplace(rp.programs_key(), desc.program_sets_size());
    if (fresh) {
      static const ProgramSet* const kEmpty = new ProgramSet();
      ProgramSetToProto(rp.program_set ? *rp.program_set : *kEmpty, desc.add_program_sets());
    }
    proto::RankPlanDesc* r = desc.add_ranks();
    r->set_rank(rp.rank);
    SetCoords(rp.coords, r->mutable_coords());
    r->set_num_chunks(rp.num_chunks);
    if (!google::protobuf::util::MessageDifferencer::Equals(rp.resolved, plan.resolved)) {
      *r->mutable_resolved() = rp.resolved;
    }
    for (const Job& job : rp.jobs) {
      JobToDesc(job, r->add_jobs());
    }
    r->set_program_set(it->second);
  }
  return desc;
}

StatusOr<Plan> PlanFromProto(const proto::PlanDesc& desc) {
  LOOM_RETURN_IF_ERROR(CheckLayout(desc));
  Plan plan;
  plan.layout = ParallelLayout{desc.layout().dp(), desc.layout().mp(), desc.layout().pp(),
                               desc.sharding_degree()};
  // Gradients cross on a ring of their own where the schedule runs a V.
  const StatusOr<const ScheduleInfo*> schedule = FindSchedule(desc.resolved().schedule_mode());
  plan.layout.v_shape = schedule.ok() && (*schedule)->v_shape;
  plan.resolved = desc.resolved();
  plan.model_name = desc.model().name();
  plan.model_config.insert(desc.model().config().begin(), desc.model().config().end());
  std::vector<std::shared_ptr<const ProgramSet>> sets;
  for (int i = 0; i < desc.program_sets_size(); ++i) {
    StatusOr<ProgramSet> set = ProgramSetFromProto(desc.program_sets(i));
    if (!set.ok()) return set.status().WithContext(StrCat("program set ", i));
    // Made non-const: MutableProgramSet may edit a set no one else holds.
    sets.push_back(std::make_shared<ProgramSet>(std::move(set).value()));
  }
  plan.ranks.resize(desc.ranks_size());
  for (int r = 0; r < desc.ranks_size(); ++r) {
    LOOM_RETURN_IF_ERROR(RankFromProto(desc.ranks(r), r, plan.layout, sets, &plan.ranks[r]));
    plan.ranks[r].resolved = desc.ranks(r).has_resolved() ? desc.ranks(r).resolved() : plan.resolved;
  }
  return plan;
}

Status SavePlan(const Plan& plan, const std::string& path) {
  const proto::PlanDesc desc = PlanToProto(plan);
  std::string bytes;
  if (IsTextFormatPath(path)) {
    CHECK(google::protobuf::TextFormat::PrintToString(desc, &bytes));
  } else {
    // Deterministic, so that the same plan always makes the same file.
    std::string payload;
    {
      google::protobuf::io::StringOutputStream out(&payload);
      google::protobuf::io::CodedOutputStream coded(&out);
      coded.SetSerializationDeterministic(true);
      CHECK(desc.SerializeToCodedStream(&coded));
    }
    bytes = FrameBytes(kPlanMagic, payload);
  }
  return WriteFileAtomically(path, bytes);
}

StatusOr<Plan> LoadPlan(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  proto::PlanDesc desc;
  Status parsed;
  if (IsTextFormatPath(path)) {
    parsed = ParseTextFormat(bytes, "plan", &desc);
  } else {
    StatusOr<std::string> payload = UnframeBytes(bytes, kPlanMagic, "plan");
    if (!payload.ok()) {
      parsed = payload.status();
    } else {
      parsed = ParseBinaryPayload(*payload, "plan", &desc);
    }
  }
  if (!parsed.ok()) return parsed.WithContext(path);
  StatusOr<Plan> plan = PlanFromProto(desc);
  if (!plan.ok()) return plan.status().WithContext(path);
  return plan;
}

}  // namespace loom
