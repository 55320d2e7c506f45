// Ports: textual and binary, string/bytevector-backed, file-backed, or a host callback (so an
// embedding host can capture Purple's output). Input ports hold their text in memory: files
// are read whole on open, the console line by line.
#pragma once
#include "interp/core/file_io.hpp"
#include "interp/core/value.hpp"
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

namespace purple {

struct PortImpl {
  bool input = false;
  bool output = false;
  bool binary = false;
  bool open = true;
  // output
  std::string buffer;                               // string ports: everything written
  FILE* file = nullptr;                             // file or console
  bool ownsFile = false;
  std::function<void(std::string_view)> sink;       // host callback, when set
  std::unique_ptr<AtomicFile> atomic;               // file output: committed on close
  // input
  std::string data;
  size_t pos = 0;
  bool console = false;                             // read more lines from `file` on demand
                                                    // (the process's stdin: Limits::allowProcess)
  int column = 0;                                   // of output, for fresh-line
  int64_t chargedBytes = 0;                         // buffer and data capacity charged (gcChargeExternal)
};

struct Port : Object {
  PortImpl* impl;
};

Value makePort(PortImpl* impl);                     // the GC closes and frees impl
inline PortImpl* portImpl(Value v) { return v.as<Port>()->impl; }
inline bool isPort(Value v) { return v.is(Kind::Port); }

void portWrite(Value port, std::string_view text);
void portFlush(Value port);
void portClose(Value port);                         // output files: flush, fsync, rename
bool portFill(PortImpl* p, size_t exactBytes = 0);  // console input: one more line, or exactly EXACTBYTES bytes
Value makeStringInputPort(std::string_view text);
Value makeStringOutputPort();
Value makeConsoleOutputPort(FILE* f);
Value makeConsoleInputPort(FILE* f);
Value makeCallbackOutputPort(std::function<void(std::string_view)> sink);

}  // namespace purple
