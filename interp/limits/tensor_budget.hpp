// Per-interpreter tensor budgets (Limits::maxTensorBytes): an interpreter with a budget gets an
// account of the tensor storage it made and has not yet freed, so that one interpreter's
// tensors never count against another's cap. A tensor cell names its account by number (in its
// `extra` field); the account lives until the interpreter and every cell charged to it are gone,
// so a tensor handed to the host and freed later, on any thread, is still uncharged correctly.
#pragma once
#include <cstdint>

namespace purple {

class Interp;

// The account of IN, opened on first use (0 when all accounts are taken: then the interpreter
// is held to its cap by the process-wide count, as before accounts existed).
uint32_t openTensorAccount(Interp& in);
// Called when IN is destroyed.
void closeTensorAccount(Interp& in);

}  // namespace purple
