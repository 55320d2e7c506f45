// Hardening (issue 11): what an embedding host relies on — no crash, every stop honoured
// promptly — exercised through the public API.
#include <purple/purple.hpp>

#include <ATen/ATen.h>

#include "tests/unit/big_stack.hpp"

#include "tests/unit/doctest_after_torch.hpp"

#include <gc/gc.h>
#include <gc/gc_mark.h>

#include <chrono>
#include <string>
#include <thread>
#include <atomic>
#include <memory>
#include <vector>

namespace {

purple::Error errorOf(purple::Interpreter& interp, const std::string& code) {
  try {
    interp.eval(code);
  } catch (const purple::Error& e) {
    return e;
  }
  FAIL("no error from: " << code);
  return purple::Error("none", "none");
}

}  // namespace

TEST_CASE("hardening: define-syntax with a transformer that is not syntax-rules") {
  purple::Interpreter interp;
  CHECK(errorOf(interp, "(define-syntax m 5)").kind() == "syntax-error");
  CHECK(errorOf(interp, "(define-syntax m \"text\")").kind() == "syntax-error");
  CHECK(errorOf(interp, "(define-syntax m (car '()))").kind() == "type-error");
  // a procedure is a transformer of the whole form's arguments
  CHECK(interp.eval("(define-syntax twice (lambda (x) (list 'begin x x))) (define n 0) (twice (set! n (+ n 1))) n")
            .to<int64_t>() == 2);
  CHECK(interp.eval("(+ 1 2)").to<int64_t>() == 3);
}

TEST_CASE("hardening: cyclic code is an error") {
  purple::Options o;
  o.limits.maxDepth = 10000;
  purple::Interpreter interp(o);
  CHECK(errorOf(interp, "(eval (let ((form (list 'car 1))) (set-car! (cdr form) form) form))").kind() ==
        "recursion-error");
  CHECK(errorOf(interp, "(eval (let ((form (list 'begin 1))) (set-cdr! (cdr form) form) form))").kind() ==
        "syntax-error");
}

TEST_CASE("hardening: compiling a cyclic form stops at the time budget") {
  // Compiling nests until the depth limit (here 0.3 s on a 2-core machine; a fuzz input took
  // 5.9 s): the deadline, checked as the compiler goes, ends it first.
  purple::Options o;
  o.limits.maxDepth = 20000;
  o.limits.maxSeconds = 0.01;
  purple::Interpreter interp(o);
  CHECK(errorOf(interp, "(let () '() #0=(let ((x 1)) (if x #0# #0#)))").kind() == "time-limit");
}

TEST_CASE("hardening: a handler that re-enters its own with-exception-handler") {
  purple::Options o;
  o.limits.maxDepth = 5000;
  purple::Interpreter interp(o);
  // Used to recurse through Interp::raise until the C++ stack overflowed.
  purple::Error e = errorOf(interp, "(define (f) (with-exception-handler (lambda (e) 1) f)) (f)");
  CHECK(e.kind() == "error");
  CHECK(e.message().find("handler returned") != std::string::npos);
  CHECK(interp.eval("(+ 1 2)").to<int64_t>() == 3);
}

TEST_CASE("hardening: thousands of nested handlers that return") {
  // 3,000 nested handlers need more than the main thread's 8 MB under AddressSanitizer
  purple_test::onBigStack([] {
    purple::Interpreter interp;
    // Quadratic before (each secondary error rebuilt the whole backtrace): 4.3 s for 3,000.
    interp.eval(
        "(define (nest n) (if (= n 0) (raise 'boom)"
        "  (with-exception-handler (lambda (e) 1) (lambda () (+ 1 (nest (- n 1)))))))");
    purple::Error e = errorOf(interp, "(nest 3000)");
    CHECK(e.message() == "exception handler returned from a non-continuable raise");
    CHECK(e.irritantStrings() == std::vector<std::string>{"boom"});
  });
}

