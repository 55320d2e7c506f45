# Random state and generators: what rng-state.purple computes, in python3-torch.
import torch
from interop_common import emit

torch.manual_seed(0)
emit("global-randn", torch.randn(5))
g = torch.Generator().manual_seed(123)
emit("gen-randn", torch.randn(4, generator=g))
emit("gen-rand", torch.rand(3, generator=g))
emit("gen-randperm", torch.randperm(10, generator=g))
emit("gen-randint", torch.randint(3, 17, (6,), generator=g))
emit("gen-multinomial", torch.multinomial(torch.tensor([0.1, 0.2, 0.3, 0.4]), 3, generator=g))
emit("gen-normal", torch.normal(2., 3., (3,), generator=g))
emit("gen-bernoulli", torch.bernoulli(torch.full((6,), 0.5), generator=g))
emit("default-seed-draw", torch.rand(3, generator=torch.Generator()))
torch.manual_seed(3)
s = torch.get_rng_state()
emit("rng-state-size", [s.numel()])
emit("rng-state-sum", [int(s.long().sum())])
torch.randn(100)
emit("rng-state-after-sum", [int(torch.get_rng_state().long().sum())])
torch.set_rng_state(s)
emit("after-restore", torch.randn(3))
emit("generator-state-sum", [int(g.get_state().long().sum())])
