"""The Python half of Purple's bridge, run inside the module _purple_bridge (types.cpp defines
Value and Procedure there first). Nothing here imports torch until a torch adapter is asked for."""

import warnings

# The `purple` command flushes subnormal floats to zero (DESIGN.md: Adam is 80x slower without),
# which numpy reports once per dtype when it first computes its limits. That is intended here.
warnings.filterwarnings("ignore", message="The value of the smallest subnormal", category=UserWarning)


class Symbol(str):
    """A Purple symbol in Python: a str (it compares and hashes as its name) that becomes a
    symbol again when it goes back to Purple."""

    __slots__ = ()

    def __repr__(self):
        return "purple.Symbol(%s)" % str.__repr__(self)


class Error(Exception):
    """A Purple error that reached Python.

    kind       the error kind ("error", "type-error", "tensor-error", "file-error" ...)
    message    the message, without irritants
    irritants  the irritants, converted to Python
    backtrace  the Purple backtrace, innermost first (strings)
    value      the Purple error object (a purple.Value); raising this exception back into
               Purple re-raises that object, so Purple's guard sees the original error
    str(e) is the report Purple prints: message, irritants and backtrace."""

    def __init__(self, kind, message, irritants, backtrace, value, report):
        super().__init__(report)
        self.kind = kind
        self.message = message
        self.irritants = irritants
        self.backtrace = backtrace
        self.value = value


for _cls in (Symbol, Error):
    _cls.__module__ = "purple"


class DLPackHolder:
    """Hands a DLPack capsule to numpy.from_dlpack, which wants an object with __dlpack__."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


class ArrayHolder:
    """Lends a tensor's memory to numpy (writable, unlike numpy.from_dlpack's arrays) while
    keeping the tensor alive through its DLPack capsule."""

    def __init__(self, capsule, data, shape, strides, typestr):
        self._capsule = capsule
        self.__array_interface__ = {"data": (data, False), "shape": shape, "strides": strides,
                                    "typestr": typestr, "version": 3}


_module_class = None
_dataset_class = None


def module_class():
    """purple.Module: a Purple module (made with define-module, sequential, linear ...) as a
    torch.nn.Module. Its parameters are the Purple module's own tensors (the same TensorImpls),
    so a torch optimizer trains the Purple model and gradients flow both ways."""
    global _module_class
    if _module_class is None:
        import collections
        import torch

        class Module(torch.nn.Module):
            __doc__ = module_class.__doc__

            def __init__(self, value):
                super().__init__()
                object.__setattr__(self, "_purple_value", value)

            def _call_purple(self, name, *args, **kwargs):
                return self._purple_value._global(name)(*args, **kwargs)

            def forward(self, *args, **kwargs):
                return self._purple_value(*args, **kwargs)

            def __getattr__(self, name):
                # torch.nn.Module's own attributes first; then the module's Purple methods
                # (define-module's method clauses): m.encode(x), m.forward_once(x) for forward-once
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    pass
                value = object.__getattribute__(self, "_purple_value")
                for method in value._global("module-methods")(value):
                    if method != "forward" and str(method).replace("-", "_") == name:
                        call = value._global("module-call")
                        return lambda *args, **kwargs: call(value, Symbol(method), *args, **kwargs)
                raise AttributeError("%s has no attribute or method %r" % (type(self).__name__, name))

            def named_parameters(self, prefix="", recurse=True, *args, **kwargs):
                for name, tensor in self._call_purple("named-parameters", self._purple_value, recurse=recurse):
                    yield (prefix + "." + name if prefix else name), tensor

            def parameters(self, recurse=True):
                for _, tensor in self.named_parameters(recurse=recurse):
                    yield tensor

            def named_buffers(self, prefix="", recurse=True, *args, **kwargs):
                for name, tensor in self._call_purple("named-buffers", self._purple_value, recurse=recurse):
                    yield (prefix + "." + name if prefix else name), tensor

            def buffers(self, recurse=True):
                for _, tensor in self.named_buffers(recurse=recurse):
                    yield tensor

            def train(self, mode=True):
                self._call_purple("module-train!", self._purple_value, bool(mode))
                object.__setattr__(self, "training", bool(mode))
                return self

            def eval(self):
                return self.train(False)

            def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
                result = collections.OrderedDict() if destination is None else destination
                for name, tensor in self._call_purple("state-dict", self._purple_value):
                    result[prefix + name] = tensor
                return result

            def load_state_dict(self, state_dict, strict=True):
                entries = [Pair(name, tensor) for name, tensor in state_dict.items()]
                self._call_purple("load-state-dict!", self._purple_value, entries)
                return self

            def to(self, *args, **kwargs):
                target = kwargs.get("device", kwargs.get("dtype", args[0] if args else None))
                if target is not None:
                    self._call_purple("module-to", self._purple_value, str(target).replace("torch.", ""))
                return self

            def __repr__(self):
                return "purple.Module(%s)" % (repr(self._purple_value),)

        _module_class = Module
    return _module_class


def module_adapter(value):
    return module_class()(value)


class Pair(tuple):
    """(name . value): a 2-tuple that goes to Purple as a pair, not a vector."""

    __slots__ = ()

    def __new__(cls, a, b):
        return tuple.__new__(cls, (a, b))


def dataset_class():
    """purple.Dataset: a Purple dataset (anything dataset-ref accepts) as a
    torch.utils.data.Dataset; a sample's list of fields becomes a tuple."""
    global _dataset_class
    if _dataset_class is None:
        import torch.utils.data

        class Dataset(torch.utils.data.Dataset):
            __doc__ = dataset_class.__doc__

            def __init__(self, value):
                self._purple_value = value
                self._length = value._global("dataset-length")
                self._ref = value._global("dataset-ref")

            def __len__(self):
                return self._length(self._purple_value)

            def __getitem__(self, index):
                index = int(index)
                n = len(self)
                if index < 0:
                    index += n
                if not 0 <= index < n:
                    raise IndexError("Purple dataset index %d out of range (length %d)" % (index, n))
                sample = self._ref(self._purple_value, index)
                return tuple(sample) if isinstance(sample, list) else sample

            def __repr__(self):
                return "purple.Dataset(%r)" % (self._purple_value,)

        _dataset_class = Dataset
    return _dataset_class


def dataset_adapter(value):
    return dataset_class()(value)