TEST_CASE("hardening: an interrupt is noticed at the next primitive call") {
  purple::Interpreter interp;
  interp.define("trip!", [&interp]() { interp.interrupt(); });
  interp.eval("(define reached #f)");
  // No closure call follows the request: only the primitive call to car can notice it.
  purple::Error e = errorOf(interp, "(begin (trip!) (car '(1)) (set! reached #t))");
  CHECK(e.kind() == "interrupt");
  CHECK(interp.eval("reached").isFalse());
  // the interrupt was consumed: the interpreter goes on
  CHECK(interp.eval("(+ 1 2)").to<int64_t>() == 3);
}

TEST_CASE("hardening: a time budget is noticed at the next primitive call") {
  purple::Options o;
  o.limits.maxSeconds = 0.2;
  purple::Interpreter interp(o);
  interp.define("nap", []() { std::this_thread::sleep_for(std::chrono::milliseconds(600)); });
  interp.eval("(define reached #f)");
  purple::Error e = errorOf(interp, "(begin (nap) (car '(1)) (set! reached #t))");
  CHECK(e.kind() == "time-limit");
  CHECK(interp.eval("reached").isFalse());
  // each outermost call gets a fresh budget
  CHECK(interp.eval("(+ 1 2)").to<int64_t>() == 3);
}

TEST_CASE("hardening: a sandbox cannot read the host's stdin or change process-wide settings") {
  purple::Options o;
  o.limits = purple::Limits::sandbox();
  purple::Interpreter interp(o);
  // no Options::input: the current input port is the process's stdin, which is the host's
  CHECK(errorOf(interp, "(read-line)").message().find("standard input") != std::string::npos);
  CHECK(errorOf(interp, "(read)").message().find("standard input") != std::string::npos);
  for (const char* code : {"(set-tensor-gc-threshold! 1)", "(tensor-set-print-options! :precision 2)",
                           "(set-num-threads! 1)", "(set-default-dtype! 'float64)", "(manual-seed 1)",
                           "(set-flush-denormal! #t)", "(set-detect-anomaly! #t)", "(default-generator)",
                           "(set-rng-state! (get-rng-state))"}) {
    CAPTURE(code);
    CHECK(errorOf(interp, code).message().find("process access is disabled") != std::string::npos);
  }
  // what stays allowed: a generator of its own, and input the host gives
  CHECK(interp.eval("(generator? (generator :seed 1))").isTrue());
  purple::Options withInput = o;
  withInput.input = std::string("hello\n");
  purple::Interpreter fed(withInput);
  CHECK(fed.eval("(read-line)").to<std::string>() == "hello");
  // a host's own interpreter keeps every setting
  purple::Interpreter host;
  CHECK_NOTHROW(host.eval("(tensor-set-print-options! :precision 4)"));
}

TEST_CASE("hardening: builtins whose work grows with their input honour the budgets") {
  purple::Options o;
  o.limits.maxSeconds = 0.3;
  purple::Interpreter interp(o);
  // one builtin call, no closure calls: only the builtin's own polling can stop it
  CHECK(errorOf(interp, "(length (make-list 200000000 0))").kind() == "time-limit");
  CHECK(errorOf(interp, "(length (iota 200000000))").kind() == "time-limit");
  // results past the size limit of exact integers are refused before GMP starts (it aborts)
  CHECK(errorOf(interp, "(expt 7 (expt 10 9))").kind() == "range-error");
  CHECK(errorOf(interp, "(expt 2 (expt 2 40))").kind() == "range-error");
  CHECK(errorOf(interp, "(arithmetic-shift 1 (expt 2 40))").kind() == "range-error");
  {
    // making the 30-million-character string may itself use up 0.3 s on a loaded machine
    std::string kind = errorOf(interp, "(string->number (make-string 30000000 #\\7))").kind();
    CHECK((kind == "range-error" || kind == "time-limit"));
  }
  // circular lists end in an error, not a loop no budget can stop
  for (const char* walk : {"(member 5 c)", "(memq 'x c)", "(memv 5 c)", "(assq 'x a)", "(assoc \"x\" a)",
                           "(length c)", "(list-copy c)"}) {
    CAPTURE(walk);
    std::string code = std::string("(let ((c (list 1 2 3)) (a (list (cons 1 1) (cons 2 2))))"
                                   "  (set-cdr! (cddr c) c) (set-cdr! (cdr a) a) ") + walk + ")";
    CHECK(errorOf(interp, code).kind() == "type-error");
  }
  CHECK(interp.eval("(let ((c (list 1 2 3))) (set-cdr! (cddr c) c) (car (list-tail c 1000000000000001)))")
            .to<int64_t>() == 3);
  CHECK(interp.eval("(+ 1 2)").to<int64_t>() == 3);
}

