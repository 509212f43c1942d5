#!/usr/bin/env python3
"""PyTorch cross-checks Loom's bf16 mixed precision (issue 37).

Loom trains one step of gpt-tiny in fp32 and in bf16 O2; an independent
PyTorch GPT with gpt-tiny's architecture, loaded with Loom's initial
parameters and fed the same batch, computes that step's loss and global
gradient norm in fp32 and under torch.autocast(bf16). Each parameter's
gradient is compared too: Loom's is read back from a second run that takes
one SGD step at learning rate 1. The fp32 results must agree to rounding
(the two models are one function); the bf16 ones within a bf16 tolerance
(see BF16_* below); and bf16 must differ from fp32 on both sides.

Usage: check_amp_torch.py LOOM_BINARY
Exits 77 (CTest's skip) when torch or safetensors is missing.
"""
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
except ImportError as e:
    print(f"SKIPPED: {e}; scripts/setup.sh installs python3-torch and safetensors "
          f"into build/pyenv", flush=True)
    sys.exit(77)

# gpt-tiny (models/gpt.cc). The sizes are passed to Loom explicitly where it
# takes them; the head count it does not take, so it is the preset's.
PRESET = "gpt-tiny"
BATCH = 8
SEQ_LEN = 32
HEADS = 4
VOCAB = 128
SEED = 1
LN_EPS = 1e-5  # GptBuilder::LayerNorm
NUM_TOKENS = 4096  # length of the token file the batch is drawn from

# Tolerances, as relative differences |torch - loom| / |loom|. "Measured"
# is this script's output on an AVX2 machine with Debian's torch 1.13.
#
# fp32: one function computed twice in fp32, differing only in the order of
# sums, so anything past accumulated rounding is a model mismatch. Measured:
# loss 2e-7, gradient norm 3e-6 (Loom prints it to 6 digits, ~4e-6), each
# parameter's gradient under 5e-7. The per-parameter bound, 20x that, is
# what tells GELU's exact form from its tanh approximation (3e-5 here).
FP32_LOSS_RTOL = 1e-5
FP32_GRAD_NORM_RTOL = 1e-4
FP32_TENSOR_RTOL = 1e-5
#
# bf16 keeps 8 significant bits, so each rounding is off by up to 2^-9
# (~2e-3) relative. The two recipes round in different places: Loom's O2
# runs every op but the loss in bf16 (embedding lookups, residual adds,
# GELU, softmax, every matmul); autocast casts only the GEMMs' inputs, so
# what a GEMM feeds (GELU, softmax) runs in bf16, but the embeddings, the
# residual stream and the layer norms stay fp32; and this torch build's
# CPU bf16 GEMM (generic BLAS, no AVX512-BF16) also accumulates in bf16,
# where Loom accumulates in fp32. So the two bf16 results are two different
# draws of rounding noise, and the torch one is the larger. At
# initialization the logits are small and the loss sits near log(vocab),
# which hides most of the noise in the loss and the global norm.
# Measured: loss 6e-5 (Loom's O2 vs its fp32: 5e-6), gradient norm 2e-4,
# each parameter's gradient 1.5e-2 to 3.8e-2 (Loom O2 vs its fp32: under
# 8e-3; torch autocast vs its fp32: up to 3.8e-2).
# Loss: half a bf16 rounding of the loss itself, 16x what was measured.
BF16_LOSS_RTOL = 1e-3
# Gradient norm: five bf16 roundings, 50x what was measured.
BF16_GRAD_NORM_RTOL = 1e-2
# Per parameter: 4x the worst measured. A gradient that is dropped or
# doubled is off by 100%, one of the tied embedding's two paths (lookup
# and LM head) dropped by 58% or 80%; the global norm alone would miss
# such a mistake in a small tensor (the QKV weights are under 1% of it).
BF16_TENSOR_RTOL = 0.15
#
# bf16 must differ from fp32 in each framework, or one of them silently ran
# fp32 and the comparisons above prove nothing. Both runs are deterministic
# (the script checks Loom's), so the loss and the gradient norm must simply
# differ; and the whole gradient, all parameters as one vector, must move
# by at least this (measured: Loom 5e-3, torch 2e-2; fp32 vs fp32 1e-6).
MIN_BF16_GRAD_SHIFT = 1e-3


