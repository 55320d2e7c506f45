// The C interface (include/purple/purple.h): a thin layer over purple::Interpreter that keeps
// the last error as a string, for hosts without C++ or LibTorch headers.
#include "purple/purple.hpp"

#include <ATen/dlpack.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

struct purple_interpreter {
  std::unique_ptr<purple::Interpreter> interp;
  std::string lastError;
  int exitCode = 0;
};

namespace {

template <class F> int guardedC(purple_interpreter* p, F f) {
  if (!p) return 1;
  p->lastError.clear();
  try {
    f();
    return 0;
  } catch (const purple::Exit& e) {
    p->exitCode = e.code();
    p->lastError = e.what();
    return 2;
  } catch (const purple::Error& e) {
    p->lastError = e.report();
  } catch (const std::exception& e) {
    p->lastError = e.what();
  } catch (...) {
    p->lastError = "unknown C++ exception";
  }
  return 1;
}

char* copyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

purple::Limits limitsFrom(const purple_options* o) {
  purple::Limits l;
  if (!o) return l;
  l.allowFiles = o->allow_files != 0;
  l.allowProcess = o->allow_process != 0;
  l.allowEnvironment = o->allow_environment != 0;
  l.maxSteps = o->max_steps;
  l.maxSeconds = o->max_seconds;
  l.maxTensorBytes = o->max_tensor_bytes;
  return l;
}

}  // namespace

extern "C" {

void purple_options_init(purple_options* o) {
  if (!o) return;
  o->allow_files = o->allow_process = o->allow_environment = 1;
  o->max_steps = 0;
  o->max_seconds = 0;
  o->max_tensor_bytes = 0;
}

void purple_options_sandbox(purple_options* o) {
  purple_options_init(o);
  if (o) o->allow_files = o->allow_process = o->allow_environment = 0;
}

purple_interpreter* purple_new(const purple_options* options) {
  try {
    auto p = std::make_unique<purple_interpreter>();
    purple::Options opts;
    opts.limits = limitsFrom(options);
    p->interp = std::make_unique<purple::Interpreter>(opts);
    return p.release();
  } catch (...) {
    return nullptr;
  }
}

void purple_free(purple_interpreter* p) {
  try {
    delete p;
  } catch (...) {
  }
}

int purple_eval(purple_interpreter* p, const char* code, char** result) {
  if (result) *result = nullptr;
  return guardedC(p, [&] {
    purple::Value v = p->interp->eval(code ? code : "", "<purple_eval>");
    if (result) *result = copyString(v.repr());
  });
}

const char* purple_last_error(const purple_interpreter* p) { return p ? p->lastError.c_str() : ""; }

int purple_exit_code(const purple_interpreter* p) { return p ? p->exitCode : 0; }

void purple_string_free(char* s) { std::free(s); }

int purple_set_tensor(purple_interpreter* p, const char* name, DLManagedTensor* tensor) {
  if (!p || !name) {
    if (tensor && tensor->deleter) tensor->deleter(tensor);
    return 1;
  }
  return guardedC(p, [&] { p->interp->setValue(name, purple::Value::fromDLPack(tensor)); });
}

DLManagedTensor* purple_get_tensor(purple_interpreter* p, const char* name) {
  DLManagedTensor* out = nullptr;
  if (!name) return nullptr;
  int rc = guardedC(p, [&] {
    purple::Value v = p->interp->get(name);
    if (!v.isTensor()) throw purple::Error("type-error", std::string(name) + " is not bound to a tensor");
    out = v.toDLPack();
  });
  return rc == 0 ? out : nullptr;
}

void purple_interrupt(purple_interpreter* p) {
  if (p) p->interp->interrupt();
}

}  // extern "C"
