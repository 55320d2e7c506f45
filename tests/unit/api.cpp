// The embedding API (include/purple/purple.hpp), used as a host uses it.
#include <purple/purple.hpp>

#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>

#include "tests/unit/doctest_after_torch.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

purple::Error evalError(purple::Interpreter& interp, const std::string& code) {
  try {
    interp.eval(code);
  } catch (const purple::Error& e) {
    return e;
  }
  FAIL("no error from: " << code);
  return purple::Error("none", "none");
}

purple::Options sandboxOptions() {
  purple::Options o;
  o.limits = purple::Limits::sandbox();
  return o;
}

struct Counter {
  int64_t n = 0;
  static inline int destroyed = 0;
  explicit Counter(int64_t start = 0) : n(start) {}
  Counter(const Counter&) = default;
  Counter(Counter&& o) noexcept : n(o.n) { o.n = -1000; }
  ~Counter() {
    if (n != -1000) destroyed++;
  }
  void inc(int64_t by) { n += by; }
  int64_t get() const { return n; }
};

}  // namespace

TEST_CASE("api: eval returns values with type tests, conversions and printing") {
  purple::Interpreter interp;
  purple::Value v = interp.eval("(+ 1 2)");
  CHECK(v.isInteger());
  CHECK(v.to<int64_t>() == 3);
  CHECK(v.to<int>() == 3);
  CHECK(v.to<double>() == 3.0);
  CHECK(interp.eval("\"hi\"").to<std::string>() == "hi");
  CHECK(interp.eval("\"hi\"").repr() == "\"hi\"");
  CHECK(interp.eval("\"hi\"").str() == "hi");
  CHECK(interp.eval("'(1 2 3)").to<std::vector<int64_t>>() == std::vector<int64_t>{1, 2, 3});
  CHECK(interp.eval("#(1.5 2)").to<std::vector<double>>() == std::vector<double>{1.5, 2.0});
  CHECK(interp.eval("#f").to<std::optional<int64_t>>() == std::nullopt);
  CHECK(interp.eval("7").to<std::optional<int64_t>>() == 7);
  CHECK(interp.eval("#t").to<bool>());
  CHECK(interp.eval("'sym").isSymbol());
  CHECK(interp.eval("car").isProcedure());
  CHECK(interp.eval("(list 1 \"a\" 'b)").repr() == "(1 \"a\" b)");
  CHECK(interp.eval("(list 1 2)").size() == 2);
  CHECK(interp.eval("(list 1 2)")[1].to<int64_t>() == 2);
  CHECK(interp.eval("(expt 2 100)").repr() == "1267650600228229401496703205376");
  CHECK_FALSE(interp.eval("\"x\"").is<int64_t>());
  CHECK(interp.eval("1.5").is<double>());
  CHECK(interp.eval("(expt 2 100)").typeName() == "integer");
  purple::Error e = [&] {
    try {
      interp.eval("\"x\"").to<int64_t>();
    } catch (const purple::Error& err) {
      return err;
    }
    return purple::Error("none", "none");
  }();
  CHECK(e.kind() == "type-error");
  std::ostringstream os;
  os << interp.eval("'(a \"b\")");
  CHECK(os.str() == "(a \"b\")");
}

TEST_CASE("api: interpreters have their own globals") {
  purple::Interpreter a, b;
  a.eval("(define x 1)");
  b.eval("(define x 2)");
  CHECK(a.get<int64_t>("x") == 1);
  CHECK(b.get<int64_t>("x") == 2);
  CHECK_FALSE(a.has("only-in-b"));
  b.set("only-in-b", 3);
  CHECK(b.has("only-in-b"));
  CHECK_FALSE(a.has("only-in-b"));
}

