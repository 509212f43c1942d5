#!/usr/bin/env bash
# Loom's simulated iteration times against Megatron-LM's published ones:
# Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
# Transformer Models" (arXiv 2205.05198), Table 5, on 22B, 175B, 530B and
# 1T GPT models, with full recomputation and with sequence parallelism
# plus selective recomputation.
#
# Each row is one `loom simulate` on the `a100` cluster preset: bf16 O2,
# mp 8, the paper's pipeline degree and global batch (micro-batches of one
# sequence; the 22B's one micro-batch of four), the interleaved schedule
# with 3 chunks per stage on 175B and 530B, Megatron's dropout of 0.1
# (the paper's activation counts include its masks) and its default
# gradient clipping (--clip-grad 1.0). The preset's one
# fitted value, device.flops_efficiency, was fitted on the 530B
# SP+selective row; every other time is predicted. Prints a markdown
# table (simulated and published seconds, their ratio, the
# full/SP+selective ratio of each model against the paper's, and whether
# rank 0's peak fits the 80 GB device).
#
#   scripts/megatron_table5.sh [--only REGEX]
#
# Environment: LOOM names the loom binary (default build/bin/loom);
# CLUSTER a cluster preset or file to simulate on instead of a100 (to try
# other rates; the published figures stay the A100's).
set -euo pipefail
cd "$(dirname "$0")/.."
LOOM=${LOOM:-build/bin/loom}
CLUSTER=${CLUSTER:-a100}
ONLY=.
while [[ $# -gt 0 ]]; do
  case $1 in
    --only) ONLY=$2; shift 2 ;;
    *) echo "megatron_table5.sh: unknown argument '$1' (--only REGEX)" >&2; exit 2 ;;
  esac
done

# model, preset, pp, vpp chunks, micro-batches, batch, published full s, published SP+selective s
ROWS=(
  "22B gpt-22b 1 1 1 4 1.42 1.10"
  "175B gpt3-175b 8 3 64 64 18.13 13.75"
  "530B gpt-530b 35 3 280 280 49.05 37.83"
  "1T gpt-1t 64 1 512 512 94.42 71.49"
)

# Prints "<step seconds> <fits: yes|no> <rank 0 peak GB>".
simulate() {
  local preset=$1 pp=$2 vpp=$3 mb=$4 batch=$5; shift 5
  local schedule=1F1B
  [[ $vpp -gt 1 ]] && schedule=VPP
  local out
  out=$("$LOOM" simulate --cluster "$CLUSTER" --amp_level O2 --dropout 0.1 --clip_grad_norm 1.0 --recipe none --preset "$preset" \
          --mp 8 --pp "$pp" --vpp "$vpp" --schedule "$schedule" --micro_batches "$mb" \
          --batch_size "$batch" "$@" 2>&1) || { echo "$out" >&2; return 1; }
  local ms fits peak
  ms=$(awk '/^step time/ {print $3}' <<<"$out")
  peak=$(awk '/^peak memory/ {printf "%.1f", $3 / 1000}' <<<"$out")
  if grep -q '^device memory  every rank fits' <<<"$out"; then fits=yes; else fits=no; fi
  echo "$(awk -v ms="$ms" 'BEGIN {printf "%.2f", ms / 1000}') $fits $peak"
}

echo "| model | layout | full: Loom s | paper s | Loom/paper | SP+sel: Loom s | paper s | Loom/paper | full/SP+sel: Loom | paper | Loom/paper | peak GB (fits 80 GB) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for row in "${ROWS[@]}"; do
  read -r model preset pp vpp mb batch paper_full paper_sp <<<"$row"
  [[ $model =~ $ONLY ]] || continue
  read -r full full_fits full_peak < <(simulate "$preset" "$pp" "$vpp" "$mb" "$batch" \
                                         --recompute full)
  read -r sp sp_fits sp_peak < <(simulate "$preset" "$pp" "$vpp" "$mb" "$batch" \
                                   --sequence_parallel --recompute selective)
  awk -v m="$model" -v layout="mp8 pp$pp$([[ $vpp -gt 1 ]] && echo " vpp$vpp") mb$mb" \
      -v f="$full" -v pf="$paper_full" -v s="$sp" -v ps="$paper_sp" \
      -v peaks="$full_peak ($full_fits) / $sp_peak ($sp_fits)" 'BEGIN {
    printf "| %s | %s | %.2f | %.2f | %.3f | %.2f | %.2f | %.3f | %.3f | %.3f | %.3f | %s |\n",
           m, layout, f, pf, f / pf, s, ps, s / ps, f / s, pf / ps, (f / s) / (pf / ps), peaks
  }'
done
