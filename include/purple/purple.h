/* Purple's C interface: enough to run code in a (sandboxed) interpreter and to exchange tensors
 * through DLPack, for hosts that cannot include LibTorch's C++ headers (C programs, other
 * languages' FFIs). C++ hosts use <purple/purple.hpp>, which includes this header too.
 *
 * Tensors cross as DLPack's DLManagedTensor (DLPack 0.6, the version LibTorch 1.13 ships as
 * <ATen/dlpack.h>; any copy of dlpack.h declares the same struct). Only a pointer to it appears
 * here, so this header does not need dlpack.h.
 *
 * Thread rules are those of the C++ API: one thread at a time per interpreter; purple_interrupt
 * may be called from any thread. */
#ifndef PURPLE_PURPLE_H
#define PURPLE_PURPLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct DLManagedTensor;
typedef struct purple_interpreter purple_interpreter;

typedef struct purple_options {
  int allow_files;          /* nonzero: scripts may open, load, save and delete files */
  int allow_process;        /* nonzero: exit, emergency-exit, command-line */
  int allow_environment;    /* nonzero: get-environment-variable(s) */
  int64_t max_steps;        /* procedure calls per evaluation; 0: unlimited */
  double max_seconds;       /* wall time per evaluation; 0: unlimited */
  int64_t max_tensor_bytes; /* live tensor storage; 0: unlimited */
} purple_options;

/* Everything allowed, no budgets (the defaults of purple_new(NULL)). */
void purple_options_init(purple_options* options);
/* Files, processes and environment off; budgets still 0 (set them). */
void purple_options_sandbox(purple_options* options);

/* NULL on failure. OPTIONS may be NULL. */
purple_interpreter* purple_new(const purple_options* options);
void purple_free(purple_interpreter* interp);

/* Evaluates every form of CODE. Returns 0 on success, storing the last value's written form in
 * *RESULT when RESULT is not NULL (free it with purple_string_free). Returns 1 on a Purple error
 * (purple_last_error describes it) and, when CODE called (exit N), 2 with N in
 * purple_exit_code. */
int purple_eval(purple_interpreter* interp, const char* code, char** result);
/* The message of the last failed call on INTERP ("" if none); valid until the next call. */
const char* purple_last_error(const purple_interpreter* interp);
int purple_exit_code(const purple_interpreter* interp);
void purple_string_free(char* s);

/* Binds the global NAME to a tensor sharing TENSOR's memory (no copy). Ownership of TENSOR
 * passes to Purple in every case: its deleter runs when Purple no longer uses the memory, or at
 * once when the call fails. Returns 0 on success, 1 on failure. */
int purple_set_tensor(purple_interpreter* interp, const char* name, struct DLManagedTensor* tensor);
/* The tensor bound to the global NAME, sharing its memory (no copy), or NULL when NAME is not
 * bound to a tensor. The caller owns the result and calls result->deleter(result) when done. */
struct DLManagedTensor* purple_get_tensor(purple_interpreter* interp, const char* name);

/* Stops the evaluation running on INTERP (or, when none is, the next one) at its next safe
 * point with an `interrupt` error. Safe from any thread and from signal handlers. */
void purple_interrupt(purple_interpreter* interp);

#ifdef __cplusplus
}
#endif

#endif /* PURPLE_PURPLE_H */
