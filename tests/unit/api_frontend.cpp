// The embedding API's services for front ends (the REPL and the Jupyter kernel use only these):
// form-by-form evaluation, input checks, completion, documentation, interrupts, output capture,
// the big stack.
#include <purple/purple.hpp>

#include <ATen/ATen.h>

#include "tests/unit/doctest_after_torch.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {
bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}
}  // namespace

TEST_CASE("frontend: evalForms gives each form's values and where it was, form by form") {
  std::string out;
  purple::Options o;
  o.onOutput = [&](std::string_view s) { out += s; };
  purple::Interpreter interp(o);
  std::vector<std::string> seen;
  std::vector<purple::FormSource> where;
  std::string code = "(define x 2)\n  (display \"hi\") (* x 21)\n(values 1 \"two\")";
  interp.evalForms(code, "<cell>", [&](const std::vector<purple::Value>& results,
                                                           const purple::FormSource& w) {
    std::string s = out + "|";   // output so far: forms run one by one, in order
    for (const auto& v : results) s += v.repr() + ";";
    seen.push_back(s);
    where.push_back(w);
  });
  REQUIRE(seen.size() == 4);
  CHECK(seen[0] == "|");                 // define: no value
  CHECK(seen[1] == "hi|");               // display ran before the next form was read
  CHECK(seen[2] == "hi|42;");
  CHECK(seen[3] == "hi|1;\"two\";");      // (values ...) gives each value
  CHECK(where[1].line == 2);
  CHECK(where[1].column == 3);
  CHECK(code.substr(where[2].begin, where[2].end - where[2].begin) == "(* x 21)");
  CHECK(where[3].line == 3);
}

TEST_CASE("frontend: evalForms stops at the first error, with positions from firstLine") {
  purple::Interpreter interp;
  int calls = 0;
  try {
    interp.evalForms("(define y 1)\n(car y)\n(define z 3)", "In[4]",
                     [&](const std::vector<purple::Value>&, const purple::FormSource&) { calls++; }, 10);
    FAIL("no error");
  } catch (const purple::Error& e) {
    CHECK(e.kind() == "type-error");
    REQUIRE(!e.backtrace().empty());
    CHECK(e.backtrace()[0].find("In[4]:11:1") != std::string::npos);
  }
  CHECK(calls == 1);
  CHECK_FALSE(interp.has("z"));
  // a read error is an error too, and it comes before anything runs: the input is read whole
  // first, as IPython parses a cell
  try {
    interp.evalForms("(define w 1) (car", "<cell>");
    FAIL("no error");
  } catch (const purple::Error& e) {
    CHECK(e.kind() == "read-error");
  }
  CHECK_FALSE(interp.has("w"));
}

TEST_CASE("frontend: checkInput tells complete, incomplete and invalid input apart") {
  using S = purple::InputStatus;
  CHECK(purple::Interpreter::checkInput("(+ 1 2)").status == S::complete);
  CHECK(purple::Interpreter::checkInput("").status == S::complete);
  CHECK(purple::Interpreter::checkInput("  ; only a comment\n").status == S::complete);
  auto open = purple::Interpreter::checkInput("(define (f x)\n  (let ((y 1))");
  CHECK(open.status == S::incomplete);
  CHECK(open.openLists == 2);
  CHECK(purple::Interpreter::checkInput("\"a string that goes on").status == S::incomplete);
  CHECK(purple::Interpreter::checkInput("#| a comment").status == S::incomplete);
  CHECK(purple::Interpreter::checkInput("(display \"(\")").status == S::complete);
  CHECK(purple::Interpreter::checkInput("(list #\\( ").openLists == 1);
  CHECK(purple::Interpreter::checkInput(")").status == S::invalid);
  CHECK(purple::Interpreter::checkInput("(1 . )").status == S::invalid);
}