TEST_CASE("api: set, get and call with automatic conversion") {
  purple::Interpreter interp;
  interp.set("n", 41);
  interp.set("name", std::string("purple"));
  interp.set("xs", std::vector<double>{1, 2, 3});
  interp.set("maybe", std::optional<int>());
  interp.set("pair", std::make_tuple(1, std::string("a"), true));
  CHECK(interp.eval("(+ n 1)").to<int64_t>() == 42);
  CHECK(interp.eval("(string-length name)").to<int64_t>() == 6);
  CHECK(interp.eval("(apply + xs)").to<double>() == 6.0);
  CHECK(interp.eval("maybe").isFalse());
  CHECK(interp.eval("pair").repr() == "(1 \"a\" #t)");
  interp.eval("(define (add a b) (+ a b))");
  CHECK(interp.call("add", 2, 3).to<int64_t>() == 5);
  CHECK(interp.call("add", 2.5, 3).to<double>() == 5.5);
  purple::Value add = interp.get("add");
  CHECK(interp.call(add, 10, 20).to<int64_t>() == 30);
  CHECK(interp.call("string-append", "a", std::string("b")).to<std::string>() == "ab");
  CHECK(interp.call("length", std::vector<int>{1, 2, 3}).to<int64_t>() == 3);
  purple::Value lam = interp.eval("(lambda (xs) (map (lambda (x) (* x x)) xs))");
  CHECK(interp.call(lam, std::vector<int64_t>{1, 2, 3}).to<std::vector<int64_t>>() == std::vector<int64_t>{1, 4, 9});
  CHECK(interp.get<std::string>("name") == "purple");
  purple::Error e = evalError(interp, "(car 5)");
  CHECK(e.kind() == "type-error");
  CHECK_THROWS_AS(interp.get("no-such-global"), purple::Error);
  CHECK_THROWS_AS(interp.call("no-such-global", 1), purple::Error);
  CHECK_THROWS_AS(interp.call(purple::Value::from(5), 1), purple::Error);
}

TEST_CASE("api: values stay alive while the host holds them") {
  purple::Interpreter interp;
  purple::Value kept = interp.eval("(list (make-string 3 #\\a) (vector 1 2) 'k)");
  interp.eval("(let loop ((i 0)) (if (< i 200000) (begin (make-vector 10 i) (loop (+ i 1)))))");
  interp.eval("(gc)");
  CHECK(kept.repr() == "(\"aaa\" #(1 2) k)");
  purple::Value copy = kept;
  kept = purple::Value();
  interp.eval("(gc)");
  CHECK(copy.repr() == "(\"aaa\" #(1 2) k)");
}

TEST_CASE("api: define converts arguments and results both ways") {
  purple::Interpreter interp;
  interp.define("twice", [](int64_t x) { return 2 * x; }, "Two times X.");
  interp.define("hypot2", [](double a, double b) { return a * a + b * b; });
  interp.define("shout", [](const std::string& s) { return s + "!"; });
  interp.define("negate?", [](bool b) { return !b; });
  interp.define("sum", [](const std::vector<double>& xs) {
    double s = 0;
    for (double x : xs) s += x;
    return s;
  });
  interp.define("greet", [](std::string name, std::optional<std::string> greeting) {
    return greeting.value_or("hello") + " " + name;
  });
  interp.define("range", [](int n) {
    std::vector<int64_t> r;
    for (int i = 0; i < n; i++) r.push_back(i);
    return r;
  });
  interp.define("first-or-false", [](const std::vector<purple::Value>& xs) {
    return xs.empty() ? std::optional<purple::Value>() : std::optional<purple::Value>(xs[0]);
  });
  interp.define("kind", [](purple::Value v) { return v.typeName(); });
  interp.define("nothing", []() {});
  interp.define("scaled", "(x factor)", [](double x, double f) { return x * f; }, "X times FACTOR.");
  CHECK(interp.eval("(twice 21)").to<int64_t>() == 42);
  CHECK(interp.eval("(hypot2 3 4)").to<double>() == 25.0);
  CHECK(interp.eval("(shout \"hey\")").to<std::string>() == "hey!");
  CHECK(interp.eval("(negate? #f)").isTrue());
  CHECK(interp.eval("(sum '(1 2 3.5))").to<double>() == 6.5);
  CHECK(interp.eval("(sum #(1 2))").to<double>() == 3.0);
  CHECK(interp.eval("(greet \"bob\")").to<std::string>() == "hello bob");
  CHECK(interp.eval("(greet \"bob\" \"hi\")").to<std::string>() == "hi bob");
  CHECK(interp.eval("(range 4)").repr() == "(0 1 2 3)");
  CHECK(interp.eval("(first-or-false '())").isFalse());
  CHECK(interp.eval("(first-or-false '(x y))").repr() == "x");
  CHECK(interp.eval("(kind \"s\")").to<std::string>() == "string");
  CHECK(interp.eval("(nothing)").isUnspecified());
  CHECK(interp.eval("(scaled 2 3)").to<double>() == 6.0);
  // help shows the docstring; errors name the function and argument
  std::ostringstream out;
  interp.setOutput(out);
  interp.eval("(help 'twice)");
  CHECK(out.str().find("Two times X.") != std::string::npos);
  purple::Error e = evalError(interp, "(twice \"no\")");
  CHECK(e.kind() == "type-error");
  CHECK(std::string(e.what()).find("twice") != std::string::npos);
  CHECK(evalError(interp, "(twice 1 2)").kind() == "arity-error");
  CHECK(evalError(interp, "(scaled 1)").kind() == "arity-error");
  // a narrow integer parameter rejects values it cannot hold
  CHECK(evalError(interp, "(range (expt 2 40))").kind() == "type-error");
  // a signature that does not match the C++ arity is refused
  CHECK_THROWS_AS(interp.define("bad", "(a b)", [](int a) { return a; }, ""), purple::Error);
  CHECK_FALSE(interp.has("bad"));
}