# --- The batch --------------------------------------------------------------
# Loom is fed a token file (--data, uint16) that this script writes, rather
# than its synthetic dataset: the synthetic one shuffles its permutation with
# std::shuffle over mt19937_64, whose result depends on the C++ library.
# TokenFileDataset::Batch takes row r of step s as the seq_len + 1 tokens at
# offset RowKey(seed, s, r) % (num_tokens - seq_len); labels are the window
# shifted by one. RowKey is splitmix64 (framework/counter_rng.h,
# models/dataset.h), reimplemented here with explicit 64-bit wraparound.

MASK64 = (1 << 64) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def splitmix64(x):
    return mix64((x + 0x9E3779B97F4A7C15) & MASK64)


def row_key(seed, step, row):
    return splitmix64((seed & MASK64) ^ splitmix64((step * 1000003 + row) & MASK64))


def write_token_file(path, vocab):
    """Deterministic pseudo-random ids below `vocab`, as little-endian uint16."""
    gen = torch.Generator().manual_seed(37)
    ids = torch.randint(0, vocab, (NUM_TOKENS,), generator=gen).tolist()
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{len(ids)}H", *ids))
    return ids


def batch_of_step(ids, step):
    windows = len(ids) - SEQ_LEN
    tokens, labels = [], []
    for r in range(BATCH):
        start = row_key(SEED, step, r) % windows
        tokens.append(ids[start:start + SEQ_LEN])
        labels.append(ids[start + 1:start + SEQ_LEN + 1])
    return torch.tensor(tokens, dtype=torch.long), torch.tensor(labels, dtype=torch.long)


# --- Loom --------------------------------------------------------------------

