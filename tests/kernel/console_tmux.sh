#!/usr/bin/env bash
# jupyter-console with the Purple kernel, typed into a tmux terminal as a person would: a form
# over two lines (the kernel's is_complete keeps the console asking for more), Tab completion,
# an error, then leaving. Skips (exit 77) when tmux or jupyter-console is missing.
# usage: console_tmux.sh PURPLE
set -u
purple=$(readlink -f "$1")
command -v tmux > /dev/null || { echo "SKIP: tmux is not installed"; exit 77; }
command -v jupyter-console > /dev/null || { echo "SKIP: jupyter-console is not installed"; exit 77; }
tmp=$(mktemp -d)
sock="purple-console-$$"
cleanup() { tmux -L "$sock" kill-server 2> /dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
"$purple" --install-kernel --prefix "$tmp" > /dev/null || { echo "FAIL: --install-kernel"; exit 1; }
export JUPYTER_PATH="$tmp/share/jupyter" JUPYTER_RUNTIME_DIR="$tmp/runtime" JUPYTER_CONFIG_DIR="$tmp/config" \
       IPYTHONDIR="$tmp/ipython" HOME="$tmp"
pass=0
fail=0
screen() { tmux -L "$sock" capture-pane -p -J -S -200 -t console; }
wait_for() {   # wait_for REGEX [SECONDS]: until the screen matches
  local deadline=$((SECONDS + ${2:-60}))
  while [ $SECONDS -lt $deadline ]; do
    screen | grep -Eq "$1" && return 0
    sleep 0.3
  done
  return 1
}
check() {   # check NAME REGEX [SECONDS]
  if wait_for "$2" "${3:-60}"; then pass=$((pass + 1)); echo "ok: $1"
  else fail=$((fail + 1)); echo "FAIL: $1: no /$2/ on the screen:"; screen | tail -25; fi
}
keys() { tmux -L "$sock" send-keys -t console "$@"; }

# jupyter-console through console.py (with the python3 jupyter-console runs on): it tolerates
# xeus-zmq 3.1's null parent header.
console_python=$(sed -n '1s/^#! *//p' "$(command -v jupyter-console)")
here=$(cd "$(dirname "$0")" && pwd)
tmux -L "$sock" new-session -d -s console -x 160 -y 50 \
  "env JUPYTER_PATH='$JUPYTER_PATH' JUPYTER_RUNTIME_DIR='$JUPYTER_RUNTIME_DIR' HOME='$tmp' $console_python '$here/console.py' --kernel purple; sleep 30"
check "the console starts with the Purple kernel" 'In \[1\]:' 120

keys '(define (twice x)' Enter
check "an unfinished form asks for another line" '^ +\.\.\.:' 20
keys '(* 2 x))' Enter
check "... and runs once it is complete" 'In \[2\]:' 30
keys '(twice 21)' Enter
check "the two-line definition works" 'Out\[2\]: 42' 30

keys '(tensor-matm' Tab
check "Tab completes a builtin's name" 'In \[3\]: \(tensor-matmul' 30
keys C-u '(car (list))' Enter
check "an error shows the Purple message" "car: argument 1 must be a pair" 30
check "... and the console goes on" 'In \[4\]:' 30
keys '(string-append "still " "here")' Enter
check "the kernel is alive after the error" 'Out\[4\]: "still here"' 30

keys C-d
sleep 1
keys y Enter
sleep 2
echo "$pass passed, $fail failed"
[ $fail = 0 ]