TEST_CASE("api: C++ exceptions in native functions become Purple errors") {
  purple::Interpreter interp;
  interp.define("fail", [](std::string why) -> int { throw std::runtime_error(why); });
  interp.define("fail-odd", []() -> int { throw 42; });
  interp.define("fail-purple", []() -> int { throw purple::Error("my-error", "custom", {purple::Value::from(7)}); });
  interp.define("fail-torch", []() { return at::ones({2}).matmul(at::ones({3})); });
  CHECK(interp.eval("(guard (e (#t (error-object-message e))) (fail \"boom\"))").to<std::string>() == "boom");
  CHECK(interp.eval("(guard (e ((error-object? e) 'caught)) (fail-odd))").repr() == "caught");
  CHECK(interp.eval("(guard (e ((error-object? e) (list (error-object-kind e) (error-object-irritants e)))) (fail-purple))")
            .repr() == "(my-error (7))");
  CHECK(interp.eval("(guard (e (#t (error-object-kind e))) (fail-torch))").repr() == "tensor-error");
  CHECK(interp.eval("(with-exception-handler (lambda (e) 0) (lambda () (+ 1 (raise-continuable 'x))))").to<int64_t>() == 1);
  purple::Error e = evalError(interp, "(define (f) (fail \"deep\"))\n(define (g) (+ 1 (f)))\n(g)");
  CHECK(e.kind() == "error");
  CHECK(e.message().find("deep") != std::string::npos);
  CHECK_FALSE(e.backtrace().empty());
  CHECK(e.report().find("Error:") == 0);
}

TEST_CASE("api: errors carry message, irritants, kind and backtrace") {
  purple::Interpreter interp;
  purple::Error e = evalError(interp, "(define (inner x) (error \"bad thing:\" x 'sym))\n(define (outer) (+ 1 (inner 42)))\n(outer)");
  CHECK(e.kind() == "error");
  CHECK(e.message() == "bad thing:");
  REQUIRE(e.irritants().size() == 2);
  CHECK(e.irritants()[0].to<int64_t>() == 42);
  CHECK(e.irritantStrings()[1] == "sym");
  CHECK(std::string(e.what()) == "bad thing: 42 sym");
  REQUIRE(!e.backtrace().empty());
  CHECK(e.backtrace()[0].find("<eval>:1:") != std::string::npos);
  CHECK(e.backtrace().back().find("outer") != std::string::npos);
  CHECK(e.payload().isError());
  purple::Error r = evalError(interp, "(raise (list 1 2))");
  CHECK(r.kind() == "raise");
  CHECK(r.payload().repr() == "(1 2)");
  CHECK(evalError(interp, "(undefined-thing)").kind() == "unbound-variable");
  CHECK(evalError(interp, "(car").kind() == "read-error");
  // the interpreter goes on after errors
  CHECK(interp.eval("(+ 1 1)").to<int64_t>() == 2);
}

