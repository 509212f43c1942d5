// loom demo: the guided tour. Trains gpt-tiny serially, then on 4 in-process
// ranks (mp=2, pp=2, 1F1B-overlap over 4 micro-batches), prints the two
// runs' losses side by side, writes the parallel run's trace, and simulates the
// layout under 1F1B-overlap beside the measured step.
//
// The simulation prices ops by what this host did in the same seconds as
// the run, as docs/simulator_accuracy.md measures: the last parallel steps
// are each followed by a step of the in-step profiler (loom run
// --interleaved_profile), into a cost table and a cluster file of the
// demo's own. A fresh machine has no profile, and a profile from another
// hour prices the ops at another phase of a VM's cores. The calls' wait
// for busy cores (core_wait) is not measured: since Gloo's loop thread no
// longer preempts, its fit priced the demo's step far too slow
// (docs/performance.md, "The demo").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cost_model/cluster.h"
#include "framework/median.h"
#include "models/token_file_dataset.h"
#include "runtime/cost_model_timer.h"
#include "runtime/parallel_trainer.h"
#include "runtime/serial_trainer.h"
#include "runtime/simulation.h"
#include "runtime/text_sampler.h"
#include "scheduler/timeline_html.h"
#include "scheduler/timeline_metrics.h"
#include "scheduler/trace.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/interleaved_profile_files.h"
#include "tools/profile_util.h"

DEFINE_string(demo_trace, "loom-demo-trace.json", "where loom demo writes its trace");
DEFINE_string(demo_html, "loom-demo-timeline.html",
              "where loom demo writes its measured and simulated timelines");
DEFINE_string(demo_text, "/usr/share/common-licenses/GPL-3",
              "the text loom demo trains on, read as bytes (empty: the synthetic dataset)");

