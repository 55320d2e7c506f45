// write and display. `write` labels cycles with #n= / #n# (R7RS), so printing never hangs.
#include "interp/language/printer.hpp"
#include "interp/language/numbers.hpp"
#include "interp/memory/tensor_hooks.hpp"
#include "interp/core/interp.hpp"
#include "interp/language/node.hpp"
#include "interp/core/gc.hpp"
#include "interp/core/error.hpp"
#include <atomic>
#include <cctype>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace purple {

namespace {

// Printers of Foreign cells, by destroy function; written when an optional library loads.
struct ForeignPrinterEntry {
  void (*destroy)(void*);
  ForeignPrinter printer;
};
ForeignPrinterEntry gForeignPrinters[8];
std::atomic<int> gForeignPrinterCount{0};

ForeignPrinter foreignPrinterFor(void (*destroy)(void*)) {
  int n = gForeignPrinterCount.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (gForeignPrinters[i].destroy == destroy) return gForeignPrinters[i].printer;
  return nullptr;
}

const char* charName(uint32_t c) {
  switch (c) {
    case ' ': return "space";
    case '\n': return "newline";
    case '\t': return "tab";
    case '\r': return "return";
    case 0: return "null";
    case 7: return "alarm";
    case 8: return "backspace";
    case 127: return "delete";
    case 27: return "escape";
    default: return nullptr;
  }
}

bool symbolNeedsBars(std::string_view s) {
  if (s.empty()) return true;
  if (parseNumber(s)) return true;
  if (s == "." || s == "+i" || s == "-i") return true;
  if (s.find('\\') != std::string_view::npos) return true;
  for (unsigned char c : s)
    if (std::isspace(c) || c == '(' || c == ')' || c == '"' || c == ';' || c == '\'' || c == '`' ||
        c == ',' || c == '|' || c == '[' || c == ']' || (c >= 'A' && c <= 'Z' && false))
      return true;
  if (s[0] == '#' || (s[0] == ':' && s.size() > 1)) return true;
  return false;
}

// Object -> small state, open addressing in one array: the cycle search marks every container
// of the value printed, millions for a long list, and a node-based std::unordered_set spent
// more time allocating, and then freeing, its nodes than the search itself (freeing them alone
// took 0.3 s after a time-limit stop in a 6-million-element list).
class ObjectMarks {
 public:
  uint8_t get(const Object* o) const {
    if (slots_.empty()) return 0;
    for (size_t i = slotOf(o);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == o) return slots_[i].mark;
      if (!slots_[i].key) return 0;
    }
  }
  void set(const Object* o, uint8_t mark) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    for (size_t i = slotOf(o);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == o) {
        slots_[i].mark = mark;
        return;
      }
      if (!slots_[i].key) {
        slots_[i] = {o, mark};
        count_++;
        return;
      }
    }
  }

 private:
  struct Slot {
    const Object* key;
    uint8_t mark;
  };
  size_t slotOf(const Object* o) const {
    uint64_t h = reinterpret_cast<uintptr_t>(o) * 0x9e3779b97f4a7c15ULL;
    return size_t(h >> 20) & (slots_.size() - 1);
  }
  void grow() {
    std::vector<Slot> old(slots_.empty() ? 64 : slots_.size() * 2, Slot{nullptr, 0});
    old.swap(slots_);
    count_ = 0;
    for (const Slot& s : old)
      if (s.key) set(s.key, s.mark);
  }
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

struct Printer {
  std::string& out;
  bool write;
  std::unordered_map<const Object*, int> labels;   // objects that close a cycle -> label
  std::unordered_set<const Object*> printed;
  int nextLabel = 0;
  size_t limit = SIZE_MAX;   // stop once `out` is this long (toWriteStringBounded)
  // Values visited so far. Printing shared structure that is not cyclic (a list holding the same
  // sublist twice, nested forty deep) unfolds it, so output can grow without bound from a small
  // heap: every walk polls the running interpreter, so a time budget or Ctrl-C stops it.
  uint64_t visited = 0;