TEST_CASE("api: exit is reported to the host, never exits the process") {
  std::ostringstream out;
  purple::Options o;
  o.out = &out;
  purple::Interpreter interp(o);
  try {
    interp.eval("(display \"bye\") (exit 3)");
    FAIL("no exit");
  } catch (const purple::Exit& e) {
    CHECK(e.code() == 3);
    CHECK(e.kind() == "exit");
  }
  CHECK(out.str() == "bye");
  CHECK(interp.eval("(+ 1 1)").to<int64_t>() == 2);
}

TEST_CASE("api: native functions calling back into Purple") {
  purple::Interpreter interp;
  interp.define("apply-twice", [&interp](purple::Value f, int64_t x) {
    return interp.call(f, interp.call(f, x)).to<int64_t>();
  });
  CHECK(interp.eval("(apply-twice (lambda (x) (* x 3)) 2)").to<int64_t>() == 18);
  // A Purple error inside the nested call passes through the host function to Purple's guard
  // as the same error object.
  CHECK(interp.eval("(guard (e ((symbol? e) (list 'got e))) (apply-twice (lambda (x) (raise 'oops)) 1))").repr() ==
        "(got oops)");
  CHECK(interp.eval("(call/cc (lambda (k) (apply-twice (lambda (x) (k 'escaped)) 1)))").repr() == "escaped");
}

// The session of "api: host objects", in a frame of its own: the values it held on its stack
// (P points into c's cell) are then in the dead stack the exit census clears, below the test's
// frame, rather than in the test's own frame, where a conservative collector could still find
// them whatever the compiler's layout.
[[gnu::noinline]] static void hostObjectSession() {
  purple::Interpreter interp;
  interp.defineType<Counter>("counter")
      .constructor<int64_t>("make-counter", "A counter starting at N.")
      .method("inc!", &Counter::inc, "Adds BY.")
      .method("value", &Counter::get)
      .method("reset!", [](Counter& c) { c.n = 0; });
  interp.define("counter-copy", [](const Counter& c) { return Counter(c.n); });
  interp.eval("(define c (make-counter 5))");
  interp.eval("(counter-inc! c 2)");
  CHECK(interp.eval("(counter-value c)").to<int64_t>() == 7);
  CHECK(interp.eval("(c 'inc! 3) (c 'value)").to<int64_t>() == 10);
  CHECK(interp.eval("(counter? c)").isTrue());
  CHECK(interp.eval("(counter? 5)").isFalse());
  CHECK(interp.eval("c").repr() == "#<counter>");
  CHECK(interp.eval("c").typeName() == "counter");
  Counter* p = interp.get("c").object<Counter>();
  REQUIRE(p != nullptr);
  CHECK(p->n == 10);
  p->n = 100;
  CHECK(interp.eval("(counter-value c)").to<int64_t>() == 100);
  CHECK(interp.eval("(counter-value (counter-copy c))").to<int64_t>() == 100);
  CHECK(evalError(interp, "(counter-value 5)").kind() == "type-error");
  CHECK(evalError(interp, "(c 'no-such-method)").kind() == "unbound-variable");
  // the host wraps its own objects, owned or shared
  interp.set("d", interp.wrap(Counter(1)));
  CHECK(interp.eval("(counter-value d)").to<int64_t>() == 1);
  auto shared = std::make_shared<Counter>(50);
  interp.set("s", interp.wrap(shared));
  interp.eval("(counter-inc! s 1)");
  CHECK(shared->n == 51);
  // objects nobody references are destroyed by the collector
  int before = Counter::destroyed;
  interp.eval("(define (churn i) (if (> i 0) (begin (make-counter i) (churn (- i 1))))) (churn 1000) (gc)");
  CHECK(Counter::destroyed - before >= 900);
}