TEST_CASE("hardening: one big GMP operation stops at the time budget, and big results stay right") {
  // GMP computes a gcd of two 40-Mbit integers in one call of 5 to 12 s here, and every rational
  // operation computes gcds: before big operations ran on a worker thread, that call ran to its
  // end past any budget. The numbers are made inside the budget (about 0.3 s).
  purple::Options o;
  o.limits.maxSeconds = 2;
  purple::Interpreter interp(o);
  auto start = std::chrono::steady_clock::now();
  CHECK(errorOf(interp, "(gcd (- (expt 3 25000000) 1) (- (expt 5 17000000) 3))").kind() == "time-limit");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 3.5);   // the budget and unwinding; the gcd alone takes longer
  CHECK(interp.eval("(+ 1 2)").to<int64_t>() == 3);

  // Results computed on a worker (operands past 2^17 bits for gcds and rationals, 2^21 for the rest).
  purple::Interpreter unlimited;
  CHECK(unlimited.eval("(gcd (* (expt 3 100000) 3125) (* (expt 7 90000) 3125))").to<int64_t>() == 3125);
  CHECK(unlimited.eval("(= (/ (expt 3 100000) (expt 6 100000)) (/ 1 (expt 2 100000)))").to<bool>());
  CHECK(unlimited.eval("(= (+ (/ 1 (expt 3 100000)) (/ 2 (expt 3 100000))) (/ 1 (expt 3 99999)))").to<bool>());
  CHECK(unlimited.eval("(= (* (expt 3 1500000) (expt 3 1500000)) (expt 3 3000000))").to<bool>());
  CHECK(unlimited.eval("(call-with-values (lambda () (exact-integer-sqrt (+ (expt 3 3000000) 7)))"
                       "  (lambda (s r) (and (= s (expt 3 1500000)) (= r 7))))").to<bool>());
  CHECK(unlimited.eval("(= (quotient (expt 3 3000000) (expt 3 1000000)) (expt 3 2000000))").to<bool>());
  CHECK(unlimited.eval("(< (/ (expt 3 2000000) (expt 2 3000000)) (/ (expt 3 2000001) (expt 2 3000000)))").to<bool>());
  CHECK(unlimited.eval("(= (floor (/ (+ (expt 2 3000000) 1) (expt 2 3000000))) 1)").to<bool>());
  CHECK(unlimited.eval("(= (round (+ (expt 3 1500000) 1/2)) (+ (expt 3 1500000) 1))").to<bool>());   // half to even
  CHECK(unlimited.eval("(string-length (number->string (expt 10 1000000)))").to<int64_t>() == 1000001);
  CHECK(unlimited.eval("(= (string->number (string-append \"1\" (make-string 1000000 #\\0))) (expt 10 1000000))")
            .to<bool>());
}