  bool full() const { return out.size() >= limit; }

  // A record whose type has a printer (set-record-type-printer!) shows as the string it gives.
  // Printing happens in error reports too, so a printer that fails, or one met with no
  // interpreter on this thread or nested too deeply, leaves the record to the default form.
  bool printCustom(Value record, Value printer) {
    static thread_local int nesting = 0;
    Interp* in = Interp::current();
    if (printer.isFalse() || !in || nesting >= 8) return false;
    struct Nest {
      Nest() { nesting++; }
      ~Nest() { nesting--; }
    } nest;
    try {
      Value text = in->apply(printer, &record, 1);
      if (!isString(text)) return false;
      out += stringView(text);
      return true;
    } catch (const PurpleInterrupt&) {
      throw;
    } catch (const PurpleException&) {
      return false;
    }
  }

  // Objects whose printed form includes other values: cycles may run through any of them.
  static bool isContainer(Value v) {
    if (!v.isObject()) return false;
    switch (v.obj()->kind) {
      case Kind::Pair: case Kind::Vector: case Kind::Record: case Kind::ErrorObject: case Kind::MultipleValues:
        return true;
      default:
        return false;
    }
  }
  // Pushes the values a container prints, last first (so they pop in print order).
  template <class Push> static void pushChildren(Value v, Push push) {
    switch (v.obj()->kind) {
      case Kind::Pair:
        push(cdr(v));
        push(car(v));
        return;
      case Kind::Vector: {
        auto* vec = v.as<Vector>();
        for (uint32_t i = vec->extra; i-- > 0;) push(vec->items[i]);
        return;
      }
      case Kind::Record: {
        auto* r = v.as<Record>();
        for (uint32_t i = r->extra; i-- > 0;) push(r->fields[i]);
        return;
      }
      case Kind::MultipleValues: {
        auto* m = v.as<MultipleValues>();
        for (uint32_t i = m->extra; i-- > 0;) push(m->items[i]);
        return;
      }
      case Kind::ErrorObject:
        push(v.as<ErrorObject>()->irritants);
        push(v.as<ErrorObject>()->message);
        return;
      default:
        return;
    }
  }

  // The column `out` has reached on its last line.
  size_t columnAt(size_t pos) const {
    size_t nl = pos == 0 ? std::string::npos : out.rfind('\n', pos - 1);
    return nl == std::string::npos ? pos : pos - nl - 1;
  }

  // Elements of a list, vector or record that print over several lines (tensors do) are put
  // one under the other, aligned with the first element, instead of each starting where the
  // previous one's last line ended.
  struct Elements {
    Printer& p;
    size_t firstStart;
    bool previousMultiline = false;
    size_t lastStart = 0;
    explicit Elements(Printer& pr) : p(pr), firstStart(pr.out.size()) {}
    void separate() {
      if (previousMultiline) {
        p.out += '\n';
        p.out.append(p.columnAt(firstStart), ' ');
      } else {
        p.out += ' ';
      }
    }
    void begin() { lastStart = p.out.size(); }
    void end() { previousMultiline = p.out.find('\n', lastStart) != std::string::npos; }
  };

  // write-shared: every container reached twice gets a label.
  void findShared(Value root) {
    ObjectMarks seen;
    std::vector<Value> stack{root};
    while (!stack.empty()) {
      Value v = stack.back();
      stack.pop_back();
      if (!isContainer(v)) continue;
      pollEvery(++visited);
      if (seen.get(v.obj())) {
        labels.emplace(v.obj(), -1);
        continue;
      }
      seen.set(v.obj(), 1);
      pushChildren(v, [&](Value c) { stack.push_back(c); });
    }
  }