TEST_CASE("api: host objects") {
  Counter::destroyed = 0;
  hostObjectSession();
  // the interpreter's own objects go when it does (the collector is conservative: under the
  // sanitizers, whose stack frames are larger and keep stale pointers longer, one or two may
  // stay; PURPLE_SANITIZED, cmake/sanitize_tests.cmake)
  // The destructor collected once; the exit census clears the dead stack below this frame first
  // (an earlier test case's frames left pointers there) and collects until nothing is finalized.
  purple::collectGarbage();
  if (std::getenv("PURPLE_SANITIZED")) WARN(Counter::destroyed >= 1003);
  else CHECK(Counter::destroyed >= 1003);
}

TEST_CASE("api: output goes to host streams and callbacks") {
  std::ostringstream out, err;
  purple::Options o;
  o.out = &out;
  o.err = &err;
  purple::Interpreter interp(o);
  interp.eval("(display \"hello\") (newline) (write 'x (current-error-port))");
  CHECK(out.str() == "hello\n");
  CHECK(err.str() == "x");
  CHECK(interp.eval("(with-output-to-string (lambda () (display 1)))").to<std::string>() == "1");
  interp.eval("(display \"e\" (current-error-port))");
  CHECK(err.str() == "xe");
  std::string captured;
  interp.setOutput([&](std::string_view s) { captured.append(s); });
  interp.eval("(display (list 1 2))");
  CHECK(captured == "(1 2)");
  interp.setInput("(1 2) hello");
  CHECK(interp.eval("(read)").repr() == "(1 2)");
  CHECK(interp.eval("(read)").repr() == "hello");
}

TEST_CASE("api: tensors pass in and out without copies") {
  purple::Interpreter interp;
  at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3});
  interp.set("t", t);
  at::Tensor back = interp.get<at::Tensor>("t");
  CHECK(back.data_ptr() == t.data_ptr());
  interp.eval("(tensor-mul! t 2)");
  CHECK(t[1][2].item<float>() == 10.0f);
  at::Tensor r = interp.eval("(tensor-sum t)").tensor();
  CHECK(r.item<float>() == 30.0f);
  void* seen = nullptr;
  interp.define("data-ptr-of", [&seen](at::Tensor x) {
    seen = x.data_ptr();
    return x;
  });
  at::Tensor same = interp.call("data-ptr-of", t).to<at::Tensor>();
  CHECK(seen == t.data_ptr());
  CHECK(same.data_ptr() == t.data_ptr());
  interp.define("make-ones", [](int64_t n) { return at::ones({n}); });
  CHECK(interp.eval("(tensor-shape (make-ones 4))").repr() == "(4)");
  CHECK(interp.eval("(make-ones 3)").isTensor());
}

TEST_CASE("api: a value the host holds survives the script overwriting its variable") {
  // `set!` frees a tensor only its variable held (issue 7); a host's get makes it shared.
  purple::Interpreter interp;
  interp.eval("(define x (tensor-ones 2)) (define r (tensor-add x 1))");
  purple::Value held = interp.get("r");
  at::Tensor heldTensor = interp.get<at::Tensor>("r");
  interp.eval("(set! r (tensor-add x 5))");
  CHECK(held.tensor().sum().item<float>() == 4.0f);
  CHECK(heldTensor.sum().item<float>() == 4.0f);
  CHECK(interp.eval("(tensor-item (tensor-sum r))").to<double>() == 12.0);
}

