#!/usr/bin/env python3
"""Every writer of Purple saves atomically and durably (issue 11), seen from the system calls:
the data goes to a temporary file beside the target, which is fsync'd, renamed over the target,
and then the directory is fsync'd; a temporary that a killed writer left (its process is gone)
is removed by the next save of the same file, a live writer's is left alone.

usage: atomic_saves.py PURPLE   (skips with 77 when strace is not installed)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

purple = sys.argv[1]
strace = shutil.which("strace")
if not strace:
    print("SKIP: strace is not installed")
    sys.exit(77)

work = tempfile.mkdtemp(prefix="purple-saves-")
# name -> the Purple code that saves to the file it is given (as %s)
writers = {
    "port.txt": '(with-output-to-file "%s" (lambda () (display "text")))',
    "binary.bin": '(call-with-port (open-binary-output-file "%s") (lambda (p) (write-bytevector (bytevector 1 2 3) p)))',
    "torch-save.pt": '(torch-save (list 1 2 (tensor-ones 2)) "%s")',
    "state-dict.pt": '(save-state-dict (linear 2 3) "%s")',
    "optimizer.pt": '(let* ((m (linear 2 1)) (o (adam m :lr 0.1))) (backward (tensor-sum (m (tensor-ones 1 2)))) (optimizer-step o) (save-optimizer-state o "%s"))',
    "tensors.safetensors": '(save-safetensors (list (cons "x" (tensor-ones 2 2))) "%s")',
    "array.npy": '(save-npy (tensor-ones 3) "%s")',
    "arrays.npz": '(save-npz (list (cons "x" (tensor-ones 3))) "%s")',
    "zipped.npz": '(save-npz (list (cons "x" (tensor-ones 3))) "%s" :compressed #t)',
    "image.png": '(save-png (tensor-zeros 3 4 4) "%s")',
    "written.png": '(write-png (tensor-zeros 3 4 4 :dtype (quote uint8)) "%s")',
    "written.jpg": '(write-jpeg (tensor-zeros 3 4 4 :dtype (quote uint8)) "%s")',
}
if subprocess.run([purple, "-e", "(procedure? save-plot)"], capture_output=True, text=True).stdout.strip() == "#t":
    writers["plot.svg"] = '(save-plot (plot (list 1 2 3)) "%s")'

failures = []
live_pid = 1   # pid 1 always runs
for name, code in sorted(writers.items()):
    target = os.path.join(work, name)
    with open(target, "w") as f:
        f.write("old contents")
    stale = target + ".tmp-999999999-0"
    live = target + ".tmp-%d-0" % live_pid
    for p in (stale, live):
        with open(p, "w") as f:
            f.write("half")
    log = os.path.join(work, name + ".strace")
    r = subprocess.run([strace, "-f", "-qq", "-e", "trace=openat,fsync,fdatasync,rename,renameat,renameat2,close",
                        "-o", log, purple, "-e", code % target], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append("%s: purple failed: %s" % (name, r.stderr.strip()))
        continue
    calls = open(log).read().splitlines()
    # the temporary file: opened for writing, then fsync'd on the same descriptor, then renamed
    tmp_re = re.escape(target) + r"\.tmp-\d+-\d+"
    opened = [(i, re.search(r'= (\d+)$', c)) for i, c in enumerate(calls)
              if re.search(r'openat\(.*"' + tmp_re + r'".*O_WRONLY', c)]
    if not opened or not opened[0][1]:
        failures.append("%s: no temporary file was opened beside the target" % name)
        continue
    start, fd = opened[0][0], opened[0][1].group(1)
    synced = [i for i, c in enumerate(calls) if i > start and re.search(r'\bf(data)?sync\(%s\)' % fd, c)]
    renamed = [i for i, c in enumerate(calls)
               if re.search(r'rename(at2?)?\(.*"' + tmp_re + r'".*"' + re.escape(target) + r'"', c)]
    if not synced:
        failures.append("%s: the temporary file was not fsync'd" % name)
    if not renamed:
        failures.append("%s: the temporary file was not renamed over the target" % name)
    if synced and renamed and synced[0] > renamed[0]:
        failures.append("%s: renamed before its data was fsync'd" % name)
    # then the directory: opened and fsync'd after the rename
    if renamed:
        dir_fds = [re.search(r'= (\d+)$', c) for c in calls[renamed[0]:]
                   if re.search(r'openat\(.*"' + re.escape(work) + r'".*O_DIRECTORY', c)]
        dir_fds = [m.group(1) for m in dir_fds if m]
        if not any(re.search(r'\bf(data)?sync\(%s\)' % d, c) for d in dir_fds for c in calls[renamed[0]:]):
            failures.append("%s: the directory was not fsync'd after the rename" % name)
    if not os.path.exists(target) or open(target, "rb").read() == b"old contents":
        failures.append("%s: the target was not replaced" % name)
    if os.path.exists(stale):
        failures.append("%s: a dead writer's temporary file was left" % name)
    if not os.path.exists(live):
        failures.append("%s: a live writer's temporary file was removed" % name)
    leftovers = [f for f in os.listdir(work) if f.startswith(name + ".tmp-") and f != os.path.basename(live)]
    if leftovers:
        failures.append("%s: temporary files left: %s" % (name, leftovers))
    os.unlink(live)
    print("ok: %s" % name)

shutil.rmtree(work, ignore_errors=True)
if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print("all %d writers save atomically and durably" % len(writers))
