"""The `purple` Python module: Purple from a python3 process.

Run by CTest as  /usr/bin/python3 tests/python/test_purple_module.py  with PYTHONPATH=build/python.
"""

import gc
import sys
import threading
import time
import unittest

import torch

import purple


class Basics(unittest.TestCase):
    def setUp(self):
        self.p = purple.Interpreter()

    def test_eval_and_conversions(self):
        p = self.p
        self.assertEqual(p.eval("(+ 1 2)"), 3)
        self.assertEqual(p.eval("(expt 2 100)"), 2 ** 100)
        self.assertEqual(p.eval("(/ 1 3)"), __import__("fractions").Fraction(1, 3))
        self.assertEqual(p.eval('"héllo"'), "héllo")
        self.assertEqual(p.eval("'(1 2 (3))"), [1, 2, [3]])
        self.assertEqual(p.eval("#(1 2)"), (1, 2))
        self.assertIs(p.eval("#t"), True)
        self.assertIsNone(p.eval("(if #f #f)"))
        self.assertEqual(p.eval("'(a . 1)"), ("a", 1))
        sym = p.eval("'train")
        self.assertIsInstance(sym, purple.Symbol)
        self.assertEqual(sym, "train")
        self.assertEqual(p.eval("(bytevector 1 2)"), b"\x01\x02")
        table = p.eval('(let ((h (make-equal-hash-table))) (hash-table-set! h "a" 1) h)')
        self.assertEqual(table, {"a": 1})
        record = p.eval("(define-record-type point (make-point x y) point? (x point-x) (y point-y)) (make-point 1 2)")
        self.assertIsInstance(record, purple.Value)
        self.assertEqual(repr(record), "<purple.Value #<point 1 2>>")

    def test_define_from_python(self):
        p = self.p
        p["n"] = 41
        p["xs"] = [1, 2, 3]
        p["d"] = {"lr": 0.5}
        p.define("s", "text")
        self.assertEqual(p.eval("(+ n 1)"), 42)
        self.assertEqual(p.eval("(apply + xs)"), 6)
        self.assertEqual(p.eval('(hash-table-ref/default d "lr" #f)'), 0.5)
        self.assertEqual(p.eval("(string-length s)"), 4)
        self.assertIn("n", p)
        self.assertNotIn("no-such-name", p)
        with self.assertRaises(KeyError):
            p["no-such-name"]

    def test_python_callables_in_purple(self):
        p = self.p
        p["py-add"] = lambda a, b=10, *, scale=1: (a + b) * scale
        self.assertEqual(p.eval("(py-add 1 2)"), 3)
        self.assertEqual(p.eval("(py-add 1 :scale 3)"), 33)
        self.assertEqual(p.eval("(map py-add '(1 2))"), [11, 12])

    def test_purple_procedures_in_python(self):
        p = self.p
        square = p.eval("(lambda (x) (* x x))")
        self.assertIsInstance(square, purple.Procedure)
        self.assertEqual(square(7), 49)
        self.assertEqual(list(map(square, [1, 2, 3])), [1, 4, 9])
        p.eval("(define (scaled x :key (factor 1) (learning-rate 0)) (+ (* x factor) learning-rate))")
        self.assertEqual(p.call("scaled", 2, factor=5, learning_rate=1), 11)
        self.assertEqual(p["scaled"](3), 3)

    def test_procedure_outlives_interpreter_variable(self):
        double = purple.Interpreter().eval("(lambda (x) (* 2 x))")
        gc.collect()
        self.assertEqual(double(21), 42)

    def test_sandbox(self):
        q = purple.Interpreter(sandbox=True)
        with self.assertRaises(purple.Error) as c:
            q.eval('(open-input-file "/etc/passwd")')
        self.assertEqual(c.exception.kind, "file-error")
        # Python has all of the process's rights: a sandboxed script cannot reach it
        for code in ('(py-import "os")', '(py-attr (py-import "builtins") "open")'):
            with self.assertRaises(purple.Error) as c:
                q.eval(code)
            self.assertIn("Python is disabled", str(c.exception))
        # a Python function the host hands in can still be called
        q.define("host-double", lambda x: 2 * x)
        self.assertEqual(q.eval("(host-double 21)"), 42)