TEST_CASE("hardening: one tensor operation too big for the time budget is refused before it runs") {
  // Each of these is one LibTorch call that ran for tens of seconds to hours with no safe point:
  // a 1200x1200 image with a 600x600 kernel took 40 s under a 2 s budget (7 MB of tensors).
  purple::Options o;
  o.limits = purple::Limits::sandbox();
  o.limits.maxSeconds = 1;
  o.limits.maxSteps = 0;
  purple::Interpreter interp(o);
  const char* cases[] = {
      "(conv2d (tensor-ones 1 1 1200 1200) (tensor-ones 1 1 600 600))",
      "(tensor-sum (tensor-expand (tensor-ones 1) 1000000000000))",   // one number, 10^12 times
      "(max-pool2d (tensor-ones 1 1 1500 1500) 700 :stride 1)",
      "(avg-pool2d (tensor-ones 1 1 1500 1500) 700 :stride 1)",
      "(tensor-svd (tensor-randn 1500 1500))",
      "(tensor-cdist (tensor-randn 4000 1000) (tensor-randn 4000 1000) :p 1.0)",
      "(let ((a (tensor-expand (tensor-ones 1 1 1) 100000 100 100))) (tensor-matmul a a))",
  };
  for (const char* code : cases) {
    CAPTURE(code);
    auto start = std::chrono::steady_clock::now();
    purple::Error e = errorOf(interp, code);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(e.kind() == "time-limit");
    CHECK(std::string(e.what()).find("too big for the time budget") != std::string::npos);
    CHECK(seconds < 0.9);   // refused up front, not stopped at the deadline
  }
  // An LSTM over a long sequence, about 35 s of work: LibTorch 1.13 steps through it inside one
  // composite operator, which stops at the deadline, at its next allocation; 2.x runs each layer
  // as one oneDNN kernel (LSTM(64, 64) over these 200,000 steps ends in 0.8 s), refused up front.
  auto start = std::chrono::steady_clock::now();
  CHECK(errorOf(interp, "(let ((m (lstm 64 512))) (m (tensor-randn 200000 1 64)))").kind() == "time-limit");
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 2.5);
  // Ordinary work under the same budget runs, and a refusal is a stop like the budget's own,
  // which a script cannot catch.
  CHECK(interp.eval("(let* ((w (tensor-randn 784 128 :requires-grad #t)) (x (tensor-randn 64 784)))"
                    "  (backward (tensor-sum (tensor-relu (tensor-matmul x w))))"
                    "  (conv2d (tensor-ones 8 3 32 32) (tensor-ones 16 3 3 3))"
                    "  (tensor-shape (tensor-grad w)))")
            .repr() == "(784 128)");
  CHECK(errorOf(interp, "(guard (e (#t 'caught)) (tensor-sum (tensor-expand (tensor-ones 1) 1000000000000)))")
            .kind() == "time-limit");
  // Views of a huge expanded tensor cost nothing and are not refused.
  CHECK(interp.eval("(tensor-shape (tensor-narrow (tensor-expand (tensor-ones 1 1) 1000000 1000000) 0 5 1))").repr() ==
        "(1 1000000)");
  // Without a time budget nothing is estimated.
  purple::Interpreter unlimited;
  CHECK(unlimited.eval("(tensor-item (tensor-sum (tensor-expand (tensor-ones 1) 100000000)))").to<double>() == 1e8);
}

TEST_CASE("hardening: tensor->list is refused up front past the heap limit") {
  purple::setHeapLimit(std::size_t(1) << 30);
  purple::Interpreter interp;
  purple::Error e = errorOf(interp, "(tensor->list (tensor-expand (tensor-zeros 1) 1000000000))");
  purple::setHeapLimit(0);
  CHECK(e.kind() == "memory-error");
}

TEST_CASE("hardening: a NUL character in a numeral is not an exponent marker") {
  // strchr("eEsSfFdDlL", c) matched the terminator: "1<NUL>2" read as 100.0, and each
  // "#e0<NUL>999990" in a fuzz input computed 10^999990 (a 4 KB input took 1.2 s to read)
  purple::Interpreter interp;
  CHECK_FALSE(interp.eval("(string->number (string #\\1 (integer->char 0) #\\2))").isTrue());
  CHECK_FALSE(interp.eval("(string->number (string #\\1 (integer->char 0) #\\+ #\\2 #\\i))").isTrue());
  CHECK(interp.eval("(list (string->number \"1s2\") (string->number \"1d-2\") (string->number \"#e1.5e3\"))").repr() ==
        "(100.0 0.01 1500)");
}