  // Finds back edges (cycles) with an iterative DFS in print order; labels only cyclic targets.
  // With a budget, only the first `budget` containers are explored: output cut off after
  // `limit` characters never reaches further.
  void findCycles(Value root, size_t budget = SIZE_MAX) {
    enum : uint8_t { kOnPath = 1, kDone = 2 };
    ObjectMarks marks;
    std::vector<std::pair<Value, int>> stack;   // value, state (0 = enter, 1 = leave)
    stack.push_back({root, 0});
    while (!stack.empty() && budget > 0) {
      auto [v, state] = stack.back();
      stack.pop_back();
      pollEvery(++visited);   // entering and leaving: a long list leaves millions at the end
      if (!isContainer(v)) continue;
      const Object* o = v.obj();
      if (state == 1) {
        marks.set(o, kDone);
        continue;
      }
      uint8_t mark = marks.get(o);
      if (mark == kOnPath) {
        labels.emplace(o, -1);
        continue;
      }
      if (mark == kDone) continue;
      budget--;
      marks.set(o, kOnPath);
      stack.push_back({v, 1});
      pushChildren(v, [&](Value c) { stack.push_back({c, 0}); });
    }
  }

  // Whether a walk of the value as a tree ends within `budget` containers: then it has no
  // cycle and the marking search above is not needed. The walk keeps no marks, so it costs a
  // pointer chase per container instead of a hash-table probe (measured: printing a list of 3
  // million numbers spent 42% of its time marking); a cycle, or sharing that unfolds past the
  // budget, makes it give up and leaves the decision to findCycles.
  bool acyclicWithin(Value root, size_t budget) {
    std::vector<Value> stack{root};
    while (!stack.empty()) {
      Value v = stack.back();
      stack.pop_back();
      while (isContainer(v)) {
        if (budget-- == 0) return false;
        pollEvery(++visited);
        if (isPair(v)) {   // along the cdrs without the stack: lists are long, rarely deep
          if (isContainer(car(v))) stack.push_back(car(v));
          v = cdr(v);
          continue;
        }
        pushChildren(v, [&](Value c) {
          if (isContainer(c)) stack.push_back(c);
        });
        break;
      }
    }
    return true;
  }

  bool label(Value v) {   // true when v was printed as a back reference
    if (labels.empty()) return false;
    auto it = labels.find(v.obj());
    if (it == labels.end()) return false;
    if (it->second >= 0) {
      out += "#" + std::to_string(it->second) + "#";
      return true;
    }
    it->second = nextLabel++;
    out += "#" + std::to_string(it->second) + "=";
    return false;
  }

