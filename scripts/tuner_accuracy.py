#!/usr/bin/env python3
"""How well `loom tune` ranks plans it never ran, measured on this host.

For each model and rank count (gpt-tiny and gpt-small on 2 and 4 ranks), on
loopback (in-process `loom run`) or, with --network emulated, on the emulated
network (one process a rank under `loom launch --net_rate`, as root):

1. Profile the host once, before any run: the link and the CPU's rates
   (`loom profile --comm --calibrate_device`, without the cores' wait,
   which docs/performance.md found to mislead; on the emulated network the
   CPU in-process and then the link under `loom launch`, into the `emulated`
   preset's file), and every op the candidates run (`loom tune
   --profile_ops`: each timed inside the steps of the plainest candidate that
   runs it), all in one cost table.
2. Tune exhaustively with that table (`loom tune --exhaustive --json`),
   once without a limit to see the peaks, then under a memory limit that
   the median peak sets, so that the tuner calls some candidates
   infeasible.
3. Train --candidates of the feasible plans (the tuner's first pick and
   others spread evenly over its order) and up to --infeasible of the
   others (`loom run`, --steps steps, the median after --warmup), in
   --repeats passes over the list (every other one backwards), and take
   each plan's fastest run (a shared host's other tenants only ever slow a
   run).
4. Write the table: simulated and measured order, Kendall's tau-b between
   them, how far the tuner's first pick is from the fastest measured, and
   each infeasible plan's measured peak (the allocator's high-water of the temporaries,
   and what the plan holds throughout) against the limit.

Not run by CI: a configuration takes 10-20 minutes and wants a quiet host.

  scripts/tuner_accuracy.py [--out FILE] [--configs tiny2,tiny4,small2,small4]
      [--candidates N] [--infeasible N] [--steps K] [--warmup W] [--repeats R]
      [--network loopback|emulated] [--net_rate RATE] [--keep DIR]

Each network's table has its own place in the page, between its markers.

LOOM (environment) names the loom binary; default build/bin/loom.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

# Both models as scripts/simulator_accuracy.sh trains them: 4 layers, and
# batches at which a step is tenths of a second of compute here, not a few
# ms that thread scheduling decides.
MODELS = {
    "tiny": ["--preset", "gpt-tiny", "--layers", "4", "--batch_size", "64", "--seq_len", "64"],
    "small": ["--preset", "gpt-small", "--layers", "4", "--vocab_size", "512",
              "--batch_size", "8", "--seq_len", "32"],
}
STEPS = {"tiny": 20, "small": 12}


def markers(args):
    """Where the page holds this network's table: loopback's markers are the first ones."""
    tag = "" if args.network == "loopback" else " --network %s" % args.network
    return ("<!-- tuner_accuracy.py%s: begin -->" % tag, "<!-- tuner_accuracy.py%s: end -->" % tag)


def launched(args, ranks, argv):
    """`argv` (loom's arguments) as the network runs it: as it is on loopback, else one process
    a rank under `loom launch` on the emulated network."""
    if args.network == "loopback":
        return argv
    return ["launch", "--nproc", str(ranks), "--net_rate", args.net_rate, "--", loom()] + argv


def loom():
    return os.environ.get("LOOM", "build/bin/loom")


def run(args, log=None):
    """Runs loom with `args`; its stdout, or exits naming the command."""
    p = subprocess.run([loom()] + args, capture_output=True, text=True)
    if log is not None:
        with open(log, "a") as f:
            f.write("$ loom " + " ".join(args) + "\n" + p.stdout + p.stderr)
    if p.returncode != 0:
        sys.exit("tuner_accuracy.py: loom %s failed (%d):\n%s" %
                 (" ".join(args), p.returncode, (p.stdout + p.stderr)[-3000:]))
    return p.stdout


def kendall_tau_b(x, y):
    """Kendall's tau-b of two equally long lists (ties in either allowed)."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    n0 = concordant + discordant
    denom = ((n0 + ties_x) * (n0 + ties_y)) ** 0.5
    return (concordant - discordant) / denom if denom else float("nan")


def strategy_file(work, plan):
    """The plan's strategy as a --config file."""
    path = os.path.join(work, plan["name"].replace(" ", "_").replace("=", "-") + ".pbtxt")
    with open(path, "w") as f:
        f.write(plan["strategy"])
    return path


def spread(order, n, first):
    """n indices of `order` spread evenly from its start to its end, `first` among them."""
    if len(order) <= n:
        return list(order)
    if n <= 1:
        return [first]
    picked = {order[round(i * (len(order) - 1) / (n - 1))] for i in range(n)}
    picked.add(first)
    return [i for i in order if i in picked]


def step_ms(line):
    """The time_ms of a `loom run` step line."""
    words = line.split()
    return float(words[words.index("time_ms") + 1])


def measure(args, model, ranks, plan, work, cluster, table, steps):
    """One run of `plan`: the median step ms after the warm-up, and each rank's allocator
    high-water (bytes): the temporaries, as the device counts them."""
    argv = ["run"] + MODELS[model] + ["--config", strategy_file(work, plan), "--steps", str(steps),
                                      "--cluster", cluster, "--cost_table", table,
                                      "--allow_oversubscribe"]
    out = run(launched(args, ranks, argv), os.path.join(work, "runs.log"))
    # Under launch every rank prints its steps: a step takes its slowest rank's time.
    by_step = {}
    for l in out.splitlines():
        if l.startswith("step ") and int(l.split()[1]) >= args.warmup:
            by_step[l.split()[1]] = max(by_step.get(l.split()[1], 0), step_ms(l))
    times = list(by_step.values())
    high = {}  # by rank: each process prints its own under launch
    for l in out.splitlines():
        if l.startswith("device memory high-water"):
            for part in l.split(":", 1)[1].split(","):
                words = part.split()
                high[int(words[1])] = float(words[2]) * {"kB": 1e3, "MB": 1e6, "GB": 1e9}[words[3]]
    return statistics.median(times), [high[r] for r in sorted(high)]


def persistent_bytes(model, plan, work, cluster, table):
    """Each rank's parameters, master weights, gradients and optimizer state, as the plan
    allocates them (`loom simulate --json`): the allocator's high-water leaves them out."""
    j = json.loads(run(["simulate"] + MODELS[model] + ["--config", strategy_file(work, plan),
                                                       "--cluster", cluster, "--cost_table", table,
                                                       "--json"]))
    return [sum(r["memory_bytes"][k] for k in
                ("parameters", "master_weights", "gradients", "optimizer_state"))
            for r in j["ranks"]]


def tune(model, ranks, cluster, table, limit, work, profile=False):
    argv = ["tune"] + MODELS[model] + ["--devices", str(ranks), "--exhaustive", "--json",
                                       "--cluster", cluster, "--cost_table", table]
    if limit:
        argv += ["--memory_limit", str(int(limit))]
    if profile:
        # Every op the candidates run, each timed in the plainest candidate that runs it;
        # what the table has (a --keep directory's, from an earlier run) is not timed again.
        argv += ["--profile_ops"]
    return json.loads(run(argv, os.path.join(work, "tune.log")))


def one_config(args, model, ranks, cluster, table, work):
    """The rows and summary of one model on `ranks` ranks."""
    unlimited = tune(model, ranks, cluster, table, 0, work, profile=True)
    peaks = sorted(p["peak_bytes"] for p in unlimited["simulated"])
    limit = peaks[len(peaks) // 2]
    report = tune(model, ranks, cluster, table, limit, work)
    plans = report["simulated"]
    feasible = sorted((i for i, p in enumerate(plans) if p["fits"]),
                      key=lambda i: (plans[i]["step_time_s"], i))
    first = next(i for i in feasible if plans[i]["name"] == report["top"][0])
    chosen = spread(feasible, args.candidates, first)
    # Over the limit, from the least over: the likeliest to be wrongly called.
    over = sorted((i for i, p in enumerate(plans) if not p["fits"]),
                  key=lambda i: plans[i]["peak_bytes"])
    over = spread(over, args.infeasible, over[0]) if over else []
    runs = {i: [] for i in chosen + over}
    for r in range(args.repeats):
        # The list is in the tuner's order; every other pass runs it backwards, so that a host
        # drifting over a pass does not move the runs in step with that order.
        order = chosen + over if r % 2 == 0 else list(reversed(chosen + over))
        for n, i in enumerate(order):
            print("\r%s on %d ranks: pass %d of %d, plan %d of %d   " %
                  (model, ranks, r + 1, args.repeats, n + 1, len(runs)), end="", file=sys.stderr,
                  flush=True)
            runs[i].append(measure(args, model, ranks, plans[i], work, cluster, table,
                                   args.steps or STEPS[model]))
    print(file=sys.stderr)
    # Another tenant of a shared host only ever slows a run, at times by a third for minutes:
    # a plan's own speed is its fastest run's.
    measured = {i: min(t for t, _ in runs[i]) for i in runs}
    # A rank's measured peak: its temporaries' high-water over the runs, and what it holds
    # for the whole run.
    high = {}
    for i in runs:
        held = persistent_bytes(model, plans[i], work, cluster, table)
        temporaries = [max(h[r] for _, h in runs[i]) for r in range(len(held))]
        high[i] = max(t + p for t, p in zip(temporaries, held))
    sim = [plans[i]["step_time_s"] * 1e3 for i in chosen]
    meas = [measured[i] for i in chosen]
    tau = kendall_tau_b(sim, meas)
    fastest = min(chosen, key=lambda i: measured[i])
    first_off = 100 * (measured[first] / measured[fastest] - 1)
    errors = [100 * (s / m - 1) for s, m in zip(sim, meas)]
    return {
        "model": model, "ranks": ranks, "limit": limit, "report": report, "plans": plans,
        "chosen": chosen, "over": over, "measured": measured, "high": high, "first": first,
        "fastest": fastest, "tau": tau, "first_off": first_off,
        "mean_abs_error": statistics.mean(abs(e) for e in errors),
    }


def page(args, results, seconds):
    begin, end = markers(args)
    lines = [begin, ""]
    lines.append("Written by `scripts/tuner_accuracy.py %s` on %s (%s, %d cores), in %.0f minutes." %
                 (" ".join(sys.argv[1:]), datetime.date.today().isoformat(),
                  platform.processor() or platform.machine(), os.cpu_count(), seconds / 60))
    lines.append("")
    lines.append("| model | ranks | feasible (of simulated) | run | Kendall tau-b | first pick vs fastest "
                 "measured | mean abs sim error | infeasible run, all over the limit |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in results:
        n_feasible = sum(p["fits"] for p in r["plans"])
        over_ok = sum(r["high"][i] > r["limit"] for i in r["over"])
        lines.append("| %s | %d | %d (of %d) | %d | **%.2f** | %+.1f%% | %.1f%% | %d of %d |" % (
            r["model"], r["ranks"], n_feasible, len(r["plans"]), len(r["chosen"]), r["tau"],
            r["first_off"], r["mean_abs_error"], over_ok, len(r["over"])))
    lines.append("")
    for r in results:
        lines.append("### %s on %d ranks (memory limit %.2f MB)" %
                     (r["model"], r["ranks"], r["limit"] / 1e6))
        lines.append("")
        lines.append("| tuner's order | plan | simulated ms | measured ms | measured order | "
                     "simulated peak MB | measured peak MB |")
        lines.append("|---|---|---|---|---|---|---|")
        by_measured = sorted(r["chosen"], key=lambda i: r["measured"][i])
        for n, i in enumerate(r["chosen"]):
            p = r["plans"][i]
            mark = " (first pick)" if i == r["first"] else ""
            lines.append("| %d | `%s`%s | %.1f | %.1f | %d | %.1f | %.1f |" % (
                n + 1, p["name"], mark, p["step_time_s"] * 1e3, r["measured"][i],
                by_measured.index(i) + 1, p["peak_bytes"] / 1e6, r["high"][i] / 1e6))
        for i in r["over"]:
            p = r["plans"][i]
            lines.append("| over the limit | `%s` | %.1f | %.1f | - | %.1f | %.1f |" % (
                p["name"], p["step_time_s"] * 1e3, r["measured"][i], p["peak_bytes"] / 1e6,
                r["high"][i] / 1e6))
        lines.append("")
    lines.append(end)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/tuner_accuracy.md")
    ap.add_argument("--configs", default="tiny2,tiny4,small2,small4",
                    help="model and ranks, comma-separated: tiny2, small4, ...")
    ap.add_argument("--candidates", type=int, default=24, help="feasible plans to run")
    ap.add_argument("--infeasible", type=int, default=4, help="plans over the limit to run")
    ap.add_argument("--steps", type=int, default=0, help="steps a run (0: the model's)")
    ap.add_argument("--warmup", type=int, default=4, help="first steps not counted")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of each plan, in passes; a plan's figure is its fastest run's")
    ap.add_argument("--network", default="loopback", choices=["loopback", "emulated"],
                    help="where the ranks talk: loopback, in one process, or the emulated "
                         "network, a process a rank under loom launch --net_rate (needs root)")
    ap.add_argument("--net_rate", default="1gbit",
                    help="--network emulated: each rank's link, in tc's syntax")
    ap.add_argument("--keep", default="",
                    help="keep the work directory (profiles, plans, logs) here; run again with "
                         "the same directory, the profiles are reused")
    args = ap.parse_args()
    if not os.access(loom(), os.X_OK):
        sys.exit("tuner_accuracy.py: %s is missing; build first" % loom())
    os.environ["LOOM"] = os.path.realpath(loom())
    configs = []
    for c in args.configs.split(","):
        model, ranks = c.rstrip("0123456789"), c[len(c.rstrip("0123456789")):]
        if model not in MODELS or not ranks:
            sys.exit("tuner_accuracy.py: --configs: '%s' is not tiny or small with a rank count" % c)
        configs.append((model, int(ranks)))
    work = args.keep or tempfile.mkdtemp(prefix="loom-tuner-accuracy.")
    os.makedirs(work, exist_ok=True)
    start = datetime.datetime.now()
    try:
        log = os.path.join(work, "profile.log")
        if args.network == "loopback":
            cluster = os.path.join(work, "local.cluster.pbtxt")
            if not os.path.exists(cluster):
                run(["profile", "--comm", "--calibrate_device", "--comm_core_wait_calls", "0",
                     "--cluster", "local", "--cluster_out", cluster], log)
        else:
            # The CPU on its own first, then the link between two launched ranks, into one file.
            cluster = os.path.join(work, "emulated.%s.cluster.pbtxt" % args.net_rate)
            if not os.path.exists(cluster):
                run(["profile", "--calibrate_device", "--cluster", "emulated", "--cluster_out",
                     cluster + ".cpu"], log)
                # Sizes and rounds as scripts/simulator_accuracy.sh profiles the emulated link;
                # then the calls' costs on cores that four ranks share.
                sizes = ["--comm_rounds", "81", "--comm_max_bytes", "1048576"]
                run(launched(args, 2, ["profile", "--comm", "--comm_core_wait_calls", "0",
                                       "--comm_idle_ms", "4,12", "--cluster", "emulated",
                                       "--cluster_out", cluster + ".cpu"] + sizes), log)
                run(launched(args, 4, ["profile", "--comm_shared_only", "--cluster", "emulated",
                                       "--cluster_out", cluster + ".cpu"] + sizes), log)
                os.replace(cluster + ".cpu", cluster)
        results = []
        for model, ranks in configs:
            table = os.path.join(work, "cost_table.%s%d.pbtxt" % (model, ranks))
            results.append(one_config(args, model, ranks, cluster, table, work))
        text = page(args, results, (datetime.datetime.now() - start).total_seconds())
        begin, end = markers(args)
        old = open(args.out).read() if os.path.exists(args.out) else ""
        if begin in old and end in old:
            text = old[:old.index(begin)] + text + old[old.index(end) + len(end) + 1:]
        elif old:
            text = old.rstrip("\n") + "\n\n" + text
        else:
            text = "# How well loom tune ranks plans, measured\n\n" + text
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
        print("wrote " + args.out, file=sys.stderr)
        for r in results:
            print("%s%d: tau %.2f, first pick %+.1f%% of the fastest, mean |error| %.1f%%" %
                  (r["model"], r["ranks"], r["tau"], r["first_off"], r["mean_abs_error"]))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