TEST_CASE("hardening: printing shared structure that unfolds without bound stops at the time budget") {
  purple::Options o;
  o.limits.maxSeconds = 0.3;
  purple::Interpreter interp(o);
  // 41 lists, 2^40 leaves once unfolded: no cycle, so write prints it all; only the printer's
  // own polling can stop it (fuzz slow unit a70a488: printing a 6-million-element list in a
  // failed test's message ran 1.5 s past a 2 s budget)
  interp.eval("(define (dag n) (if (= n 0) (list 1 2 3) (let ((d (dag (- n 1)))) (list d d))))");
  CHECK(errorOf(interp, "(call-with-output-string (lambda (p) (write (dag 40) p)))").kind() == "time-limit");
  CHECK(errorOf(interp, "(call-with-output-string (lambda (p) (display (vector (dag 40)) p)))").kind() ==
        "time-limit");
  // what the stop must not break, without a budget (these take a while under ASan)
  purple::Interpreter unlimited;
  unlimited.eval("(define (dag n) (if (= n 0) (list 1 2 3) (let ((d (dag (- n 1)))) (list d d))))");
  CHECK(unlimited.eval("(call-with-output-string (lambda (p) (write (dag 1) p)))").str() ==
        "((1 2 3) (1 2 3))");
  // a cycle at the end of a long list is still found (the quick acyclic walk gives up on it)
  std::string tail = unlimited.eval("(let ((l (iota 300000))) (set-cdr! (last-pair l) (list-tail l 5))"
                                 "  (call-with-output-string (lambda (p) (write (vector l) p))))").str();
  CHECK(tail.rfind("#((0 1 2 3 4 . #0=(5 6 7 ", 0) == 0);
  const std::string end = " 299999 . #0#)))";
  CHECK((tail.size() > end.size() && tail.compare(tail.size() - end.size(), end.size(), end) == 0));
}

TEST_CASE("hardening: symbols a script makes are collected once unused, and keep their identity while used") {
  purple::Interpreter interp;
  interp.eval(R"P((define (make-symbols n)
                   (let loop ((i 0))
                     (when (< i n)
                       (string->symbol (string-append "made-" (number->string i)))
                       (read (open-input-string (string-append "read-" (number->string i))))
                       (loop (+ i 1)))))
                 (define (interned) (gc) (cdr (assq 'interned-symbols (gc-stats))))
                 (define kept (string->symbol "kept-symbol"))
                 (define kept-keyword (string->keyword "kept-keyword"))
                 (eval (read (open-input-string "(define global-from-data 42)")))
                 (eval (read (open-input-string
                         "(define-syntax swap-from-data (syntax-rules () ((_ a b) (list b a))))")))
                 (define table (make-eq-hash-table))
                 (hash-table-set! table (string->symbol "key-from-data") 7)
                 (define before (interned)))P");
  // Collectable symbols cost no collections of their own: with one weak link per symbol, Boehm
  // ran a full collection every few thousand new names (60 here; 24 without those, most of them
  // for the 100,000 string ports).
  int64_t collectionsBefore = interp.eval("(cdr (assq 'collections (gc-stats)))").to<int64_t>();
  interp.eval("(make-symbols 100000)");
  int64_t collections = interp.eval("(cdr (assq 'collections (gc-stats)))").to<int64_t>() - collectionsBefore;
  CAPTURE(collections);
  CHECK(collections < 40);
  int64_t grown = interp.eval("(- (interned) before)").to<int64_t>();
  CAPTURE(grown);
  CHECK(grown < 20000);   // 200,000 made; without collection all stay (32 bytes each, for good)
  // Names whose symbols were collected intern afresh: the probe meets their old, emptied entries
  // (same hash) and must neither return them nor lose the new symbol.
  interp.eval(R"P((define again (map (lambda (i) (string->symbol (string-append "made-" (number->string i))))
                                     (iota 1000 0 97))))P");
  CHECK(interp.eval("(let loop ((l again) (i 0)) (cond ((null? l) #t)"
                    "  ((and (eq? (car l) (string->symbol (string-append \"made-\" (number->string i))))"
                    "        (string=? (symbol->string (car l)) (string-append \"made-\" (number->string i))))"
                    "   (loop (cdr l) (+ i 97)))"
                    "  (else #f)))").isTrue());
  int64_t regrown = interp.eval("(- (interned) before)").to<int64_t>();
  CAPTURE(regrown);
  CHECK(regrown >= 1000);
  CHECK(regrown < 21000);
  // every symbol still referenced is still the one interning its name gives
  CHECK(interp.eval("(eq? kept (string->symbol \"kept-symbol\"))").isTrue());
  CHECK(interp.eval("(eq? kept-keyword (string->keyword \"kept-keyword\"))").isTrue());
  CHECK(interp.eval("(eq? kept (read (open-input-string \"kept-symbol\")))").isTrue());
  CHECK(interp.eval("(eval (read (open-input-string \"global-from-data\")))").to<int64_t>() == 42);
  CHECK(interp.eval("(eval (read (open-input-string \"(swap-from-data 1 2)\")))").repr() == "(2 1)");
  CHECK(interp.eval("(hash-table-ref/default table (string->symbol \"key-from-data\") #f)").to<int64_t>() == 7);
  // names C++ code uses keep working when a script spelled them first
  CHECK(interp.eval("(eq? (string->symbol \"quote\") 'quote)").isTrue());
  CHECK(interp.eval("(eq? (string->keyword \"dim\") :dim)").isTrue());
  CHECK(interp.eval("(tensor-shape (apply tensor-sum (list (tensor-ones 2 3) (string->keyword \"dim\") 0)))")
            .repr() == "(3)");
}