namespace loom {
namespace {

constexpr char kDemoPrompt[] = "This program is ";
constexpr int64_t kSteps = 200;
// The steps followed by a profile step, the first kProfileWarmup of them
// unsampled; the measured step the simulation is set beside is their
// median, taken in the seconds the profile shared.
constexpr int kProfiledSteps = 30;
constexpr int kProfileWarmup = 2;

// A directory of the demo's own for its profile, removed when it ends.
class ScratchDir {
 public:
  static StatusOr<ScratchDir> Create() {
    std::string pattern = (std::filesystem::temp_directory_path() / "loom-demo-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return Internal("cannot make a directory for the demo's profile under ",
                      std::filesystem::temp_directory_path().string());
    }
    return ScratchDir(pattern);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

Status PrintSample(TextSampler& sampler, const char* when) {
  const std::string prompt = kDemoPrompt;
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> text,
                        sampler.Continue(std::vector<int64_t>(prompt.begin(), prompt.end()), 160,
                                         /*temperature=*/0.7f, /*seed=*/FLAGS_seed));
  std::string shown = PrintableBytes(text);
  for (size_t at = shown.find('\n'); at != std::string::npos; at = shown.find('\n', at + 3)) {
    shown.replace(at, 1, "\n  ");
  }
  std::printf("\n%s, the model continues \"%s\" with:\n  %s\n\n", when, kDemoPrompt,
              shown.c_str());
  return Status::OK();
}

}  // namespace

Status RunDemo(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  // The calls are priced by --cluster's links: the `local` preset's, or
  // this host's as `loom profile --comm` measured them.
  LOOM_ASSIGN_OR_RETURN(proto::Cluster demo_cluster, ClusterFromFlags());
  LOOM_RETURN_IF_ERROR(CheckCpu(demo_cluster, "loom demo trains and simulates on"));
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptPreset("gpt-tiny"));
  config.seed = FLAGS_seed;
  // Steps of about 15 ms on a 2-core host rather than the preset's few:
  // at 8 sequences of 32 a step is about a thousand instructions of
  // microseconds, where the simulator's model of a host's calls is not
  // validated and prices the step 30% slow (docs/performance.md, "The
  // demo").
  config.batch_size = 16;
  config.seq_len = 64;
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  std::shared_ptr<const Dataset> data;
  if (FLAGS_demo_text.empty()) {
    data = std::make_shared<SyntheticDataset>(config.vocab_size, config.seq_len, config.seed);
  } else {
    config.vocab_size = 256;  // bytes
    // At --lr's default (3e-3) this text trains at the edge of stability:
    // rounding differences between any two layouts (dp=2 as well as mp=2
    // x pp=2) grow to 1e-2 in the loss by step 200, and at 1e-3 to 2e-4.
    // At 8e-4 serial and parallel stay within 1e-5.
    if (!FlagGiven("lr")) opt.learning_rate = 8e-4f;
    auto text = TokenFileDataset::Open(FLAGS_demo_text, TokenFileDataset::Width::kByte,
                                       config.seq_len, config.vocab_size, config.seed);
    if (!text.ok()) return text.status().WithContext("--demo_text");
    data = std::move(*text);
  }
  const int64_t steps = kSteps;
  const proto::Strategy strategy = MakeStrategy(1, 2, 2, 4, "1F1B-overlap");
  std::printf(
      "Loom demo: gpt-tiny (%lld layers, hidden %lld, %lld heads, vocab %lld, "
      "%lld x %lld tokens per step, %lld parameters) on %s, %s lr %g, %lld steps,\ntrained "
      "twice: serially, then on 4 ranks "
      "in this process (tensor parallel 2 x pipeline 2, 1F1B-overlap over 4 "
      "micro-batches, Gloo on loopback).\n\n",
      static_cast<long long>(config.num_layers), static_cast<long long>(config.hidden),
      static_cast<long long>(config.num_heads), static_cast<long long>(config.vocab_size),
      static_cast<long long>(config.batch_size), static_cast<long long>(config.seq_len),
      static_cast<long long>(config.NumParameters()), data->Describe().c_str(), opt.type.c_str(),
      opt.learning_rate,
      static_cast<long long>(steps));
  LOOM_ASSIGN_OR_RETURN(auto serial, SerialTrainer::Create(config, opt, data));
  // What the model writes, before and after: a text's own opening words
  // continued byte by byte.
  std::unique_ptr<TextSampler> sampler;
  if (!FLAGS_demo_text.empty()) {
    LOOM_ASSIGN_OR_RETURN(sampler, TextSampler::Create(config));
    LOOM_ASSIGN_OR_RETURN(TrainingState state, serial->State());
    LOOM_RETURN_IF_ERROR(sampler->SetParameters(state.parameters));
    LOOM_RETURN_IF_ERROR(PrintSample(*sampler, "Before training"));
  }
  ParallelTrainer::Options options;
  options.data = data;
  options.trace = true;
  options.pin_cores = true;  // as the CPU clusters it may be simulated on assume
  options.comm.timeout = std::chrono::seconds(30);
  LOOM_ASSIGN_OR_RETURN(auto parallel, ParallelTrainer::Create(config, opt, strategy, options));
  LOOM_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Create());
  InterleavedProfileOptions profile_options;
  profile_options.warmup_steps = kProfileWarmup;
  profile_options.steps = kProfiledSteps - kProfileWarmup;
  profile_options.cluster = demo_cluster;
  InterleavedProfileFiles profile_files;
  profile_files.cost_table = scratch.File("cost_table.pbtxt");
  profile_files.device = TableDevice(demo_cluster);
  profile_files.cluster_out = scratch.File("cluster.pbtxt");
  profile_files.report = nullptr;  // the demo says what it measured itself
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<InterleavedProfile> profile,
                        InterleavedProfile::Create(*parallel, profile_options));
  // The two runs train one after the other, not step by step in turn:
  // between two parallel steps a serial one would let the ranks' threads
  // sleep and the caches cool, and the measured parallel step would no
  // longer be the one `loom run` takes and the simulator models.
  std::printf("Training serially...");
  std::fflush(stdout);
  std::vector<float> serial_loss(steps);
  std::vector<double> serial_step_ms(steps);
  for (int64_t step = 0; step < steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    LOOM_ASSIGN_OR_RETURN(serial_loss[step], serial->Step(step));
    serial_step_ms[step] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::printf(" done; then on 4 ranks, each step set beside the serial one:\n\n");
  std::printf("step   serial loss  parallel loss  |diff|    serial ms  parallel ms\n");
  std::vector<double> parallel_step_ms;  // the profiled steps'
  double profile_seconds = 0;
  double worst = 0, serial_ms = 0, parallel_ms = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const auto t1 = std::chrono::steady_clock::now();
    LOOM_ASSIGN_OR_RETURN(float p, parallel->Step(step));
    const auto t2 = std::chrono::steady_clock::now();
    const float s = serial_loss[step];
    const double sm = serial_step_ms[step];
    const double pm = std::chrono::duration<double, std::milli>(t2 - t1).count();
    serial_ms += sm;
    parallel_ms += pm;
    if (step >= steps - kProfiledSteps) {
      parallel_step_ms.push_back(pm);
      LOOM_RETURN_IF_ERROR(profile->Step(nullptr));
      profile_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count();
    }
    worst = std::max(worst, static_cast<double>(std::fabs(s - p)));
    if (step + 1 < steps) parallel->TakeTrace();  // keep the last step's
    if (step % 20 == 0 || step == steps - 1) {
      std::printf("%4lld   %11.6f  %13.6f  %.1e  %9.2f  %11.2f\n",
                  static_cast<long long>(step), s, p, std::fabs(s - p), sm, pm);
    }
  }
  const float first = serial_loss.front(), last = serial_loss.back();
  std::vector<TraceEvent> measured = parallel->TakeTrace();
  LOOM_RETURN_IF_ERROR(WriteChromeTrace(measured, FLAGS_demo_trace));
  std::printf(
      "\nloss %.4f -> %.4f (%.0f%% of the first step); largest serial/parallel "
      "difference %.1e.\n%.2f ms per serial step, %.2f ms per parallel step (4 ranks "
      "sharing this machine's cores).\nThe last parallel step's trace is in %s: "
      "open it in https://ui.perfetto.dev (one process per rank, one thread per "
      "stream).\n",
      first, last, 100.0f * last / first, worst, serial_ms / steps, parallel_ms / steps,
      FLAGS_demo_trace.c_str());
  if (sampler != nullptr) {
    LOOM_ASSIGN_OR_RETURN(TrainingState state, serial->State());
    LOOM_RETURN_IF_ERROR(sampler->SetParameters(state.parameters));
    LOOM_RETURN_IF_ERROR(PrintSample(*sampler, "After training"));
  }

  // The same layout simulated on this host's cluster description, its ops
  // and core waits as profiled between the last steps, and both timelines
  // on one page. (The demo simulates no other schedule beside it: on steps
  // this short the simulator is not as close for schedules without overlap,
  // and the demo prints only the comparison it can stand behind.)
  LOOM_RETURN_IF_ERROR(WriteInterleavedProfile(*profile, profile_files));
  LOOM_ASSIGN_OR_RETURN(proto::Cluster cluster, LoadCluster(profile_files.cluster_out));
  LOOM_ASSIGN_OR_RETURN(CostTable table, CostTable::LoadOrEmpty(profile_files.cost_table));
  const CostContext costs(std::move(cluster), std::move(table));
  PlanOptions plan_options;  // planned as the run was: the cut by FLOPs
  plan_options.costs = &costs;
  plan_options.cut_by_flops = true;
  SimulationOptions sim_options;
  sim_options.trace = true;
  LOOM_ASSIGN_OR_RETURN(
      GptSimulation sim,
      SimulateGpt(config, opt, strategy, CostModelTimers(costs), sim_options, plan_options));
  const TimelineMetrics measured_metrics = AnalyzeTrace(measured);
  const auto& rules = static_cast<const CostModelTimer&>(*sim.timer).rule_counts();
  const double measured_ms = Median(parallel_step_ms);
  const double simulated_ms = sim.result.step_time_s * 1e3;
  auto exposed_mp = [](double seconds) { return StrCat(", exposed mp ", seconds * 1e3, " ms"); };
  LOOM_RETURN_IF_ERROR(WriteTimelineHtml(
      FLAGS_demo_html, "loom demo: gpt-tiny, mp=2 x pp=2, 1F1B-overlap over 4 micro-batches",
      {{"1F1B-overlap, measured (the last step)",
        StrCat("median step ", measured_ms, " ms over the last ", kProfiledSteps,
               exposed_mp(measured_metrics.exposed_comm_s[0]), " in this one"),
        measured},
       {StrCat("1F1B-overlap, simulated on cluster '", FLAGS_cluster, "'"),
        StrCat("step ", simulated_ms, " ms", exposed_mp(sim.result.exposed_comm_s[0]),
               "; ops priced ", rules[0], " profiled, ", rules[1], " scaled, ", rules[2],
               " by the roofline"),
        sim.result.trace}}));
  std::printf(
      "\nSimulated on cluster '%s' (%s), its ops profiled between the "
      "last %d parallel steps (%.1f s; ops priced: %d profiled, %d "
      "scaled, %d by the roofline): %.2f ms per step against %.2f ms measured (the median of "
      "those steps), %+.1f%%.\nThe measured and simulated timelines are in %s: open it in a "
      "browser.\n",
      FLAGS_cluster.c_str(),
      FLAGS_cluster == "local"
          ? "its calls priced by the preset's links; `loom profile --comm` measures this host's "
            "into a file for --cluster"
          : "its calls priced by that file's links",
      kProfiledSteps, profile_seconds, rules[0], rules[1], rules[2], simulated_ms, measured_ms,
      100 * (simulated_ms - measured_ms) / measured_ms, FLAGS_demo_html.c_str());
  return Status::OK();
}

}  // namespace loom