class Errors(unittest.TestCase):
    def setUp(self):
        self.p = purple.Interpreter()

    def test_purple_error_in_python(self):
        with self.assertRaises(purple.Error) as c:
            self.p.eval('(define (f x) (+ 1 (error "bad input:" x)))\n(f 42)')
        e = c.exception
        self.assertEqual(e.kind, "error")
        self.assertEqual(e.message, "bad input:")
        self.assertEqual(e.irritants, [42])
        self.assertIn("bad input: 42", str(e))
        self.assertTrue(e.backtrace and "in error at <python>:1:" in e.backtrace[0], e.backtrace)
        self.assertIsInstance(e.value, purple.Value)

    def test_type_error_names_the_builtin(self):
        with self.assertRaises(purple.Error) as c:
            self.p.eval("(car 5)")
        self.assertEqual(c.exception.kind, "type-error")
        self.assertIn("car", str(c.exception))

    def test_python_exception_through_purple(self):
        def fails(x):
            raise ValueError("no good: %s" % x)

        self.p["fails"] = fails
        with self.assertRaises(ValueError) as c:
            self.p.eval("(define (g) (fails 1)) (g)")
        self.assertIn("no good: 1", str(c.exception))

    def test_purple_catches_python_exception(self):
        self.p["fails"] = lambda: {}["missing"]
        kind = self.p.eval("(guard (e ((python-error? e) (python-error-type e))) (fails))")
        self.assertEqual(kind, "KeyError")

    def test_read_error(self):
        with self.assertRaises(purple.Error) as c:
            self.p.eval("(+ 1")
        self.assertIn("read", c.exception.kind)


class Tensors(unittest.TestCase):
    def setUp(self):
        self.p = purple.Interpreter()

    def test_zero_copy_and_identity(self):
        t = torch.randn(3, 4)
        self.p["t"] = t
        back = self.p.eval("t")
        self.assertIs(back, t)
        self.assertEqual(self.p.eval("(tensor-data-ptr t)"), t.data_ptr())
        self.p.eval("(tensor-fill! t 5.)")
        self.assertEqual(t[2, 3].item(), 5.0)

    def test_autograd_both_ways(self):
        w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        self.p["w"] = w
        loss = self.p.eval("(tensor-sum (* w w))")
        loss.backward()
        self.assertTrue(torch.equal(w.grad, 2 * w.detach()))
        # a Purple leaf, backward in Purple through a Python op
        self.p["py-sin"] = torch.sin
        grad = self.p.eval("""
          (let ((x (tensor-from-data '(0.5 1.0) :requires-grad #t)))
            (backward (tensor-sum (py-sin x)))
            (tensor-grad x))""")
        self.assertTrue(torch.allclose(grad, torch.cos(torch.tensor([0.5, 1.0]))))