TEST_CASE("gc-stats: allocated-bytes is what the collected heap handed out, collections or not") {
  purple::Interpreter interp;
  interp.eval("(define (allocated) (cdr (assq 'allocated-bytes (gc-stats))))"
              "(define (pairs n) (let loop ((i 0) (l '())) (if (= i n) l (loop (+ i 1) (cons i l)))))");
  int64_t before = interp.eval("(allocated)").to<int64_t>();
  interp.eval("(pairs 100000)");
  int64_t pairs = interp.eval("(allocated)").to<int64_t>() - before;
  CAPTURE(pairs);
  CHECK(pairs >= 100000 * 24);   // a pair is a header and two values
  CHECK(pairs < 100000 * 64);
  before = interp.eval("(allocated)").to<int64_t>();
  interp.eval("(gc)");
  CHECK(interp.eval("(allocated)").to<int64_t>() >= before);   // a collection frees, never un-counts
}

namespace {
// Live uncollectable (rooted, scanned) objects in the collected heap, counted after a collection.
size_t uncollectableObjects() {
  void* probe = GC_MALLOC_UNCOLLECTABLE(16);
  struct Census { int kind; size_t count; } census{GC_get_kind_and_size(probe, nullptr), 0};
  GC_FREE(probe);
  GC_gcollect();
  GC_call_with_alloc_lock(
      [](void* c) -> void* {
        GC_enumerate_reachable_objects_inner(
            [](void* obj, size_t, void* data) {
              auto* census = static_cast<Census*>(data);
              if (GC_get_kind_and_size(obj, nullptr) == census->kind) census->count++;
            },
            c);
        return nullptr;
      },
      &census);
  return census.count;
}
}  // namespace

// CTest runs this case alone (unit/gc-roots): the census counts an uncollectable slot that was
// freed as live until it is reused, so after other cases it no longer tells one interpreter's.
TEST_CASE("gc: an interpreter holds a few dozen roots, not one per name") {
  // The collector pushes every live uncollectable object before it marks, and past a quarter of
  // its first mark stack (4,096 entries) it marks serially and regrows the stack: in each of a
  // program's first collections, while a fresh interpreter held 4,600 of them (a root per global
  // name, and one or two per builtin).
  size_t before = uncollectableObjects();
  if (before > 100) {
    MESSAGE("skipped: other cases ran first (" << before << " uncollectable slots); CTest's unit/gc-roots runs it");
    return;
  }
  {
    purple::Interpreter interp;
    interp.eval("(define-library (counted) (export f) (import (scheme base)) (begin (define (f x) x)))"
                "(import (counted)) (define g (f 1))");
    size_t with = uncollectableObjects();
    CAPTURE(before);
    CAPTURE(with);
    CHECK(with < before + 200);
    CHECK(with < 1000);
    CHECK(interp.eval("g").to<int64_t>() == 1);   // the names survived those collections
  }
  // And a destroyed interpreter leaves none behind. (The census counts a freed slot as live until
  // it is reused: Debian 13's run showed 22 and 23 in 1 of 8, against a leak of thousands.)
  CHECK(uncollectableObjects() <= before + 40);
}

