// How a finished batch crosses from a data-loader worker process to the loader's process
// (builtins/data/worker_processes.cpp runs the processes).
//
// The worker turns the batch (any mix of tensors, numbers, strings, symbols, keywords,
// characters, booleans, lists and vectors, as collate functions return) into two parts:
//   * a payload: a small tagged byte string describing the batch's shape, in which every tensor
//     is a placeholder naming an entry of a tensor table (dtype, sizes, byte offset);
//   * a shared-memory file (memfd) holding the bytes of all its tensors, one after the other.
// The payload travels through the worker's socket, the memfd beside it (SCM_RIGHTS). The parent
// maps the memfd once and wraps each tensor around its part of the mapping with from_blob: no
// copy on the parent's side; the mapping goes when the batch's last tensor is freed.
#pragma once
#include "interp/core/value.hpp"
#include <string>
#include <string_view>

namespace purple {
namespace dataload {

// The worker's half. Fills PAYLOAD and returns the memfd holding the tensors' bytes (the caller
// sends and closes it), or -1 when the batch has no tensor bytes. Throws std::runtime_error for
// a value that cannot travel (a procedure, a record, a circular list ...).
int encodeBatch(Value batch, std::string& payload);

// The parent's half: the batch described by PAYLOAD, its tensors mapped from MEMFD (closed here,
// also on error; -1 when there is none). Throws std::runtime_error on a malformed payload.
Value decodeBatch(std::string_view payload, int memfd);

}  // namespace dataload
}  // namespace purple