TEST_CASE("api: DLPack import and export share memory") {
  purple::Interpreter interp;
  at::Tensor t = at::arange(4, at::kDouble);
  DLManagedTensor* dl = at::toDLPack(t);
  purple::Value v = purple::Value::fromDLPack(dl);
  CHECK(v.tensor().data_ptr() == t.data_ptr());
  interp.set("v", v);
  DLManagedTensor* out = interp.get("v").toDLPack();
  CHECK(out->dl_tensor.data == t.data_ptr());
  CHECK(out->dl_tensor.ndim == 1);
  CHECK(out->dl_tensor.shape[0] == 4);
  out->deleter(out);
  // the C interface
  purple_interpreter* c = purple_new(nullptr);
  REQUIRE(c != nullptr);
  CHECK(purple_set_tensor(c, "x", at::toDLPack(t)) == 0);
  char* result = nullptr;
  CHECK(purple_eval(c, "(tensor-item (tensor-sum x))", &result) == 0);
  CHECK(std::string(result) == "6.0");
  purple_string_free(result);
  DLManagedTensor* got = purple_get_tensor(c, "x");
  REQUIRE(got != nullptr);
  CHECK(got->dl_tensor.data == t.data_ptr());
  got->deleter(got);
  CHECK(purple_eval(c, "(car 1)", nullptr) == 1);
  CHECK(std::string(purple_last_error(c)).find("car") != std::string::npos);
  CHECK(purple_get_tensor(c, "unbound-name") == nullptr);
  CHECK(purple_eval(c, "(exit 4)", nullptr) == 2);
  CHECK(purple_exit_code(c) == 4);
  purple_free(c);
  purple_options o;
  purple_options_sandbox(&o);
  o.max_steps = 100000;
  purple_interpreter* s = purple_new(&o);
  CHECK(purple_eval(s, "(let loop () (loop))", nullptr) == 1);
  CHECK(std::string(purple_last_error(s)).find("step") != std::string::npos);
  CHECK(purple_eval(s, "(open-input-file \"/etc/passwd\")", nullptr) == 1);
  purple_free(s);
}

// ---- hostile scripts ----------------------------------------------------------------------

TEST_CASE("sandbox: no files, processes or environment") {
  purple::Interpreter interp(sandboxOptions());
  const char* attempts[] = {
      "(open-input-file \"/etc/passwd\")",
      "(call-with-input-file \"/etc/passwd\" read-line)",
      "(with-input-from-file \"/etc/passwd\" read-line)",
      "(open-output-file \"/tmp/purple-sandbox-escape\")",
      "(with-output-to-file \"/tmp/purple-sandbox-escape\" (lambda () (display 1)))",
      "(call-with-output-file \"/tmp/purple-sandbox-escape\" (lambda (p) (display 1 p)))",
      "(file-exists? \"/etc/passwd\")",
      "(delete-file \"/tmp/purple-sandbox-escape\")",
      "(load \"/etc/passwd\")",
      "(include \"/etc/passwd\")",
      "(import (evil library))",
      "(torch-save (tensor-ones 2) \"/tmp/purple-sandbox-escape\")",
      "(torch-load \"/etc/passwd\")",
      "(save-state-dict (linear 2 2) \"/tmp/purple-sandbox-escape\")",
      "(load-state-dict \"/etc/passwd\")",
      "(load-csv \"/etc/passwd\")",
      "(load-idx \"/etc/passwd\")",
      "(rename-file \"/tmp/a\" \"/tmp/b\")",
      "(create-directory \"/tmp/purple-sandbox-dir\")",
      "(exit 0)",
      "(emergency-exit 0)",
      "(command-line)",
      "(get-environment-variable \"HOME\")",
      "(get-environment-variables)",
      "(eval '(open-input-file \"/etc/passwd\"))",
  };
  for (const char* code : attempts) {
    INFO(code);
    purple::Error e = evalError(interp, code);
    CHECK(e.kind() != "exit");
    CHECK(std::string(e.what()).find("disabled") != std::string::npos);
  }
  CHECK(interp.eval("(import (scheme base)) 1").to<int64_t>() == 1);
}

