"""Purple from Python: run Purple code, exchange values and tensors, call procedures both ways.

    import purple, torch
    p = purple.Interpreter()
    p.eval("(define (square x) (* x x))")
    p["square"](7)                      # 49: a Purple procedure is a Python callable
    p["w"] = torch.ones(3, requires_grad=True)   # defines w in Purple: the same tensor
    p.eval("(tensor-sum (* w 2))")      # a torch.Tensor, with its autograd graph

Values convert both ways (numbers, strings, booleans, None, lists, tuples <-> vectors, dicts <->
hash tables, tensors as the same at::Tensor); other Purple values are purple.Value objects and
other Python objects are py-objects in Purple. A Purple error raised in Python is purple.Error;
a Python exception raised in Purple code called from Python comes back as itself. See
docs/python.md.
"""

from ._purple import Interpreter as _Interpreter
from ._purple import bridge as _bridge

Value = _bridge.Value
Procedure = _bridge.Procedure
Symbol = _bridge.Symbol
Error = _bridge.Error

__all__ = ["Interpreter", "Value", "Procedure", "Symbol", "Error", "Module", "Dataset"]


class Interpreter(_Interpreter):
    """A Purple interpreter (with (purple python) imported in it).

    Interpreter(sandbox=False, max_steps=0, max_seconds=0.0, max_tensor_bytes=0,
                library_path=None, argv=None)
    sandbox=True leaves out file, process and environment access; the max_ budgets bound each
    call (0: none); library_path lists directories `import` searches; argv is what
    (command-line) returns.

    eval(code), load(path), get(name) / interp[name], define(name, value) / interp[name] = value,
    name in interp, call(name_or_procedure, *args, **kwargs), interrupt()."""

    def __getitem__(self, name):
        if not self.has(name):
            raise KeyError(name)
        return self.get(name)

    def __setitem__(self, name, value):
        self.define(name, value)

    def __contains__(self, name):
        return self.has(name)

    def call(self, procedure, *args, **kwargs):
        """Calls the Purple procedure PROCEDURE (a global's name or a purple.Procedure) with
        ARGS; keyword arguments become Purple keywords (learning_rate=0.1 is :learning-rate 0.1)."""
        if isinstance(procedure, str):
            procedure = self.get(procedure)
        return procedure(*args, **kwargs)


def __getattr__(name):
    # The torch adapters are made on first use: importing purple does not import torch.
    if name == "Module":
        return _bridge.module_class()
    if name == "Dataset":
        return _bridge.dataset_class()
    raise AttributeError("module 'purple' has no attribute %r" % (name,))