def run_loom(loom, tmp, lr, args):
    """Runs `loom train` hermetically (own cwd and HOME, no FLAGS_ overrides)
    and returns step 0's (loss, grad_norm)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGS_")}
    env["HOME"] = os.path.join(tmp, "home")
    cmd = [loom, "train", "--preset", PRESET, "--steps", "1", "--seed", str(SEED),
           "--batch_size", str(BATCH), "--seq_len", str(SEQ_LEN), "--vocab_size", str(VOCAB),
           "--data", "tokens.bin", "--data_dtype", "uint16",
           # Plain SGD, p -= lr * grad: see main() for the rates.
           "--optimizer", "sgd", "--lr", lr,
           # A bound nothing reaches, so that the step prints its global
           # gradient norm but clips nothing.
           "--clip_grad_norm", "1e30"] + args
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAILED: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
        sys.exit(1)
    for line in proc.stdout.splitlines():
        fields = line.split()
        if fields[:2] == ["step", "0"] and "grad_norm" in fields:
            return (float(fields[fields.index("loss") + 1]),
                    float(fields[fields.index("grad_norm") + 1]))
    print(f"FAILED: no 'step 0 loss ... grad_norm ...' line from {' '.join(cmd)}:\n"
          f"{proc.stdout}")
    sys.exit(1)


def load_params(save_dir):
    steps = sorted(d for d in os.listdir(save_dir) if d.startswith("step-"))
    return load_file(os.path.join(save_dir, steps[-1], "model.safetensors"))


# --- The PyTorch model ------------------------------------------------------
# Written from models/gpt.cc's description of the graph, with Loom's
# parameters used as they are laid out there: a linear weight is [in, out]
# (y = x W + b), so it is transposed for F.linear; the fused QKV output is
# grouped head by head, [heads, 3 * head_dim], each head's slice holding its
# q, k and v side by side; the LM head is the token embedding (tied).

def linear(x, params, name):
    # F.linear rather than x @ W + b: under autocast it adds the bias in
    # bf16 too, as a bf16 GEMM with a bias epilogue would.
    return F.linear(x, params[name + ".weight"].t(), params[name + ".bias"])


def layer_norm(x, params, name):
    return F.layer_norm(x, (x.shape[-1],), params[name + ".scale"], params[name + ".bias"],
                        LN_EPS)


def attention(x, params, p):
    b, s, h = x.shape
    hd = h // HEADS
    qkv = linear(x, params, p + ".qkv").reshape(b, s, HEADS, 3 * hd)
    q, k, v = (t.transpose(1, 2) for t in qkv.split(hd, dim=-1))  # [B, heads, S, hd]
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
    future = torch.ones(s, s, dtype=torch.bool).triu(1)  # key after query
    probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    context = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
    return linear(context, params, p + ".proj")


def mlp(x, params, p):
    # Loom's gelu op defaults to the exact, erf form (approximate = false).
    return linear(F.gelu(linear(x, params, p + ".up")), params, p + ".down")


def gpt_loss(params, tokens, labels, num_layers):
    wte = params["embed.tokens.weight"]
    x = F.embedding(tokens, wte) + params["embed.positions.weight"]
    for i in range(num_layers):
        p = f"layers.{i}"
        # Pre-LN blocks: x + attn(ln1(x)), then x + mlp(ln2(x)).
        x = x + attention(layer_norm(x, params, p + ".ln1"), params, p + ".attn")
        x = x + mlp(layer_norm(x, params, p + ".ln2"), params, p + ".mlp")
    x = layer_norm(x, params, "final_ln")
    logits = F.linear(x, wte)  # x @ wte^T, no bias
    # The loss in fp32, as both recipes keep it: mean over every token.
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))


def torch_step(initial, tokens, labels, bf16):
    """Step 0's loss, global gradient norm and gradients, with fp32 master
    parameters (autocast casts them to bf16 where a GEMM reads them, and the
    gradients flow back through the casts into fp32)."""
    params = {n: t.clone().requires_grad_(True) for n, t in initial.items()}
    num_layers = 1 + max(int(n.split(".")[1]) for n in params if n.startswith("layers."))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = gpt_loss(params, tokens, labels, num_layers)
    loss.backward()
    for n, t in params.items():
        if t.grad is None or t.grad.dtype != torch.float32:
            print(f"FAILED: the PyTorch model left {n} without an fp32 gradient")
            sys.exit(1)
    norm = math.sqrt(sum(float(t.grad.double().pow(2).sum()) for t in params.values()))
    return float(loss), norm, {n: t.grad for n, t in params.items()}


# --- The check --------------------------------------------------------------

def rel(a, b):
    return abs(a - b) / abs(b)


def recovered_gradients(initial, stepped):
    """Loom's gradients from one SGD step at lr = 1 (p1 = p0 - g), with how
    far each can be off: the update rounds p1 to fp32, so by up to half an
    ulp of p1 per element."""
    grads, slack = {}, {}
    for n, p0 in initial.items():
        p1 = stepped[n]
        grads[n] = p0.double() - p1.double()
        half_ulp = (torch.nextafter(p1.abs(), torch.tensor(math.inf)) - p1.abs()).double() / 2
        slack[n] = float(half_ulp.norm())
    return grads, slack


def whole_shift(a, b):
    """|a - b| / |b| over all parameters' gradients as one vector."""
    diff = sum(float((a[n].double() - b[n].double()).pow(2).sum()) for n in b)
    size = sum(float(b[n].double().pow(2).sum()) for n in b)
    return math.sqrt(diff / size)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    loom = os.path.abspath(sys.argv[1])
    modes = {"fp32": ["--amp_level", "O0"],
             "bf16": ["--amp_level", "O2", "--amp_dtype", "bf16"]}
    loom_runs, initial, loom_grads, slack = {}, {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="loom-amp-torch-") as tmp:
        os.makedirs(os.path.join(tmp, "home"))
        ids = write_token_file(os.path.join(tmp, "tokens.bin"), VOCAB)
        for mode, args in modes.items():
            # At a negligible rate the saved parameters are the initial ones:
            # a weight moves by 1e-30 x its gradient, far below an ulp; a
            # zero-initialized bias becomes ~1e-32, which changes nothing
            # downstream.
            loom_runs[mode] = run_loom(loom, tmp, "1e-30", args + ["--save_dir", mode])
            initial[mode] = load_params(os.path.join(tmp, mode))
            # At rate 1 the step subtracts the gradient itself.
            again = run_loom(loom, tmp, "1", args + ["--save_dir", mode + "-lr1"])
            loom_grads[mode], slack[mode] = recovered_gradients(
                initial[mode], load_params(os.path.join(tmp, mode + "-lr1")))
            if again != loom_runs[mode]:
                print(f"FAILED: Loom's {mode} step 0 is not deterministic: {loom_runs[mode]} "
                      f"at lr 1e-30, {again} at lr 1")
                return 1

    problems = []
    params = initial["fp32"]
    # Both runs must start from the same weights (biases, zero at the start,
    # are skipped: they moved by ~1e-32, differently in each run).
    if set(initial["bf16"]) != set(params) or any(
            not torch.equal(initial["bf16"][n], params[n]) for n in params if "bias" not in n):
        problems.append("Loom's fp32 and bf16 runs did not start from the same parameters")
    shape = tuple(params["embed.tokens.weight"].shape)
    if shape[0] != VOCAB or tuple(params["embed.positions.weight"].shape) != (SEQ_LEN, shape[1]):
        problems.append(f"unexpected embedding shapes: tokens {shape}, positions "
                        f"{tuple(params['embed.positions.weight'].shape)}")

    tokens, labels = batch_of_step(ids, 0)
    torch_runs = {"fp32": torch_step(params, tokens, labels, bf16=False),
                  "bf16": torch_step(params, tokens, labels, bf16=True)}

    print(f"step 0 of {PRESET}, batch {BATCH} x {SEQ_LEN}:")
    print(f"  {'':16}{'loss':>12}{'grad_norm':>12}")
    for name, (loss, norm, *_) in (("loom fp32", loom_runs["fp32"]),
                                   ("torch fp32", torch_runs["fp32"]),
                                   ("loom bf16 O2", loom_runs["bf16"]),
                                   ("torch autocast", torch_runs["bf16"])):
        print(f"  {name:16}{loss:12.7g}{norm:12.7g}")

    def compare(what, got, want, rtol):
        d = rel(got, want)
        print(f"  {what:38} {d:9.2e}  (at most {rtol:.2g})  {'ok' if d <= rtol else 'FAILED'}")
        if d > rtol:
            problems.append(f"{what}: torch {got!r}, loom {want!r}: relative difference "
                            f"{d:.2e} > {rtol:.2g}")

    print("torch vs loom, relative difference:")
    for mode, loss_rtol, norm_rtol in (("fp32", FP32_LOSS_RTOL, FP32_GRAD_NORM_RTOL),
                                       ("bf16", BF16_LOSS_RTOL, BF16_GRAD_NORM_RTOL)):
        compare(f"{mode} loss", torch_runs[mode][0], loom_runs[mode][0], loss_rtol)
        compare(f"{mode} grad norm", torch_runs[mode][1], loom_runs[mode][1], norm_rtol)

    # Each parameter's gradient; Loom's are known to within `slack` (the
    # rounding of the lr-1 update), which is taken off the difference.
    for mode, rtol in (("fp32", FP32_TENSOR_RTOL), ("bf16", BF16_TENSOR_RTOL)):
        worst = (-1.0, "")
        for n, g in loom_grads[mode].items():
            diff = float((torch_runs[mode][2][n].double() - g).norm())
            d = max(diff - slack[mode][n], 0.0) / float(g.norm())
            worst = max(worst, (d, n))
            if not d <= rtol:
                problems.append(f"{mode} gradient of {n}: relative difference {d:.2e} > "
                                f"{rtol:.2g} (|torch - loom| {diff:.3e}, |loom| "
                                f"{float(g.norm()):.3e})")
        print(f"  {mode + ' gradient, worst parameter':38} {worst[0]:9.2e}  (at most {rtol:.2g})"
              f"  {'ok' if worst[0] <= rtol else 'FAILED'}  ({worst[1]})")

    print("bf16 vs fp32, relative difference:")
    for name, runs, grads in (("loom", loom_runs, loom_grads),
                              ("torch", torch_runs, {m: r[2] for m, r in torch_runs.items()})):
        loss_d = rel(runs["bf16"][0], runs["fp32"][0])
        norm_d = rel(runs["bf16"][1], runs["fp32"][1])
        grad_d = whole_shift(grads["bf16"], grads["fp32"])
        ok = loss_d > 0 and norm_d > 0 and grad_d >= MIN_BF16_GRAD_SHIFT
        print(f"  {name + ' loss, grad norm, gradient':38} {loss_d:9.2e} {norm_d:9.2e} "
              f"{grad_d:9.2e}  (> 0, > 0, at least {MIN_BF16_GRAD_SHIFT:.0e})  "
              f"{'ok' if ok else 'FAILED'}")
        if not ok:
            problems.append(f"{name}'s bf16 step is too close to its fp32 one (loss {loss_d:.1e}"
                            f", grad norm {norm_d:.1e}, gradient {grad_d:.1e}): did it run in "
                            f"bf16 at all?")

    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
