// Tensor scopes: `(with-tensor-scope body ...)` frees every tensor made inside it, except the
// ones reachable from its result, when the body ends (normally or by an error).
#pragma once
#include "interp/core/value.hpp"

namespace purple {

bool tensorScopeOpen();                // on this thread
void noteTensorCreated(Value tensor);   // records the cell in the innermost open scope, if any
void openTensorScope();
void closeTensorScope(Value keep);      // releases the scope's tensors not reachable from keep

}  // namespace purple
