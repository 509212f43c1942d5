# Shell helpers shared by the scripts that measure runs against the
# simulator (overlap_emulated.sh, sharding_emulated.sh,
# simulator_accuracy.sh). Source it; it defines functions only.

# The median of the numbers on stdin, one per line ("nan" for none).
median() {
  sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
          else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The ranks a layout's flags ask for: dp x mp x pp.
world_size() {
  local dp=1 mp=1 pp=1
  set -- $1
  while (($#)); do
    case "$1" in
      --dp) dp=$2 ;; --mp) mp=$2 ;; --pp) pp=$2 ;;
    esac
    shift
  done
  echo $((dp * mp * pp))
}

# Replaces the lines from BEGIN to END (marker lines) of OUT with the file
# GENERATED, or writes a new OUT titled TITLE holding it.
replace_generated() {
  local out=$1 begin=$2 end=$3 generated=$4 title=$5 tmp
  tmp=$(mktemp)
  if [ -f "$out" ] && grep -qF "$begin" "$out"; then
    awk -v gen="$generated" -v b="$begin" -v e="$end" '
      $0 == b { while ((getline line < gen) > 0) print line; skip = 1; next }
      $0 == e { skip = 0; next }
      !skip' "$out" > "$tmp"
  else
    { echo "# $title"; echo; cat "$generated"; } > "$tmp"
  fi
  mkdir -p "$(dirname "$out")"
  mv "$tmp" "$out"
  echo "wrote $out" >&2
}
