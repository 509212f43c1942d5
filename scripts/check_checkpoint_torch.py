#!/usr/bin/env python3
"""PyTorch reads Loom's checkpoints (issue 10).

Saves checkpoints with `loom train` and `loom run` (dp2 x mp2 x pp2),
loads each model.safetensors and optimizer.safetensors with PyPI's
safetensors into Debian's torch, and checks every tensor against what
Loom itself reads back (`loom checkpoint`): the same names, dtypes and
shapes, the same sum, and the same leading values, bit for bit.

Usage: check_checkpoint_torch.py LOOM_BINARY
Exits 77 (CTest's skip) when torch or safetensors is missing.
"""
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
    from safetensors.torch import load_file
except ImportError as e:
    print(f"SKIPPED: {e}; scripts/setup.sh installs python3-torch and safetensors "
          f"into build/pyenv", flush=True)
    sys.exit(77)

DTYPES = {"fp32": torch.float32, "int64": torch.int64, "fp64": torch.float64}


def loom_view(loom, directory):
    """{(file, name): (dtype, shape, sum, first values)} as Loom reads it."""
    out = subprocess.run([loom, "checkpoint", directory, "--values", "6"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    view = {}
    for line in out[1:]:
        fields = line.split()
        file, name, dtype, shape = fields[0], fields[1], fields[2], fields[3]
        dims = [int(d) for d in shape.strip("[]").split(",") if d]
        first = [float(v) for v in fields[fields.index("first") + 1:]]
        view[(file, name)] = (dtype, dims, float(fields[5]), first)
    return out[0], view


def check(loom, directory):
    header, view = loom_view(loom, directory)
    checkpoint = header.split()[1].rstrip(":")
    problems = []
    seen = 0
    for file in ("model.safetensors", "optimizer.safetensors"):
        tensors = load_file(os.path.join(checkpoint, file))
        names = {name for (f, name) in view if f == file}
        if set(tensors) != names:
            problems.append(f"{file}: torch reads {sorted(set(tensors) ^ names)} differently")
        for name, t in tensors.items():
            if (file, name) not in view:
                continue
            dtype, dims, total, first = view[(file, name)]
            seen += 1
            where = f"{checkpoint}/{file} {name}"
            if t.dtype != DTYPES.get(dtype) or list(t.shape) != dims:
                problems.append(f"{where}: torch {t.dtype} {list(t.shape)}, loom {dtype} {dims}")
                continue
            flat = t.flatten()
            # Loom prints 9 significant digits, which name a float32 exactly.
            want_first = torch.tensor(first, dtype=t.dtype)
            if not torch.equal(flat[:len(first)], want_first):
                problems.append(f"{where}: first values {flat[:len(first)].tolist()} != "
                                f"loom's {want_first.tolist()}")
            got_sum = float(flat.double().sum())
            if not math.isclose(got_sum, total, rel_tol=1e-9, abs_tol=1e-9):
                problems.append(f"{where}: sum {got_sum!r} != loom's {total!r}")
    return seen, problems


def main():
    loom = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="loom-torch-") as tmp:
        runs = {
            "serial": [loom, "train", "--steps", "3"],
            "dp2 mp2 pp2": [loom, "run", "--dp", "2", "--mp", "2", "--pp", "2",
                            "--micro_batches", "2", "--steps", "3"],
        }
        failed = False
        for label, command in runs.items():
            directory = os.path.join(tmp, label.replace(" ", "-"))
            subprocess.run(command + ["--save_dir", directory], check=True,
                           stdout=subprocess.DEVNULL)
            seen, problems = check(loom, directory)
            for p in problems[:10]:
                print(f"{label}: {p}")
            print(f"{label}: torch {torch.__version__} read {seen} tensors; "
                  f"{len(problems)} differ from loom's")
            failed = failed or problems or seen < 100
        sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