TEST_CASE("sandbox: step budget stops infinite loops and cannot be caught") {
  purple::Options o = sandboxOptions();
  o.limits.maxSteps = 200000;
  purple::Interpreter interp(o);
  const char* loops[] = {
      "(let loop () (loop))",
      "(define (f) (f)) (f)",
      "(guard (e (#t 'caught)) (let loop () (loop)))",
      "(let retry () (guard (e (#t (retry))) (let loop () (loop))))",
      "(with-exception-handler (lambda (e) 'handled) (lambda () (let loop () (loop))))",
      "(with-exception-handler (lambda (e) (let loop () (loop))) (lambda () (let loop () (loop))))",
      "(dynamic-wind (lambda () #f) (lambda () (let loop () (loop))) (lambda () (let loop () (loop))))",
      "(let outer () (call/cc (lambda (k) (dynamic-wind (lambda () #f) (lambda () (let loop () (loop)))"
      " (lambda () (k #f))))) (outer))",
      "(let outer () (guard (e (#t (outer))) (dynamic-wind (lambda () #f) (lambda () (let loop () (loop)))"
      " (lambda () (error \"x\")))))",
      "(do ((i 0 (+ i 1))) (#f) i)",
      "(for-each (lambda (x) x) (let loop ((l '()) (i 0)) (loop (cons i l) (+ i 1))))",
      "(map (lambda (x) (let loop () (loop))) '(1 2))",
      "(vector-for-each (lambda (x) (let loop () (loop))) #(1))",
      "(eval '(let loop () (loop)))",
      "(force (delay (let loop () (loop))))",
  };
  for (const char* code : loops) {
    INFO(code);
    purple::Error e = evalError(interp, code);
    CHECK(e.kind() == "step-limit");
    CHECK(e.isInterrupt());
  }
  // the budget is re-armed for each call
  CHECK(interp.eval("(let loop ((i 0)) (if (< i 1000) (loop (+ i 1)) i))").to<int64_t>() == 1000);
}

TEST_CASE("sandbox: time budget") {
  purple::Options o = sandboxOptions();
  o.limits.maxSeconds = 0.2;
  purple::Interpreter interp(o);
  auto start = std::chrono::steady_clock::now();
  purple::Error e = evalError(interp, "(guard (e (#t 'caught)) (let loop () (loop)))");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(e.kind() == "time-limit");
  CHECK(secs < 5);
  CHECK(interp.eval("(+ 1 2)").to<int64_t>() == 3);
  // a native function's Purple callback shares the outer call's budget
  interp.define("call-thunk", [&interp](purple::Value f) { return interp.call(f); });
  CHECK(evalError(interp, "(call-thunk (lambda () (let loop () (loop))))").kind() == "time-limit");
}

TEST_CASE("sandbox: deep recursion is an error, not a crash") {
  purple::Interpreter interp(sandboxOptions());
  purple::Error e = evalError(interp, "(define (f n) (+ 1 (f (+ n 1)))) (f 0)");
  CHECK(e.kind() == "recursion-error");
  CHECK(interp.eval("(define (g n) (if (= n 0) 0 (+ 1 (g (- n 1))))) (g 1000)").to<int64_t>() == 1000);
  CHECK(evalError(interp, "(define (h n) (apply h (list (+ n 1)))) (h 0)").kind() == "recursion-error");
  CHECK(evalError(interp, "(define (m l) (map m (list l))) (m 1)").kind() == "recursion-error");
}

TEST_CASE("sandbox: tensor memory cap") {
  purple::Options o = sandboxOptions();
  o.limits.maxTensorBytes = int64_t(64) << 20;
  purple::Interpreter interp(o);
  // one request far beyond the machine's memory is refused before it is made
  CHECK(evalError(interp, "(tensor-zeros 100000 100000 100)").kind() == "memory-error");
  CHECK(evalError(interp, "(tensor-ones 20000 20000)").kind() == "memory-error");
  // many live tensors
  purple::Error e = evalError(interp, "(let loop ((keep '())) (loop (cons (tensor-ones 1000 1000) keep)))");
  CHECK(e.kind() == "memory-error");
  // a refused allocation is an ordinary error: nothing was allocated, so guard may handle it
  CHECK(interp.eval("(guard (e ((error-object? e) (error-object-kind e))) (tensor-zeros 100000 100000))").repr() ==
        "memory-error");
  // garbage does not count against the cap
  CHECK(interp.eval("(let loop ((i 0)) (if (< i 50) (begin (tensor-ones 1000 1000) (loop (+ i 1))) i))").to<int64_t>() == 50);
}

