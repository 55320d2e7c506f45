// Ports and I/O: console, string, bytevector and file ports; read, write, display; loading.
// File output is atomic: text goes to a temporary file that is renamed over the target when
// the port is closed, so a crash never leaves a half-written file.
#include "builtins/builtins.hpp"
#include "interp/core/port.hpp"
#include "interp/core/interp_state.hpp"
#include "interp/language/printer.hpp"
#include "interp/language/reader.hpp"
#include "interp/core/gc.hpp"
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include "interp/limits/sandbox.hpp"

namespace purple {

// ---- port objects ------------------------------------------------------------------------------

// A port's buffers are malloc'ed, outside the collected heap: each port charges their capacity
// to the collector (gc.hpp), so that dropped ports are collected. Without it a loop that read
// 50 strings of 100 MB through input ports, or wrote them to output ports, held 5 GB.
static int64_t bufferBytes(const PortImpl* p) { return int64_t(p->buffer.capacity() + p->data.capacity()); }

// Charges what the buffers hold now (after they changed).
static void settleCharge(PortImpl* p) {
  int64_t now = bufferBytes(p);
  if (now == p->chargedBytes) return;
  if (now < p->chargedBytes) gcUnchargeExternal(p->chargedBytes - now);
  else gcChargeExternal("port", now - p->chargedBytes);   // the memory is taken already: count it
  p->chargedBytes = now;
}

// Charges, before `s` grows to hold `size` bytes, the capacity it will then have (libstdc++
// at least doubles), so a growth past the heap limit is refused before it is made.
static void chargeGrowth(PortImpl* p, const std::string& s, size_t size, const char* who) {
  if (size <= s.capacity()) return;
  size_t grown = std::max(size, 2 * s.capacity());
  gcChargeExternal(who, int64_t(grown - s.capacity()));
  p->chargedBytes += int64_t(grown - s.capacity());
}

static void finalizePort(void* obj, void*) {
  auto* p = static_cast<Port*>(obj);
  if (!p->impl) return;
  PortImpl* impl = p->impl;
  if (impl->chargedBytes) gcUnchargeExternal(impl->chargedBytes);
  if (impl->file && impl->ownsFile) std::fclose(impl->file);
  delete impl;   // an output file never closed is discarded (AtomicFile removes its temporary)
  p->impl = nullptr;
}

Value makePort(PortImpl* impl) {
  auto* p = allocObject<Port>(Kind::Port);
  p->impl = impl;
  gcRegisterFinalizer(p, finalizePort, nullptr);
  return Value(p);
}

Value makeStringInputPort(std::string_view text) {
  gcChargeExternal("input port", int64_t(text.size()));   // refused before the copy
  auto* impl = new PortImpl();
  impl->chargedBytes = int64_t(text.size());
  impl->input = true;
  impl->data = std::string(text);
  Value port = makePort(impl);
  settleCharge(impl);
  return port;
}

Value makeStringOutputPort() {
  auto* impl = new PortImpl();
  impl->output = true;
  return makePort(impl);
}

Value makeConsoleOutputPort(FILE* f) {
  auto* impl = new PortImpl();
  impl->output = true;
  impl->file = f;
  return makePort(impl);
}

Value makeConsoleInputPort(FILE* f) {
  auto* impl = new PortImpl();
  impl->input = true;
  impl->file = f;
  impl->console = true;
  return makePort(impl);
}

Value makeCallbackOutputPort(std::function<void(std::string_view)> sink) {
  auto* impl = new PortImpl();
  impl->output = true;
  impl->sink = std::move(sink);
  return makePort(impl);
}

void portWrite(Value port, std::string_view text) {
  PortImpl* p = portImpl(port);
  if (!p->output) throwError("error", "write to an input port");
  if (!p->open) throwError("error", "write to a closed port");
  if (text.empty()) return;
  size_t nl = text.rfind('\n');
  p->column = nl == std::string_view::npos ? p->column + int(text.size()) : int(text.size() - nl - 1);
  if (p->sink) p->sink(text);
  else if (p->file) {
    if (std::fwrite(text.data(), 1, text.size(), p->file) != text.size())
      throwError("file-error", std::string("write failed: ") + std::strerror(errno));
  } else {
    checkResultBytes("string port", p->buffer.size() + text.size());
    chargeGrowth(p, p->buffer, p->buffer.size() + text.size(), "string port");
    p->buffer.append(text);
    settleCharge(p);
  }
}

void portFlush(Value port) {
  PortImpl* p = portImpl(port);
  if (p->file && p->output) std::fflush(p->file);
  else if (p->sink && p->output) p->sink(std::string_view());   // a host callback: flush
}

void portClose(Value port) {
  PortImpl* p = portImpl(port);
  if (!p->open) return;
  p->open = false;
  if (p->atomic) {
    p->file = nullptr;
    std::unique_ptr<AtomicFile> f = std::move(p->atomic);
    f->commit();
  } else if (p->file && p->ownsFile) {
    bool ok = std::fflush(p->file) == 0;
    if (ok && p->output) ok = fsync(fileno(p->file)) == 0;
    ok = std::fclose(p->file) == 0 && ok;
    p->file = nullptr;
    if (!ok) throwError("file-error", std::string("could not write a file: ") + std::strerror(errno));
  }
}

bool portFill(PortImpl* p, size_t exactBytes) {
  if (!p->console || !p->file) return false;
  // The process's standard input belongs to the host, not to a sandboxed script: a host gives
  // such a script input with Options::input (a string port) instead.
  Interp* in = Interp::current();
  if (in && !in->limits.allowProcess)
    throwError("error", "reading the process's standard input is disabled in this interpreter");
  std::string more;
  if (exactBytes > 0) {
    more.resize(exactBytes);
    more.resize(std::fread(more.data(), 1, exactBytes, p->file));
    if (more.empty()) return false;
  } else {
    char buf[4096];
    if (!std::fgets(buf, sizeof buf, p->file)) return false;
    more = buf;
  }
  p->data.erase(0, p->pos);
  p->pos = 0;
  p->data += more;
  settleCharge(p);
  return true;
}

namespace {

Value outPort(Interp& in, Value port, const char* who) {
  if (port.isMissing()) return in.currentOutputPort();
  if (!isPort(port) || !portImpl(port)->output) throwTypeError(who, 2, "an output port", port);
  return port;
}
Value inPort(Interp& in, Value port, const char* who, int index = 1) {
  if (port.isMissing()) return in.currentInputPort();
  if (!isPort(port) || !portImpl(port)->input) throwTypeError(who, index, "an input port", port);
  return port;
}

// Makes sure at least `n` bytes are buffered if the port can supply them.
bool ensure(PortImpl* p, size_t n) {
  while (p->data.size() - p->pos < n)
    if (!portFill(p)) return false;
  return true;
}

// For binary reads: console input is filled a line at a time, which would wait for a newline
// that framed binary input (a language server's Content-Length body) never sends. Reads exactly
// the bytes missing instead (fewer at the end of input).
bool ensureBytes(PortImpl* p, size_t n) {
  size_t have = p->data.size() - p->pos;
  if (have >= n || !p->console || !p->file) return ensure(p, n);
  if (!portFill(p, n - have)) return false;
  return p->data.size() - p->pos >= n;
}

Value readChar(Value port, bool peek) {
  PortImpl* p = portImpl(port);
  if (!p->open) throwError("error", "read from a closed port");
  if (!ensure(p, 1)) return Value::eof();
  const char* s = p->data.data() + p->pos;
  const char* end = p->data.data() + p->data.size();
  unsigned char c0 = static_cast<unsigned char>(*s);
  size_t need = c0 < 0x80 ? 1 : c0 >= 0xF0 ? 4 : c0 >= 0xE0 ? 3 : 2;
  ensure(p, need);
  s = p->data.data() + p->pos;
  end = p->data.data() + p->data.size();
  const char* q = s;
  uint32_t cp = decodeUtf8(q, end);
  if (!peek) p->pos += size_t(q - s);
  return Value::character(cp);
}

Value readLine(Value port) {
  PortImpl* p = portImpl(port);
  if (!p->open) throwError("error", "read from a closed port");
  if (!ensure(p, 1)) return Value::eof();
  while (true) {
    size_t nl = p->data.find('\n', p->pos);
    if (nl != std::string::npos) {
      std::string line = p->data.substr(p->pos, nl - p->pos);
      p->pos = nl + 1;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return makeString(line);
    }
    if (!portFill(p)) {
      std::string line = p->data.substr(p->pos);
      p->pos = p->data.size();
      return makeString(line);
    }
  }
}

Value readDatum(Interp&, Value port) {
  PortImpl* p = portImpl(port);
  while (true) {
    std::string_view rest(p->data.data() + p->pos, p->data.size() - p->pos);
    if (p->console && !Reader::isComplete(rest)) {
      if (portFill(p)) continue;
    }
    Reader r(rest, makeString("<port>"), nullptr);
    Value v;
    if (!r.read(v)) {
      if (p->console && portFill(p)) continue;
      p->pos = p->data.size();
      return Value::eof();
    }
    p->pos += r.offset();
    return v;
  }
}

std::string checkedPath(Interp& in, const std::string& path, const char* who) {
  if (!in.limits.allowFiles) throwError("file-error", std::string(who) + ": file access is disabled in this interpreter");
  return path;
}

Value openInputFile(Interp& in, const std::string& path, bool binary) {
  checkedPath(in, path, "open-input-file");
  std::string text = readWholeFile(path, "open-input-file");
  auto* impl = new PortImpl();
  impl->input = true;
  impl->binary = binary;
  impl->data = std::move(text);
  Value port = makePort(impl);   // the finalizer frees the text if the charge is refused
  settleCharge(impl);
  return port;
}

Value openOutputFile(Interp& in, const std::string& path, bool binary, bool append) {
  checkedPath(in, path, "open-output-file");
  auto impl = std::make_unique<PortImpl>();
  impl->output = true;
  impl->binary = binary;
  if (append) {
    struct stat sb;
    if (stat(path.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode))
      throwError("file-error", "cannot open " + path + " for writing: it is a directory");
    impl->file = std::fopen(path.c_str(), "ab");
    if (!impl->file) throwError("file-error", "cannot open " + path + " for writing: " + std::strerror(errno));
    impl->ownsFile = true;
  } else {
    impl->atomic = std::make_unique<AtomicFile>(path, "open-output-file");
    impl->file = impl->atomic->stream();
  }
  return makePort(impl.release());
}

// Runs thunk with the current output port (or input port) rebound.
Value withPort(Interp& in, Value& slot, Value port, Value thunk) {
  Value param = slot;
  Value old = param.as<Parameter>()->value;
  param.as<Parameter>()->value = port;
  try {
    Value r = in.apply(thunk, nullptr, 0);
    param.as<Parameter>()->value = old;
    return r;
  } catch (...) {
    param.as<Parameter>()->value = old;
    throw;
  }
}

Value makePortParameter(Value port) {
  auto* p = allocObject<Parameter>(Kind::Parameter);
  p->value = port;
  p->converter = Value::f();
  return Value(p);
}

}  // namespace

void registerPorts(Registry& r) {
  Interp& interp = r.interp();
  // current ports are parameters, so parameterize works on them
  interp.st->outputPort = makePortParameter(interp.st->outputPort);
  interp.st->errorPort = makePortParameter(interp.st->errorPort);
  interp.st->inputPort = makePortParameter(interp.st->inputPort);
  interp.defineGlobal("current-output-port", interp.st->outputPort, makeString("Parameter: the port display and write use by default."));
  interp.defineGlobal("current-error-port", interp.st->errorPort, makeString("Parameter: the port for error messages."));
  interp.defineGlobal("current-input-port", interp.st->inputPort, makeString("Parameter: the port read uses by default."));
  // Their converters: set to anything but a port of the right direction (by parameterize or by
  // a call with a value), the next display or read would use it as one.
  r.def("%as-output-port", "(port)", [](Value port) {
    if (!isPort(port) || !portImpl(port)->output) throwTypeError("current-output-port", 1, "an output port", port);
    return port;
  }, "Internal: PORT when it is an output port, else a type error (the current output ports' converter).");
  r.def("%as-input-port", "(port)", [](Value port) {
    if (!isPort(port) || !portImpl(port)->input) throwTypeError("current-input-port", 1, "an input port", port);
    return port;
  }, "Internal: PORT when it is an input port, else a type error (the current input port's converter).");
  interp.st->outputPort.as<Parameter>()->converter = interp.lookupGlobal("%as-output-port");
  interp.st->errorPort.as<Parameter>()->converter = interp.lookupGlobal("%as-output-port");
  interp.st->inputPort.as<Parameter>()->converter = interp.lookupGlobal("%as-input-port");

  r.def("display", "(obj :optional port)", [](Interp& in, Value v, Value port) {
    portWrite(outPort(in, port, "display"), toDisplayString(v));
  }, "Writes OBJ for people: strings without quotes, characters as themselves.", kPrimBorrowsArgs);
  sandboxAllowed(r, "display", "ports: the current output port",
               "writes to a port it is given, or to the current output port: the host's output stream (Options::out, onOutput), which the host chose. A sandboxed script cannot open a file port; one opened before the limits were set (Interpreter::setLimits) stays usable, since the host or code it trusted opened it");
  r.def("write", "(obj :optional port)", [](Interp& in, Value v, Value port) {
    portWrite(outPort(in, port, "write"), toWriteString(v));
  }, "Writes OBJ so that read can read it back (cycles are labelled).", kPrimBorrowsArgs);
  sandboxAllowed(r, "write", "ports: the current output port",
               "as display");
  r.def("write-shared", "(obj :optional port)", [](Interp& in, Value v, Value port) {
    std::string text;
    printShared(text, v);
    portWrite(outPort(in, port, "write-shared"), text);
  }, "Writes OBJ like write, labelling every shared pair or vector with #n= / #n#.", kPrimBorrowsArgs);
  r.alias("write-simple", "write");
  r.def("newline", "(:optional port)", [](Interp& in, Value port) { portWrite(outPort(in, port, "newline"), "\n"); },
        "Writes a line break.");
  sandboxAllowed(r, "newline", "ports: the current output port",
               "as display");
  r.def("fresh-line", "(:optional port)", [](Interp& in, Value port) {
    Value p = outPort(in, port, "fresh-line");
    if (portImpl(p)->column != 0) portWrite(p, "\n");
  }, "Writes a line break unless the port is at the start of a line.");
  r.def("write-string", "(string :optional port start end)", [](Interp& in, std::string s, Value port, std::optional<int64_t> start, std::optional<int64_t> end) {
    Value str = makeString(s);
    size_t b = utf8Offset(str.as<String>(), size_t(start.value_or(0)));
    size_t e = end ? utf8Offset(str.as<String>(), size_t(*end)) : s.size();
    if (b > e || e > s.size()) throwError("error", "write-string: bad range");
    portWrite(outPort(in, port, "write-string"), std::string_view(s).substr(b, e - b));
  }, "Writes the characters of STRING (from START to END).");
  sandboxAllowed(r, "write-string", "ports: the current output port",
               "as display");
  r.def("write-char", "(char :optional port)", [](Interp& in, Value c, Value port) {
    if (!c.isChar()) throwTypeError("write-char", 1, "a character", c);
    std::string s;
    appendUtf8(s, c.character());
    portWrite(outPort(in, port, "write-char"), s);
  }, "Writes the character CHAR.");
  sandboxAllowed(r, "write-char", "ports: the current output port",
               "as display");
  r.def("write-u8", "(byte :optional port)", [](Interp& in, int byte, Value port) {
    char c = char(byte);
    portWrite(outPort(in, port, "write-u8"), std::string_view(&c, 1));
  }, "Writes one byte to a binary port.");
  sandboxAllowed(r, "write-u8", "ports: the current output port",
               "as display");
  r.def("write-bytevector", "(bv :optional port start end)", [](Interp& in, Value bv, Value port, std::optional<int64_t> start, std::optional<int64_t> end) {
    if (!bv.is(Kind::Bytevector)) throwTypeError("write-bytevector", 1, "a bytevector", bv);
    auto* b = bv.as<Bytevector>();
    size_t s = size_t(start.value_or(0)), e = size_t(end.value_or(b->extra));
    if (s > e || e > b->extra) throwError("error", "write-bytevector: bad range");
    portWrite(outPort(in, port, "write-bytevector"), std::string_view(reinterpret_cast<char*>(b->bytes) + s, e - s));
  }, "Writes the bytes of BV (from START to END).");
  sandboxAllowed(r, "write-bytevector", "ports: the current output port",
               "as display");
  r.def("flush-output-port", "(:optional port)", [](Interp& in, Value port) { portFlush(outPort(in, port, "flush-output-port")); },
        "Flushes buffered output.");
  sandboxAllowed(r, "flush-output-port", "ports: the current output port",
               "as display");
  r.alias("flush-output", "flush-output-port");

  r.def("read-char", "(:optional port)", [](Interp& in, Value port) { return readChar(inPort(in, port, "read-char"), false); },
        "Reads one character, or returns the eof object.");
  sandboxConditional(r, "read-char", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");
  r.def("peek-char", "(:optional port)", [](Interp& in, Value port) { return readChar(inPort(in, port, "peek-char"), true); },
        "The next character without consuming it, or the eof object.");
  sandboxConditional(r, "peek-char", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");
  r.def("read-line", "(:optional port)", [](Interp& in, Value port) { return readLine(inPort(in, port, "read-line")); },
        "Reads a line (without its line break), or returns the eof object.");
  sandboxConditional(r, "read-line", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");
  r.def("read-string", "(k :optional port)", [](Interp& in, int64_t k, Value port) {
    Value p = inPort(in, port, "read-string", 2);
    std::string out;
    for (int64_t i = 0; i < k; i++) {
      Value c = readChar(p, false);
      if (c.isEof()) break;
      appendUtf8(out, c.character());
    }
    if (out.empty() && k > 0) return Value::eof();
    return makeString(out);
  }, "Reads up to K characters.");
  sandboxConditional(r, "read-string", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");
  r.def("read-u8", "(:optional port)", [](Interp& in, Value port) -> Value {
    PortImpl* p = portImpl(inPort(in, port, "read-u8"));
    if (!ensure(p, 1)) return Value::eof();
    return Value::fixnum(static_cast<unsigned char>(p->data[p->pos++]));
  }, "Reads one byte, or returns the eof object.");
  sandboxConditional(r, "read-u8", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");
  r.def("peek-u8", "(:optional port)", [](Interp& in, Value port) -> Value {
    PortImpl* p = portImpl(inPort(in, port, "peek-u8"));
    if (!ensure(p, 1)) return Value::eof();
    return Value::fixnum(static_cast<unsigned char>(p->data[p->pos]));
  }, "The next byte without consuming it, or the eof object.");
  sandboxConditional(r, "peek-u8", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");
  r.def("read-bytevector", "(k :optional port)", [](Interp& in, int64_t k, Value port) -> Value {
    PortImpl* p = portImpl(inPort(in, port, "read-bytevector", 2));
    ensureBytes(p, size_t(k));
    size_t n = std::min(size_t(k), p->data.size() - p->pos);
    if (n == 0 && k > 0) return Value::eof();
    Value bv = makeBytevector(n);
    std::memcpy(bv.as<Bytevector>()->bytes, p->data.data() + p->pos, n);
    p->pos += n;
    return bv;
  }, "Reads up to K bytes into a new bytevector.");
  sandboxConditional(r, "read-bytevector", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");
  r.def("read-bytevector!", "(bv :optional port start end)", [](Interp& in, Value bv, Value port, std::optional<int64_t> start, std::optional<int64_t> end) -> Value {
    if (!bv.is(Kind::Bytevector)) throwTypeError("read-bytevector!", 1, "a bytevector", bv);
    auto* b = bv.as<Bytevector>();
    size_t s = size_t(start.value_or(0)), e = size_t(end.value_or(b->extra));
    if (s > e || e > b->extra) throwError("error", "read-bytevector!: bad range");
    PortImpl* p = portImpl(inPort(in, port, "read-bytevector!", 2));
    ensureBytes(p, e - s);
    size_t n = std::min(e - s, p->data.size() - p->pos);
    if (n == 0 && e > s) return Value::eof();
    std::memcpy(b->bytes + s, p->data.data() + p->pos, n);
    p->pos += n;
    return Value::fixnum(int64_t(n));
  }, "Reads bytes into BV from START to END; returns how many, or the eof object.");
  sandboxConditional(r, "read-bytevector!", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");
  r.def("char-ready?", "(:optional port)", [](Interp& in, Value port) {
    PortImpl* p = portImpl(inPort(in, port, "char-ready?"));
    return p->pos < p->data.size() || !p->console;
  }, "True if a character can be read without blocking.");
  sandboxAllowed(r, "char-ready?", "ports: the process standard input",
               "looks only at what is already buffered: it never reads the process's standard input");
  r.alias("u8-ready?", "char-ready?");
  r.def("read", "(:optional port)", [](Interp& in, Value port) { return readDatum(in, inPort(in, port, "read")); },
        "Reads one datum, or returns the eof object.");
  sandboxConditional(r, "read", "ports: the process standard input",
                   "refused (error) when the port is the process's standard input; string ports and ports the host gave are allowed");

  r.def("open-input-string", "(string)", [](std::string s) { return makeStringInputPort(s); }, "An input port reading STRING.");
  sandboxAllowed(r, "open-input-string", "nothing: a string port in memory",
               "listed because it is a port; touches nothing outside");
  r.def("open-output-string", "()", []() { return makeStringOutputPort(); }, "An output port collecting text; see get-output-string.");
  sandboxAllowed(r, "open-output-string", "nothing: a string port in memory",
               "listed because it is a port; touches nothing outside");
  r.def("open-input-bytevector", "(bv)", [](Value bv) {
    if (!bv.is(Kind::Bytevector)) throwTypeError("open-input-bytevector", 1, "a bytevector", bv);
    auto* b = bv.as<Bytevector>();
    Value p = makeStringInputPort(std::string_view(reinterpret_cast<char*>(b->bytes), b->extra));
    portImpl(p)->binary = true;
    return p;
  }, "A binary input port reading the bytes of BV.");
  r.def("open-output-bytevector", "()", []() {
    Value p = makeStringOutputPort();
    portImpl(p)->binary = true;
    return p;
  }, "A binary output port collecting bytes; see get-output-bytevector.");
  r.def("get-output-string", "(port)", [](Value p) {
    if (!isPort(p) || !portImpl(p)->output) throwTypeError("get-output-string", 1, "a string output port", p);
    return makeString(portImpl(p)->buffer);
  }, "The text written so far to the string port PORT.");
  r.def("get-output-bytevector", "(port)", [](Value p) {
    if (!isPort(p) || !portImpl(p)->output) throwTypeError("get-output-bytevector", 1, "a bytevector output port", p);
    const std::string& b = portImpl(p)->buffer;
    Value bv = makeBytevector(b.size());
    std::memcpy(bv.as<Bytevector>()->bytes, b.data(), b.size());
    return bv;
  }, "The bytes written so far to PORT.");
  r.def("with-output-to-string", "(thunk)", [](Interp& in, Procedure thunk) {
    Value port = makeStringOutputPort();
    withPort(in, in.st->outputPort, port, thunk.value);
    return makeString(portImpl(port)->buffer);
  }, "Calls THUNK with output going to a string, and returns the string.");
  r.def("call-with-output-string", "(proc)", [](Interp& in, Procedure proc) {
    Value port = makeStringOutputPort();
    in.apply(proc.value, &port, 1);
    return makeString(portImpl(port)->buffer);
  }, "Calls PROC with a string output port and returns what it wrote.");
  r.def("with-input-from-string", "(string thunk)", [](Interp& in, std::string s, Procedure thunk) {
    return withPort(in, in.st->inputPort, makeStringInputPort(s), thunk.value);
  }, "Calls THUNK with input read from STRING.");

  r.def("open-input-file", "(path)", [](Interp& in, std::string path) { return openInputFile(in, path, false); },
        "A textual input port reading the file at PATH.");
  sandbox(r, "open-input-file", Needs::Files, "files: reads PATH");
  r.def("open-binary-input-file", "(path)", [](Interp& in, std::string path) { return openInputFile(in, path, true); },
        "A binary input port reading the file at PATH.");
  sandbox(r, "open-binary-input-file", Needs::Files, "files: reads PATH");
  r.def("open-output-file", "(path :key append)", [](Interp& in, std::string path, bool append) {
    return openOutputFile(in, path, false, append);
  }, "A textual output port writing PATH. The file is replaced atomically when the port is closed.");
  sandbox(r, "open-output-file", Needs::Files, "files: writes PATH");
  r.def("open-binary-output-file", "(path :key append)", [](Interp& in, std::string path, bool append) {
    return openOutputFile(in, path, true, append);
  }, "A binary output port writing PATH, replaced atomically on close.");
  sandbox(r, "open-binary-output-file", Needs::Files, "files: writes PATH");
  r.def("close-port", "(port)", [](Value p) {
    if (!isPort(p)) throwTypeError("close-port", 1, "a port", p);
    portClose(p);
  }, "Closes PORT; an output file is flushed, synced and renamed into place.");
  r.alias("close-input-port", "close-port");
  r.alias("close-output-port", "close-port");
  r.def("call-with-output-file", "(path proc)", [](Interp& in, std::string path, Procedure proc) {
    Value port = openOutputFile(in, path, false, false);
    Value result = in.apply(proc.value, &port, 1);
    portClose(port);
    return result;
  }, "Calls PROC with an output port on PATH; the file appears (atomically) when PROC returns.");
  sandbox(r, "call-with-output-file", Needs::Files, "files: writes PATH");
  r.def("call-with-input-file", "(path proc)", [](Interp& in, std::string path, Procedure proc) {
    Value port = openInputFile(in, path, false);
    Value result = in.apply(proc.value, &port, 1);
    portClose(port);
    return result;
  }, "Calls PROC with an input port reading PATH.");
  sandbox(r, "call-with-input-file", Needs::Files, "files: reads PATH");
  r.def("call-with-port", "(port proc)", [](Interp& in, Value port, Procedure proc) {
    Value result = in.apply(proc.value, &port, 1);
    portClose(port);
    return result;
  }, "Calls PROC with PORT, then closes PORT.");
  r.def("with-output-to-file", "(path thunk)", [](Interp& in, std::string path, Procedure thunk) {
    Value port = openOutputFile(in, path, false, false);
    Value result = withPort(in, in.st->outputPort, port, thunk.value);
    portClose(port);
    return result;
  }, "Calls THUNK with output going to PATH (written atomically).");
  sandbox(r, "with-output-to-file", Needs::Files, "files: writes PATH");
  r.def("with-input-from-file", "(path thunk)", [](Interp& in, std::string path, Procedure thunk) {
    return withPort(in, in.st->inputPort, openInputFile(in, path, false), thunk.value);
  }, "Calls THUNK with input read from PATH.");
  sandbox(r, "with-input-from-file", Needs::Files, "files: reads PATH");
  r.def("file-exists?", "(path)", [](Interp& in, std::string path) {
    checkedPath(in, path, "file-exists?");
    struct stat sb;
    return stat(path.c_str(), &sb) == 0;
  }, "True if a file exists at PATH.");
  sandbox(r, "file-exists?", Needs::Files, "files: probes PATH");
  r.def("delete-file", "(path)", [](Interp& in, std::string path) {
    checkedPath(in, path, "delete-file");
    if (std::remove(path.c_str()) != 0) throwError("file-error", "cannot delete " + path + ": " + std::strerror(errno));
  }, "Deletes the file at PATH.");
  sandbox(r, "delete-file", Needs::Files, "files: deletes PATH");
  r.def("load", "(path :optional env)", [](Interp& in, std::string path, Value) { return in.loadFile(path); },
        "Reads and evaluates every form in the file at PATH.");
  sandbox(r, "load", Needs::Files, "files: reads and runs PATH");

  r.def("eof-object", "()", []() { return Value::eof(); }, "The end-of-file object.");
  r.def("eof-object?", "(obj)", [](Value v) { return v.isEof(); }, "True if OBJ is the end-of-file object.");
  r.def("port?", "(obj)", [](Value v) { return isPort(v); }, "True if OBJ is a port.");
  r.def("input-port?", "(obj)", [](Value v) { return isPort(v) && portImpl(v)->input; }, "True if OBJ is an input port.");
  r.def("output-port?", "(obj)", [](Value v) { return isPort(v) && portImpl(v)->output; }, "True if OBJ is an output port.");
  r.def("textual-port?", "(obj)", [](Value v) { return isPort(v) && !portImpl(v)->binary; }, "True if OBJ is a textual port.");
  r.def("binary-port?", "(obj)", [](Value v) { return isPort(v) && portImpl(v)->binary; }, "True if OBJ is a binary port.");
  r.def("input-port-open?", "(port)", [](Value v) { return isPort(v) && portImpl(v)->input && portImpl(v)->open; }, "True if PORT is an open input port.");
  r.def("output-port-open?", "(port)", [](Value v) { return isPort(v) && portImpl(v)->output && portImpl(v)->open; }, "True if PORT is an open output port.");
}

}  // namespace purple