TEST_CASE("frontend: completion and the identifier at a cursor") {
  purple::Interpreter interp;
  interp.eval("(define my-special-value 1) (define (my-special-fn) 2)");
  auto c = interp.complete("(+ 1 (my-spec", 13);
  CHECK(c.begin == 6);
  CHECK(c.end == 13);
  CHECK(c.matches == std::vector<std::string>{"my-special-fn", "my-special-value"});
  auto t = interp.complete("(tensor-matm", 12);
  CHECK(contains(t.matches, "tensor-matmul"));
  auto s = interp.complete("(lamb", 5);
  CHECK(contains(s.matches, "lambda"));             // special forms too
  CHECK(interp.complete("(", 1).matches.empty());
  CHECK_FALSE(contains(interp.complete("%glob", 5).matches, "car"));
  CHECK(purple::Interpreter::identifierAt("(tensor-matmul a b)", 5) == "tensor-matmul");
  CHECK(purple::Interpreter::identifierAt("(car x)", 4) == "car");
  CHECK(purple::Interpreter::identifierAt("(car x)", 0) == "");
}

TEST_CASE("frontend: documentation is the text help prints") {
  purple::Interpreter interp;
  auto doc = interp.documentation("tensor-matmul");
  REQUIRE(doc);
  CHECK(doc->find("(tensor-matmul") == 0);
  CHECK(doc->find("matrix product") != std::string::npos);
  interp.eval("(define (halve x) \"X divided by two.\" (/ x 2))");
  REQUIRE(interp.documentation("halve"));
  CHECK(interp.documentation("halve")->find("X divided by two.") != std::string::npos);
  CHECK(interp.documentation("lambda"));
  CHECK_FALSE(interp.documentation("no-such-name-anywhere"));
}

TEST_CASE("frontend: output capture per request, nested, restored afterwards") {
  std::string base;
  purple::Options o;
  o.onOutput = [&](std::string_view s) { base += s; };
  purple::Interpreter interp(o);
  std::string a, aerr, b;
  {
    purple::Interpreter::OutputCapture first(interp, [&](std::string_view s) { a += s; },
                                             [&](std::string_view s) { aerr += s; });
    interp.eval("(display \"one\") (display \"oops\" (current-error-port))");
    {
      purple::Interpreter::OutputCapture second(interp, [&](std::string_view s) { b += s; }, nullptr);
      interp.eval("(display \"two\") (display \"err\" (current-error-port))");
    }
    interp.eval("(display \"three\")");
  }
  interp.eval("(display \"four\")");
  CHECK(a == "onethree");
  CHECK(aerr == "oopserr");   // the inner capture left the error port alone
  CHECK(b == "two");
  CHECK(base == "four");
}

TEST_CASE("frontend: a cancelled interrupt does not stop the next evaluation") {
  purple::Interpreter interp;
  interp.interrupt();
  interp.cancelInterrupt();
  CHECK(interp.eval("(let loop ((i 0)) (if (< i 100000) (loop (+ i 1)) i))").to<int>() == 100000);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    interp.interrupt();
  });
  try {
    interp.evalForms("(let loop () (loop))", "<cell>");
    FAIL("not interrupted");
  } catch (const purple::Error& e) {
    CHECK(e.kind() == "interrupt");
  }
  t.join();
  CHECK(interp.eval("(+ 1 1)").to<int>() == 2);
}

TEST_CASE("frontend: runOnLargeStack gives deep recursion room and comes back") {
  int depth = purple::runOnLargeStack([] {
    purple::Interpreter interp;
    return interp.eval("(define (f n) (if (= n 0) 0 (+ 1 (f (- n 1))))) (f 200000)").to<int>();
  });
  CHECK(depth == 200000);
  // back on the thread's own stack, the collector and interpreters still work
  purple::Interpreter interp;
  CHECK(interp.eval("(length (make-list 1000 0))").to<int>() == 1000);
  CHECK_THROWS_AS(purple::runOnLargeStack([]() -> int { throw std::runtime_error("out"); }), std::runtime_error);
  CHECK(purple::collectGarbage().liveTensors >= 0);
  CHECK(purple::versionLine().find("Purple ") == 0);
}