TEST_CASE("sandbox: interrupt from another thread") {
  purple::Interpreter interp(sandboxOptions());
  std::atomic<bool> started{false};
  interp.define("started!", [&started]() { started = true; });
  std::thread watchdog([&] {
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    interp.interrupt();
  });
  // cleanup code in dynamic-wind runs, but cannot keep the interrupted script going
  purple::Error e = evalError(interp,
                              "(started!) (guard (e (#t 'caught)) (dynamic-wind (lambda () #f) (lambda () (let loop () (loop)))"
                              " (lambda () (let loop () (loop)))))");
  watchdog.join();
  CHECK(e.kind() == "interrupt");
  // consumed: the next evaluation runs
  CHECK(interp.eval("(+ 1 2)").to<int64_t>() == 3);
}

TEST_CASE("api: an interpreter used from another thread") {
  purple::Interpreter interp;
  interp.eval("(define xs (iota 1000))");
  int64_t sum = 0;
  std::thread worker([&] {
    interp.eval("(define (churn n) (if (> n 0) (begin (make-vector 100 n) (churn (- n 1))))) (churn 100000)");
    sum = interp.eval("(apply + xs)").to<int64_t>();
  });
  worker.join();
  CHECK(sum == 499500);
  CHECK(interp.eval("(length xs)").to<int64_t>() == 1000);
}

TEST_CASE("api: interpreters on several threads intern the same and different names at once") {
  // The symbol table is process-wide: four interpreters make names at the same time, half of
  // them shared, while their collections free the symbols no one keeps.
  constexpr int kThreads = 4;
  std::vector<std::string> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([t, &results] {
      purple::Interpreter interp;
      std::string own = "\"own-" + std::to_string(t) + "-\"";
      results[t] = interp.eval(
          "(define (name p i) (string-append p (number->string i)))"
          "(define kept (let loop ((i 0) (acc '()))"
          "  (if (= i 20000) acc"
          "      (begin (string->symbol (name \"dropped-\" i))"
          "             (loop (+ i 1) (cons (cons (string->symbol (name \"shared-\" i))"
          "                                       (string->symbol (name " + own + " i))) acc))))))"
          "(let check ((l kept) (i 19999))"
          "  (cond ((null? l) 'ok)"
          "        ((and (eq? (caar l) (string->symbol (name \"shared-\" i)))"
          "              (string=? (symbol->string (cdar l)) (name " + own + " i)))"
          "         (check (cdr l) (- i 1)))"
          "        (else (list 'wrong i))))").repr();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; t++) {
    CAPTURE(t);
    CHECK(results[t] == "ok");
  }
}

TEST_CASE("sandbox: deeply nested data is an error on a host thread's stack, not a crash") {
  std::ostringstream out;
  purple::Options o = sandboxOptions();
  o.out = &out;
  purple::Interpreter interp(o);
  interp.eval("(define (mk n x) (if (= n 0) x (mk (- n 1) (list x)))) (define d (mk 1000000 1))");
  interp.eval("(define (mke n x) (if (= n 0) x (mke (- n 1) (list '+ 1 x)))) (define e (mke 1000000 1))");
  CHECK(evalError(interp, "(write d)").kind() == "recursion-error");
  CHECK_THROWS_AS(interp.get("d").repr(), purple::Error);
  CHECK(evalError(interp, "(eval e)").kind() == "recursion-error");
  CHECK(evalError(interp, "(eval (list 'quasiquote e))").kind() == "recursion-error");
  CHECK(evalError(interp, "(tensor-from-data d)").kind() == "recursion-error");
  CHECK(evalError(interp, "(read (open-input-string (make-string 1000000 #\\()))").kind() == "read-error");
  CHECK(evalError(interp, std::string(1000000, '(')).kind() == "read-error");
  CHECK(interp.eval("(equal? d d)").isTrue());
}