TEST_CASE("hardening: dropped ports free their buffers, and live ones count against the heap limit") {
  // A port's text is malloc'ed, which the collector does not see: 50 input ports over a 100 MB
  // string, each dropped at once, held 5 GB before the ports charged their buffers to it.
  purple::Options o;
  o.limits.maxSeconds = 60;   // a safety net only: each case must end in its own error
  purple::Interpreter interp(o);
  interp.eval("(define s (make-string 20000000 #\\a))"
              "(define (buffers) (cdr (assq 'buffer-bytes (gc-stats))))"
              "(define (collections) (cdr (assq 'collections (gc-stats))))"
              "(define (churn make n) (let loop ((i 0) (most 0) (c0 (collections)))"
              "  (if (= i n) (list most (- (collections) c0))"
              "      (begin (make) (loop (+ i 1) (max most (buffers)) c0)))))");
  // (most charged at once, collections run): the loops themselves allocate almost nothing in the
  // heap, so only the charges start collections
  auto churn = [&](const std::string& make) {
    purple::Value r = interp.eval("(churn (lambda () " + make + ") 40)");
    return std::make_pair(interp.call("car", r).to<int64_t>(), interp.call("cadr", r).to<int64_t>());
  };
  // (plain variables, not structured bindings: clang 14 cannot capture those in CAPTURE's lambda)
  std::pair<int64_t, int64_t> in = churn("(read-char (open-input-string s))");
  std::pair<int64_t, int64_t> out = churn("(let ((p (open-output-string))) (write-string s p))");
  int64_t mostIn = in.first, collectedIn = in.second, mostOut = out.first, collectedOut = out.second;
  CAPTURE(mostIn);
  CAPTURE(mostOut);
  CHECK(collectedIn >= 8);                 // 40 x 20 MB, a collection per 64 MB
  CHECK(collectedOut >= 8);
  CHECK(mostIn < (int64_t(200) << 20));    // 800 MB without collections
  CHECK(mostOut < (int64_t(200) << 20));
  CHECK(interp.eval("(let ((p (open-output-string))) (write-string \"abc\" p) (write-char #\\d p) (get-output-string p))")
            .str() == "abcd");
  // Live ports: each is below the limit, together they pass it.
  purple::setHeapLimit(std::size_t(512) << 20);
  // (bounded at 2 GB, so that a regression fails here instead of exhausting the machine)
  purple::Error many = errorOf(interp, "(let loop ((ports '()) (i 0))"
                                       "  (when (< i 100) (loop (cons (open-input-string s) ports) (+ i 1))))");
  purple::Error grown = errorOf(interp, "(let ((ports (map (lambda (i) (open-output-string)) (iota 25))))"
                                        "  (let loop ((i 0)) (when (< i 4)"
                                        "    (for-each (lambda (p) (write-string s p)) ports) (loop (+ i 1)))))");
  purple::setHeapLimit(0);
  CHECK(many.kind() == "memory-error");
  CHECK(grown.kind() == "memory-error");
  CHECK(interp.eval("(string-length (get-output-string (let ((p (open-output-string))) (write-string s p) p)))")
            .to<int64_t>() == 20000000);
}