class Models(unittest.TestCase):
    """A pure-Python torch program using a Purple-defined model, and the reverse."""

    def test_python_trains_a_purple_model(self):
        p = purple.Interpreter()
        p.eval("""
          (define-module (mlp in hidden out)
            (submodules (fc1 (linear in hidden)) (fc2 (linear hidden out)))
            (forward (x) (fc2 (tensor-relu (fc1 x)))))
          (manual-seed 0)
          (define model (mlp 2 16 1))""")
        model = p["model"]
        self.assertIsInstance(model, torch.nn.Module)
        self.assertIsInstance(model, purple.Module)
        names = [n for n, _ in model.named_parameters()]
        self.assertEqual(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"])
        ptrs = p.eval("(map tensor-data-ptr (parameters model))")
        self.assertEqual([t.data_ptr() for t in model.parameters()], ptrs)
        # plain PyTorch: optimizer, loss, backward, step
        torch.manual_seed(0)
        x = torch.randn(64, 2)
        y = (x[:, :1] * 2 - x[:, 1:]) .detach()
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        first = None
        for _ in range(60):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            first = first if first is not None else loss.item()
        self.assertLess(loss.item(), first / 5)
        # Purple sees the trained weights: the same tensors
        purple_loss = p.eval("(lambda (x y) (tensor-item (mse-loss (model x) y)))")(x, y)
        self.assertAlmostEqual(purple_loss, torch.nn.functional.mse_loss(model(x), y).item(), places=5)
        self.assertEqual(set(model.state_dict().keys()), {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"})
        model.eval()
        self.assertFalse(p.eval("(module-training? model)"))

    def test_purple_module_methods_from_python(self):
        p = purple.Interpreter()
        p.eval("""
          (define-module (autoencoder n k)
            (submodules (enc (linear n k)) (dec (linear k n)))
            (method (encode x) (enc x))
            (method (decode-twice z :key (scale 1)) (tensor-mul (dec z) (* 2 scale)))
            (forward (x) (dec (encode x))))
          (manual-seed 0)
          (define ae (autoencoder 6 2))""")
        ae = p["ae"]
        x = torch.randn(3, 6)
        w, b = dict(ae.named_parameters())["enc.weight"], dict(ae.named_parameters())["enc.bias"]
        self.assertTrue(torch.allclose(ae.encode(x), torch.nn.functional.linear(x, w, b)))
        z = ae.encode(x)
        dw, db = dict(ae.named_parameters())["dec.weight"], dict(ae.named_parameters())["dec.bias"]
        want = torch.nn.functional.linear(z, dw, db) * 6
        self.assertTrue(torch.allclose(ae.decode_twice(z, scale=3), want))
        self.assertTrue(torch.allclose(ae(x), torch.nn.functional.linear(z, dw, db)))
        with self.assertRaises(AttributeError):
            ae.no_such_method

    def test_purple_trains_a_python_model(self):
        p = purple.Interpreter()
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        p["net"] = net
        p["x"] = torch.randn(64, 2)
        history = p.eval("""
          (define y (tensor-sub (tensor-mul (tensor-narrow x 1 0 1) 2) (tensor-narrow x 1 1 1)))
          (define opt (adam (py-list (py-call-method net "parameters")) :lr 0.05))
          (map (lambda (epoch) (cdr (assq 'loss epoch)))
               (fit net opt mse-loss (data-loader (tensor-dataset x y) :batch-size 16) :epochs 40 :verbose #f))""")
        self.assertLess(history[-1], history[0] / 5)


class Data(unittest.TestCase):
    def test_purple_dataset_in_torch_dataloader(self):
        p = purple.Interpreter()
        ds = p.eval("(make-dataset 10 (lambda (i) (list (tensor-full '(3) i) (* i i))))")
        loader = torch.utils.data.DataLoader(purple.Dataset(ds), batch_size=4, shuffle=True)
        seen = sorted(int(v) for _, y in loader for v in y)
        self.assertEqual(seen, [i * i for i in range(10)])


class Threads(unittest.TestCase):
    def test_gil_is_released_while_purple_runs(self):
        p = purple.Interpreter()
        spin = p.eval("(lambda (n) (let loop ((i 0) (acc 0)) (if (= i n) acc (loop (+ i 1) (+ acc i)))))")
        ticks = []
        stop = threading.Event()

        def ticker():
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.001)

        th = threading.Thread(target=ticker)
        th.start()
        try:
            self.assertEqual(spin(3_000_000), 3_000_000 * (3_000_000 - 1) // 2)
        finally:
            stop.set()
            th.join()
        self.assertGreater(len(ticks), 5)

    def test_threads_calling_one_interpreter(self):
        p = purple.Interpreter()
        p.eval("(define counter 0) (define (bump! n) (let loop ((i 0)) (when (< i n) (set! counter (+ counter 1)) (loop (+ i 1)))))")
        bump = p["bump!"]
        threads = [threading.Thread(target=bump, args=(20000,)) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(p["counter"], 80000)

    def test_purple_callback_from_python_thread_inside_purple(self):
        # Purple calls Python, which runs a Purple procedure on another thread and waits for it.
        p = purple.Interpreter()
        result = p.eval("""
          (py-exec "
            import threading
            def on_thread(f):
                out = []
                th = threading.Thread(target=lambda: out.append(f(20)))
                th.start()
                th.join()
                return out[0]")
          (py-call (py-eval "on_thread") (lambda (x) (* x 2)))""")
        self.assertEqual(result, 40)


class Memory(unittest.TestCase):
    def test_many_calls_leave_nothing_behind(self):
        p = purple.Interpreter()
        f = p.eval("(lambda (t xs) (list (* t 2) (length xs) 'done))")
        t = torch.ones(8)
        token = object()

        def loop(n):
            for i in range(n):
                r = f(t, [i, token, "s"])
                assert r[1] == 3

        loop(2000)
        p.eval("(gc) (gc)")
        gc.collect()
        before = len(gc.get_objects())
        refs = sys.getrefcount(token)
        live = p.eval("(cdr (assq 'live-tensors (gc-stats)))")
        loop(100000)
        p.eval("(gc) (gc)")
        gc.collect()
        # The collector scans stacks conservatively: a stale word can keep the last few results
        # (and so a reference to token, or a tensor) alive for a while. A leak would show as
        # about 100,000 here; a handful is the conservative scan, not a leak.
        self.assertLess(abs(len(gc.get_objects()) - before), 100)
        self.assertLessEqual(abs(sys.getrefcount(token) - refs), 3)
        self.assertLessEqual(abs(p.eval("(cdr (assq 'live-tensors (gc-stats)))") - live), 3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
