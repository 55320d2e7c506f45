# The distributed sampler gives each rank the same indices as torch's DistributedSampler with the
# same seed and epoch (shuffled or not, padded or cut with drop-last), and its data-loader batches
# follow them. Usage: python3 sampler-interop.py PURPLE
import subprocess, sys
import torch
from torch.utils.data.distributed import DistributedSampler

purple = sys.argv[1]
cases = [(n, replicas, rank, shuffle, drop, seed, epoch)
         for (n, replicas) in [(10, 3), (12, 4), (7, 2), (5, 8), (100, 3)]
         for rank in range(min(replicas, 3))
         for shuffle in (True, False)
         for drop in (False, True)
         for (seed, epoch) in [(0, 0), (7, 3)]]

program = ["(define (b x) (if x '#t '#f))"]
for (n, replicas, rank, shuffle, drop, seed, epoch) in cases:
    program.append(
        f"(let ((s (distributed-sampler {n} :num-replicas {replicas} :rank {rank} :shuffle {'#t' if shuffle else '#f'}"
        f" :drop-last {'#t' if drop else '#f'} :seed {seed})))"
        f" (set-epoch! s {epoch}) (write (list (sampler-length s) (tensor->list (sampler-indices s)))) (newline))")
# a data loader with :sampler reads the sampler's samples in its order
program.append("(let* ((s (distributed-sampler 10 :num-replicas 3 :rank 1 :seed 5)) "
               "(l (data-loader (tensor-dataset (tensor-arange 10)) :batch-size 2 :sampler s))) "
               "(set-epoch! l 2) (write (map (lambda (b) (tensor->list (car b))) (map (lambda (x) x) (let loop ((it (data-loader-iterator l)) (acc '())) (let ((v (it))) (if (eof-object? v) (reverse acc) (loop it (cons v acc)))))))) (newline))")
out = subprocess.run([purple, "-e", "(begin " + " ".join(program) + ")"], capture_output=True, text=True, timeout=120)
if out.returncode != 0:
    print(out.stderr)
    sys.exit(1)
lines = out.stdout.split("\n")
failures = 0
for line, (n, replicas, rank, shuffle, drop, seed, epoch) in zip(lines, cases):
    s = DistributedSampler(list(range(n)), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop)
    s.set_epoch(epoch)
    want = "(%d (%s))" % (len(s), " ".join(map(str, list(s))))
    if line.strip() != want:
        failures += 1
        print(f"FAIL n={n} replicas={replicas} rank={rank} shuffle={shuffle} drop_last={drop} seed={seed} epoch={epoch}:"
              f" purple {line.strip()} python {want}")
s = DistributedSampler(list(range(10)), num_replicas=3, rank=1, seed=5)
s.set_epoch(2)
idx = list(s)
want = "(" + " ".join("(%s)" % " ".join(map(str, idx[i:i + 2])) for i in range(0, len(idx), 2)) + ")"
if lines[len(cases)].strip() != want:
    failures += 1
    print("FAIL data-loader with :sampler: purple", lines[len(cases)].strip(), "python", want)
print(f"{len(cases) + 1 - failures} of {len(cases) + 1} sampler cases agree with torch's DistributedSampler")
sys.exit(1 if failures else 0)