TEST_CASE("hardening: random-seed! in one interpreter does not steer another's random on the same thread") {
  purple::Interpreter host;
  purple::Options sandboxOptions;
  sandboxOptions.limits = purple::Limits::sandbox();
  purple::Interpreter sandboxed(sandboxOptions);
  host.eval("(random-seed! 7)");
  std::string expected = host.eval("(list (random 1000000000) (random 1000000000))").repr();
  host.eval("(random-seed! 7)");
  sandboxed.eval("(random-seed! 99) (random 10)");
  CHECK(host.eval("(list (random 1000000000) (random 1000000000))").repr() == expected);
}

TEST_CASE("hardening: results gathered outside the collected heap are refused before they grow") {
  // Each of these used to build its whole result in malloc'ed memory first: 60 copies of a
  // 100 MB string took 11 s and 6.6 GB before "string too long"; (string-pad "a" 1500000000)
  // took 36 s and 17.7 GB.
  purple::setHeapLimit(std::size_t(512) << 20);
  purple::Options o;
  o.limits.maxSeconds = 60;   // a safety net only: each case must end in its own error
  purple::Interpreter interp(o);
  interp.eval("(define s (make-string 10000000 #\\a))");
  purple::Error tooLong = errorOf(interp, "(apply string-append (make-list 500 s))");
  purple::Error pastLimit = errorOf(interp, "(apply string-append (make-list 200 s))");
  purple::Error joined = errorOf(interp, "(string-join (make-list 200 s) \",\")");
  purple::Error padded = errorOf(interp, "(string-pad \"a\" 1500000000)");
  purple::Error formatted = errorOf(interp, "(format #f \"~2000000000a\" 1)");
  purple::Error port = errorOf(interp, "(call-with-output-string (lambda (p) (let loop () (write-string s p) (loop))))");
  purple::setHeapLimit(0);
  CHECK(tooLong.kind() == "range-error");
  CHECK(pastLimit.kind() == "memory-error");
  CHECK(joined.kind() == "memory-error");
  CHECK(padded.kind() == "memory-error");
  CHECK(formatted.kind() == "memory-error");
  CHECK(port.kind() == "memory-error");
  CHECK(interp.eval("(string-length (string-append s s))").to<int64_t>() == 20000000);
  CHECK(interp.eval("(string-pad-right \"ab\" 4 #\\λ)").str() == "abλλ");
  CHECK(interp.eval("(format #f \"~5,'0d|~6a|~4,'λd\" 42 \"héllo\" 7)").str() == "00042|héllo |λλλ7");
}

TEST_CASE("hardening: collectable symbols keep one identity across threads while they live") {
  // One interpreter keeps 200 symbols alive; four threads, each with its own interpreter,
  // make and drop the same names and thousands of fresh ones, with collections in between
  // (the collector clears dead symbols' links while other threads intern). Every thread must
  // keep finding the kept objects, never a second symbol of the same name.
  purple::Interpreter keeper;
  keeper.eval("(define kept (list->vector (map (lambda (i) (string->symbol (string-append \"shared-\" "
              "(number->string i)))) (iota 200))))");
  purple::Value kept = keeper.eval("kept");
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<purple::Interpreter>> interps;
  for (int t = 0; t < kThreads; t++) {
    interps.push_back(std::make_unique<purple::Interpreter>());
    interps.back()->set("kept", kept);
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      purple::Interpreter& in = *interps[t];
      try {
        in.eval("(define (shared i) (string->symbol (string-append \"shared-\" (number->string i))))");
        for (int round = 0; round < 8; round++) {
          in.eval("(let loop ((i 0)) (when (< i 5000) (string->symbol (string-append \"fresh-" +
                  std::to_string(t) + "-\" (number->string i))) (shared (modulo i 400)) (loop (+ i 1))))");
          if (round % 2 == 0) in.eval("(gc)");
          bool same = in.eval("(let loop ((i 0)) (or (= i 200) (and (eq? (vector-ref kept i) (shared i)) "
                              "(loop (+ i 1)))))").isTrue();
          if (!same) failures++;
        }
      } catch (const purple::Error& e) {
        failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  CHECK(keeper.eval("(eq? (vector-ref kept 7) (string->symbol \"shared-7\"))").isTrue());
}
