# What the command-line test scripts share (sourced, with the purple command as $1): a temporary
# folder removed at exit, `check NAME RESULT DETAIL` (RESULT 0 passes) counting as it goes, and
# `finish`, which prints the counts and fails if any check did.
purple=$1
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {
  if [ "$2" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: $3"; fi
}

finish() {
  echo "$pass passed, $fail failed"
  [ $fail = 0 ]
}