  void string(Value v) {
    std::string_view s = stringView(v);
    if (limit != SIZE_MAX && s.size() > limit) s = s.substr(0, limit);
    if (!write) {
      out += s;
      return;
    }
    out += '"';
    for (char c : s) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
          if (static_cast<unsigned char>(c) < 32) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%x;", static_cast<unsigned char>(c));
            out += buf;
          } else {
            out += c;
          }
      }
    }
    out += '"';
  }

  void character(uint32_t c) {
    if (!write) {
      appendUtf8(out, c);
      return;
    }
    out += "#\\";
    if (const char* n = charName(c)) out += n;
    else if (c < 32) {
      char buf[12];
      std::snprintf(buf, sizeof buf, "x%x", c);
      out += buf;
    } else appendUtf8(out, c);
  }

  void symbol(Value v) {
    std::string_view s = symbolName(v);
    if (isKeyword(v)) {
      out += ':';
      out += s;
      return;
    }
    if (write && symbolNeedsBars(s)) {
      out += '|';
      for (char c : s) {
        if (c == '|' || c == '\\') out += '\\';
        out += c;
      }
      out += '|';
    } else {
      out += s;
    }
  }

  void list(Value v) {
    // 'x `x ,x ,@x abbreviations
    if (isSymbol(car(v)) && isPair(cdr(v)) && cddr(v).isNil() && (labels.empty() || !labels.count(cdr(v).obj()))) {
      std::string_view h = symbolName(car(v));
      const char* abbrev = h == "quote" ? "'" : h == "quasiquote" ? "`" : h == "unquote" ? ","
                         : h == "unquote-splicing" ? ",@" : nullptr;
      if (abbrev) {
        out += abbrev;
        print(cadr(v));
        return;
      }
    }
    out += '(';
    Elements items(*this);
    items.begin();
    print(car(v));
    items.end();
    Value p = cdr(v);
    while (isPair(p)) {
      if (!labels.empty() && labels.count(p.obj())) break;   // cyclic tail: print as dotted
      if (full()) return;
      items.separate();
      items.begin();
      print(car(p));
      items.end();
      p = cdr(p);
    }
    if (!p.isNil()) {
      out += " . ";
      print(p);
    }
    out += ')';
  }

  void print(Value v) {
    if (full()) return;
    if (stackNearlyFull()) throwError("recursion-error", "data nested too deeply to print");
    pollEvery(++visited);
    if (v.isFixnum()) {
      out += std::to_string(v.fixnum());
      return;
    }
    if (v.isChar()) return character(v.character());
    if (!v.isObject()) {
      switch (v.bits) {
        case Value::kNilBits: out += "()"; return;
        case Value::kTrueBits: out += "#t"; return;
        case Value::kFalseBits: out += "#f"; return;
        case Value::kEofBits: out += "#<eof>"; return;
        case Value::kDefaultBits: out += "#!default"; return;
        case Value::kUnboundBits: out += "#<unbound>"; return;
        default: out += "#<unspecified>"; return;
      }
    }
    Object* o = v.obj();
    switch (o->kind) {
      case Kind::Pair:
        if (label(v)) return;
        return list(v);
      case Kind::Vector: {
        if (label(v)) return;
        auto* vec = v.as<Vector>();
        out += "#(";
        Elements items(*this);
        for (uint32_t i = 0; i < vec->extra && !full(); i++) {
          if (i) items.separate();
          items.begin();
          print(vec->items[i]);
          items.end();
        }
        out += ')';
        return;
      }
      case Kind::Symbol: return symbol(v);
      case Kind::String: return string(v);
      case Kind::Bignum:
        // a 20-million-digit integer in an error message: its size says enough
        if (limit != SIZE_MAX && v.as<Bignum>()->extra > 64) {
          out += "#<exact integer of " + std::to_string(uint64_t(v.as<Bignum>()->extra) * 64) + " bits>";
          return;
        }
        out += numberToString(v);
        return;
      case Kind::Flonum: case Kind::Ratnum: case Kind::Compnum:
        out += numberToString(v);
        return;
      case Kind::Bytevector: {
        auto* b = v.as<Bytevector>();
        out += "#u8(";
        for (uint32_t i = 0; i < b->extra; i++) {
          if (i) out += ' ';
          out += std::to_string(b->bytes[i]);
        }
        out += ')';
        return;
      }
      case Kind::Closure: {
        Value name = v.as<Closure>()->name;
        out += "#<procedure";
        if (isSymbol(name)) {
          out += ' ';
          out += symbolName(name);
        }
        out += '>';
        return;
      }
      case Kind::CaseLambda: out += "#<procedure>"; return;
      case Kind::Primitive:
        out += "#<primitive " + primitiveName(v) + ">";
        return;
      case Kind::Continuation: out += "#<continuation>"; return;
      case Kind::Parameter: out += "#<parameter>"; return;
      case Kind::Promise: out += "#<promise>"; return;
      case Kind::HashTable: out += "#<hash-table>"; return;
      case Kind::Environment: out += "#<environment>"; return;
      case Kind::Macro: out += "#<macro>"; return;
      case Kind::Port: out += "#<port>"; return;
      case Kind::EofObject: out += "#<eof>"; return;
      case Kind::Alias: return print(v.as<Alias>()->symbol);
      case Kind::Box: out += "#<box>"; return;
      case Kind::MultipleValues: {
        if (label(v)) return;
        auto* m = v.as<MultipleValues>();
        for (uint32_t i = 0; i < m->extra && !full(); i++) {
          if (i) out += ' ';
          print(m->items[i]);
        }
        return;
      }
      case Kind::ErrorObject: {
        if (label(v)) return;
        auto* e = v.as<ErrorObject>();
        out += "#<error ";
        // the message and irritants in write form, whatever this printer's mode
        bool saved = write;
        write = true;
        print(e->message);
        bool first = true;
        for (Value p = e->irritants; isPair(p) && !full(); p = cdr(p), first = false) {
          if (!first && !labels.empty() && labels.count(p.obj())) break;   // a circular list of irritants
          out += ' ';
          print(car(p));
        }
        write = saved;
        out += '>';
        return;
      }
      case Kind::RecordType:
        out += "#<record-type ";
        print(v.as<RecordType>()->name);
        out += '>';
        return;
      case Kind::Record: {
        if (label(v)) return;
        auto* r = v.as<Record>();
        if (printCustom(v, r->type->printer)) return;
        out += "#<";
        std::string_view n = isSymbol(r->type->name) ? symbolName(r->type->name) : std::string_view("record");
        if (n.size() > 2 && n.front() == '<' && n.back() == '>') n = n.substr(1, n.size() - 2);
        out += n;
        if (r->extra) out += ' ';
        Elements items(*this);
        for (uint32_t i = 0; i < r->extra && !full(); i++) {
          if (i) items.separate();
          items.begin();
          print(r->fields[i]);
          items.end();
        }
        out += '>';
        return;
      }
      case Kind::Tensor: return printTensor(out, v);
      case Kind::Module: out += "#<module>"; return;
      case Kind::Optimizer: out += "#<optimizer>"; return;
      case Kind::Foreign: {
        if (ForeignPrinter fp = foreignPrinterFor(v.as<Foreign>()->destroy)) return fp(out, v, write);
        out += "#<";
        Value n = v.as<Foreign>()->typeName;
        if (n.is(Kind::Symbol)) out += symbolName(n);
        else out += "foreign";
        out += '>';
        return;
      }
      default: out += "#<object>"; return;
    }
  }
};

}  // namespace

