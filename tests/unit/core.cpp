// Unit tests of the interpreter's core pieces: reader, printer, numbers, evaluator, GC glue.
#include "interp/core/gc.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/language/reader.hpp"
#include "interp/memory/tensor_value.hpp"
#include "tests/unit/big_stack.hpp"
#include <gc/gc.h>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/doctest_after_torch.hpp"

using namespace purple;

namespace {
Interp& interp() {
  static Interp* in = new Interp();   // one shared interpreter: construction loads the prelude
  return *in;
}
std::string show(Value v) { return toWriteString(v); }
std::string eval(const std::string& text) {
  Interp& in = interp();
  InterpScope scope(&in);
  return show(in.evalString(text, "<unit>"));
}
Value readOne(const std::string& text, PositionTable* positions = nullptr) {
  Reader r(text, makeString("t.purple"), positions);
  Value v;
  REQUIRE(r.read(v));
  return v;
}
std::string readError(const std::string& text) {
  try {
    Reader r(text, makeString("t.purple"), nullptr);
    Value v;
    while (r.read(v)) {
    }
  } catch (const PurpleException& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("reader: data and positions") {
  interp();
  CHECK(show(readOne("(a b . c)")) == "(a b . c)");
  CHECK(show(readOne("#(1 \"s\" #\\a)")) == "#(1 \"s\" #\\a)");
  CHECK(show(readOne("'x")) == "'x");
  CHECK(show(readOne("`(a ,b ,@c)")) == "`(a ,b ,@c)");
  CHECK(show(readOne(":key")) == ":key");
  CHECK(show(readOne("#u8(1 255)")) == "#u8(1 255)");
  CHECK(show(readOne("#;(ignored) kept")) == "kept");
  CHECK(show(readOne("#| nested #| comment |# |# 5")) == "5");
  CHECK(show(readOne("\"a\\x41;b\"")) == "\"aAb\"");
  CHECK(show(readOne("#0=(1 . #0#)")) == "#0=(1 . #0#)");
  PositionTable positions;
  Value form = readOne("\n  (f (g x))", &positions);
  REQUIRE(positions.count(form.obj()));
  CHECK(positions[form.obj()].line == 2);
  CHECK(positions[form.obj()].col == 3);
  Value inner = car(cdr(form));
  CHECK(positions[inner.obj()].col == 6);
}

TEST_CASE("reader: malformed input is a read-error with a position, never a crash") {
  interp();
  CHECK(readError("(1 2").find("t.purple:1:1") != std::string::npos);
  CHECK(readError("\"abc").find("unexpected end of input") != std::string::npos);
  CHECK(readError(")").find("unexpected ')'") != std::string::npos);
  CHECK(readError("#\\nosuchname").find("unknown character name") != std::string::npos);
  CHECK(readError("(1 . )").find("t.purple:1") != std::string::npos);
  CHECK(readError("#[1 (2)]").find("tensor literal") != std::string::npos);
  CHECK(Reader::isComplete("(a (b) c)"));
  CHECK_FALSE(Reader::isComplete("(a (b"));
  CHECK(Reader::isComplete("(a))"));   // an error more text cannot fix counts as complete
}

TEST_CASE("numbers: exact integers never wrap; flonums print shortest") {
  interp();
  CHECK(eval("(expt 2 100)") == "1267650600228229401496703205376");
  CHECK(eval("(* 4611686018427387904 2)") == "9223372036854775808");
  CHECK(eval("(- (expt 2 62) (expt 2 62))") == "0");
  CHECK(eval("(/ 6 4)") == "3/2");
  CHECK(eval("(exact->inexact 1/3)") == "0.3333333333333333");
  CHECK(eval("1e21") == "1.0e+21");
  CHECK(eval("100.0") == "100.0");
  CHECK(eval("(sqrt -4)") == "+2i");
  CHECK(numberToString(*parseNumber("#x-ff")) == "-255");
  CHECK_FALSE(parseNumber("1.2.3").has_value());
}

TEST_CASE("printer: write and display") {
  interp();
  CHECK(toDisplayString(makeString("a\"b")) == "a\"b");
  CHECK(toWriteString(makeString("a\"b\n")) == "\"a\\\"b\\n\"");
  CHECK(toWriteString(Value::character(' ')) == "#\\space");
  CHECK(toWriteString(intern("two words")) == "|two words|");
  CHECK(eval("(let ((x (list 1 2))) (set-cdr! (cdr x) x) x)") == "#0=(1 2 . #0#)");
  CHECK(eval("#[[1 2] [3 4]]").find("#[[1 2]") == 0);
}

TEST_CASE("evaluator: tail calls, closures, keywords, macros, errors") {
  interp();
  // (deep 10000) needs more than the main thread's 8 MB under AddressSanitizer
  purple_test::onBigStack([] {
    CHECK(eval("(let loop ((i 0)) (if (= i 1000000) i (loop (+ i 1))))") == "1000000");
    CHECK(eval("(define (make-counter) (let ((n 0)) (lambda () (set! n (+ n 1)) n)))"
               "(define c (make-counter)) (c) (c)") == "2");
    CHECK(eval("(define (kw x :key (scale 2)) (* x scale)) (list (kw 3) (kw 3 :scale 10))") == "(6 30)");
    CHECK(eval("(define-syntax my-swap (syntax-rules () ((_ a b) (let ((tmp a)) (set! a b) (set! b tmp)))))"
               "(define tmp 1) (define y 2) (my-swap tmp y) (list tmp y)") == "(2 1)");
    CHECK(eval("(guard (e ((error-object? e) (error-object-message e))) (error \"boom\" 1))") == "\"boom\"");
    CHECK(eval("(call/cc (lambda (k) (+ 1 (k 41))))") == "41");
    CHECK(eval("(with-exception-handler (lambda (e) 10) (lambda () (+ 1 (raise-continuable 'c))))") == "11");
    CHECK(eval("(define (deep n) (if (= n 0) 0 (+ 1 (deep (- n 1))))) (deep 10000)") == "10000");
    Interp& in = interp();
    InterpScope scope(&in);
    CHECK_THROWS_AS(in.evalString("(car 1)"), PurpleException);
    try {
      in.evalString("(undefined-name)", "u.purple");
    } catch (const PurpleException& e) {
      CHECK(std::string(e.what()).find("unbound variable: undefined-name") != std::string::npos);
    }
  });
}

TEST_CASE("evaluator: recursion beyond the depth limit is a Purple error") {
  Interp& in = interp();
  InterpScope scope(&in);
  int64_t saved = in.limits.maxDepth;
  in.limits.maxDepth = 5000;
  CHECK_THROWS_WITH_AS(in.evalString("(define (down n) (+ 1 (down (- n 1)))) (down 100000)"),
                       doctest::Contains("recursion too deep"), PurpleException);
  in.limits.maxDepth = saved;
  CHECK(eval("(+ 1 2)") == "3");   // the interpreter is usable afterwards
}

TEST_CASE("GC glue: values held by the interpreter survive collections") {
  Interp& in = interp();
  InterpScope scope(&in);
  in.evalString("(define kept (map (lambda (i) (make-string 10 #\\x)) (iota 1000)))");
  for (int i = 0; i < 5; i++) gcCollectNow();
  CHECK(eval("(length kept)") == "1000");
  CHECK(eval("(string-length (list-ref kept 999))") == "10");
  // A Root keeps a value alive while C++ holds it where the collector cannot see.
  Root root(in.evalString("(list 1 2 3)"));
  for (int i = 0; i < 3; i++) gcCollectNow();
  CHECK(show(root.get()) == "(1 2 3)");
}

// cons and makeFlonum take their objects from a per-thread list (objects.cpp): with threads
// consing at once, collections in between and threads ending, no object may be handed out twice
// nor reclaimed while still on a list, or one list's values would show up in another's.
TEST_CASE("GC glue: pairs and flonums made on several threads at once stay their own") {
  constexpr int kThreads = 4, kRounds = 30, kLength = 5000;
  std::vector<int> bad(kThreads, 0);
  auto work = [&](int id) {
    for (int round = 0; round < kRounds; round++) {
      Value kept = Value::nil();
      for (int i = 0; i < kLength; i++) {
        kept = cons(makeFlonum(id * 1e6 + i + 0.5), kept);
        if (i % 7 == 0) cons(makeFlonum(-1.0), Value::nil());   // garbage between the kept objects
      }
      if (round % 10 == id % 10) gcCollectNow();
      int i = kLength;
      for (Value p = kept; isPair(p); p = cdr(p))
        if (flonumValue(car(p)) != id * 1e6 + --i + 0.5) bad[size_t(id)]++;
      if (i != 0) bad[size_t(id)]++;
    }
  };
  std::vector<std::thread> threads;
  for (int id = 1; id < kThreads; id++)
    threads.emplace_back([&work, id] {
      gcRegisterCurrentThread();
      work(id);
      gcUnregisterCurrentThread();
    });
  work(0);
  for (auto& t : threads) t.join();
  for (int id = 0; id < kThreads; id++) CHECK(bad[size_t(id)] == 0);
}

TEST_CASE("GC glue: dead tensors are finalized and their bytes uncounted") {
  Interp& in = interp();
  InterpScope scope(&in);
  gcCollectNow();
  int64_t before = tensorMemoryStats().liveTensors;
  in.evalString("(let loop ((i 0)) (when (< i 200) (tensor-ones 1000) (loop (+ i 1))))");
  for (int i = 0; i < 3; i++) gcCollectNow();
  CHECK(tensorMemoryStats().liveTensors <= before + 5);   // conservative scanning may keep a few
  Value t = in.evalString("(tensor-ones 10)");
  releaseTensor(t);
  CHECK_FALSE(tensorOf(t).defined());
  CHECK_THROWS_WITH_AS(in.apply(in.lookupGlobal("tensor-sum"), {t}), doctest::Contains("freed"), PurpleException);
}

TEST_CASE("several interpreters in one process have their own globals") {
  Interp a, b;
  {
    InterpScope s(&a);
    a.evalString("(define only-in-a 1)");
  }
  InterpScope s(&b);
  CHECK(b.lookupGlobal("only-in-a").isUnbound());
  CHECK_FALSE(a.lookupGlobal("only-in-a").isUnbound());
}