void printValue(std::string& out, Value v, bool write) {
  Printer p{out, write, {}, {}, 0};
  // A tree walk that visits more containers than the heap can hold has met one twice.
  size_t containersInHeap = size_t(gcStats().heapBytes) / sizeof(Pair) + 1024;
  if (Printer::isContainer(v) && !p.acyclicWithin(v, containersInHeap)) p.findCycles(v);
  p.print(v);
}

void printShared(std::string& out, Value v) {
  Printer p{out, true, {}, {}, 0};
  if (Printer::isContainer(v)) p.findShared(v);
  p.print(v);
}

std::string toWriteStringBounded(Value v, size_t maxChars) {
  std::string s;
  Printer p{s, true, {}, {}, 0};
  p.limit = maxChars;
  if (Printer::isContainer(v)) p.findCycles(v, maxChars + 16);
  p.print(v);
  if (s.size() >= maxChars) {
    s.resize(maxChars);
    s += "...";
  }
  return s;
}

std::string toWriteString(Value v) {
  std::string s;
  printValue(s, v, true);
  return s;
}

std::string toDisplayString(Value v) {
  std::string s;
  printValue(s, v, false);
  return s;
}

void setForeignPrinter(void (*destroy)(void*), ForeignPrinter printer) {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  int n = gForeignPrinterCount.load(std::memory_order_relaxed);
  for (int i = 0; i < n; i++)
    if (gForeignPrinters[i].destroy == destroy) {
      gForeignPrinters[i].printer = printer;
      return;
    }
  if (n == int(sizeof(gForeignPrinters) / sizeof(gForeignPrinters[0]))) return;
  gForeignPrinters[n] = {destroy, printer};
  gForeignPrinterCount.store(n + 1, std::memory_order_release);
}

void printNumber(std::string& out, Value v, int radix) { out += numberToString(v, radix); }

}  // namespace purple
