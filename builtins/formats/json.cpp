// JSON (RFC 8259) as Purple data, the way model folders need it: config.json, tokenizer.json,
// vocab.json, model.safetensors.index.json, adapter_config.json. Parsing is nlohmann's; this file
// maps its values to Purple's and back:
//
//   object -> hash table (equal?, keys in the file's order)   array -> vector
//   string -> string    integer -> exact integer    other number -> flonum
//   true / false -> #t / #f    null -> the symbol null
//
// Writing takes the same shapes (a proper list is an array too; an exact rational or a flonum is
// a number; NaN and infinities are refused, as JSON has none). Nesting deeper than kMaxDepth is
// refused before anything is built, so a hostile file cannot exhaust the C++ stack.
#include "builtins/builtins.hpp"
#include "builtins/core/hashtable.hpp"
#include "builtins/formats/json_nesting.hpp"
#include "interp/core/file_io.hpp"
#include "interp/limits/sandbox.hpp"
#include "interp/language/numbers.hpp"
#include <cmath>
#include <nlohmann/json.hpp>

namespace purple {

namespace {

using Json = nlohmann::ordered_json;
constexpr int kMaxDepth = 512;

// Builds Purple values straight from nlohmann's SAX events, in the text's order. (A DOM of
// ordered_json first was quadratic: its objects find duplicate keys by a linear search, and GPT-2's
// vocab.json, 50,257 keys, took 7.4 s.) Values under construction sit on a stack the collector
// scans; FRAMES holds where each open array or object starts on it.
class Builder : public nlohmann::json_sax<Json> {
 public:
  explicit Builder(Interp& in) : in_(in) {}
  Value result() const { return stack_.empty() ? Value::unspecified() : stack_.back(); }
  const std::string& error() const { return error_; }

  bool null() override { return push(intern("null")); }
  bool boolean(bool b) override { return push(Value::boolean(b)); }
  bool number_integer(number_integer_t i) override { return push(makeInteger(i)); }
  bool number_unsigned(number_unsigned_t u) override {
    return push(u <= uint64_t(INT64_MAX) ? makeInteger(int64_t(u)) : makeFlonum(double(u)));
  }
  bool number_float(number_float_t d, const string_t&) override { return push(makeFlonum(d)); }
  bool string(string_t& text) override { return push(makeString(text)); }
  bool binary(binary_t&) override { return push(intern("null")); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t& text) override { return push(makeString(text)); }
  bool end_object() override {
    size_t from = close();
    Value table = makeHashTable(HashEquiv::Equal, (stack_.size() - from) / 2);
    for (size_t i = from; i + 1 < stack_.size(); i += 2) hashTablePut(in_, table, stack_[i], stack_[i + 1]);
    stack_.resize(from);
    return push(table);
  }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override {
    size_t from = close();
    Value v = makeVector(stack_.size() - from);
    Value* items = v.as<Vector>()->items;
    for (size_t i = from; i < stack_.size(); i++) items[i - from] = stack_[i];
    stack_.resize(from);
    return push(v);
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    std::string msg = e.what();
    auto p = msg.find("] ");
    error_ = p == std::string::npos ? msg : msg.substr(p + 2);
    return false;
  }

 private:
  bool push(Value v) {
    stack_.push_back(v);
    return true;
  }
  bool open() {
    frames_.push_back(stack_.size());
    return true;
  }
  size_t close() {
    size_t from = frames_.back();
    frames_.pop_back();
    return from;
  }
  Interp& in_;
  std::vector<Value, traceable_allocator<Value>> stack_;
  std::vector<size_t> frames_;
  std::string error_;
};

Value parse(Interp& in, std::string_view text, const std::string& who, const std::string& where) {
  if (formats::jsonNestingPast(text, kMaxDepth) != std::string_view::npos)
    throwError("read-error", who + ": " + where + "nested deeper than " + std::to_string(kMaxDepth) + " levels");
  Builder builder(in);
  if (!Json::sax_parse(text.begin(), text.end(), &builder))
    throwError("read-error", who + ": " + where + builder.error());
  return builder.result();
}

Json toJson(Value v, const std::string& who, int depth) {
  if (depth > kMaxDepth) throwError("value-error", who + ": the value is nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (v == Value::t()) return true;
  if (v.isFalse()) return false;
  if (isString(v)) return std::string(stringView(v));
  if (v.is(Kind::Symbol)) {
    if (symbolName(v) == "null") return nullptr;
    return std::string(symbolName(v));
  }
  if (v.isFixnum()) return v.fixnum();
  if (isBignum(v)) {
    std::string digits = numberToString(v);
    try {
      return int64_t(std::stoll(digits));
    } catch (const std::out_of_range&) {
      return toDouble(v);   // beyond int64: JSON readers take it as a double anyway
    }
  }
  if (isRealNumber(v)) {
    double d = toDouble(v);
    if (!std::isfinite(d)) throwError("value-error", who + ": JSON has no NaN or infinity", cons(v, Value::nil()));
    return d;
  }
  if (isHashTable(v)) {
    Json obj = Json::object();
    auto* h = v.as<HashTable>();
    for (uint32_t i = 0; i < h->entryUsed; i++) {
      Value key = h->entries[2 * i];
      if (key.isUnbound()) continue;
      std::string k;
      if (isString(key)) k = std::string(stringView(key));
      else if (key.is(Kind::Symbol)) k = std::string(symbolName(key));
      else throwTypeError(who, 1, "JSON data (an object's keys are strings or symbols)", key);
      // ordered_json's operator[] searches its members linearly (quadratic for a big object); a
      // hash table's keys are distinct already, so members are appended.
      static_cast<Json::object_t::Container&>(obj.get_ref<Json::object_t&>())
          .emplace_back(k, toJson(h->entries[2 * i + 1], who, depth + 1));
    }
    return obj;
  }
  if (v.is(Kind::Vector)) {
    Json arr = Json::array();
    auto* vec = v.as<Vector>();
    for (size_t i = 0; i < vec->extra; i++) arr.push_back(toJson(vec->items[i], who, depth + 1));
    return arr;
  }
  if (v.isNil() || (v.is(Kind::Pair) && isList(v))) {
    Json arr = Json::array();
    for (Value p = v; !p.isNil(); p = cdr(p)) arr.push_back(toJson(car(p), who, depth + 1));
    return arr;
  }
  throwTypeError(who, 1, "JSON data (hash table, vector, list, string, number, boolean or 'null)", v);
}

std::string render(Value v, std::optional<int64_t> indent, const std::string& who) {
  Json j = toJson(v, who, 0);
  // Non-ASCII text is written as UTF-8 (ensure_ascii off), as Python's json.dump(..., ensure_ascii=False).
  try {
    return j.dump(indent ? int(*indent) : -1, ' ', false, Json::error_handler_t::strict);
  } catch (const Json::type_error&) {
    throwError("value-error", who + ": a string is not valid UTF-8, which JSON text must be");
  }
}

}  // namespace

void registerJson(Registry& r) {
  r.def("parse-json", "(string)",
        [](Interp& in, std::string text) { return parse(in, text, "parse-json", ""); },
        "The Purple data of the JSON text STRING: objects are hash tables (equal?, keys in the text's order), arrays "
        "vectors, strings strings, integers exact, other numbers flonums, true and false #t and #f, null the symbol "
        "null. Malformed text is a read-error naming the line and column.");
  r.def("read-json-file", "(path)",
        [](Interp& in, std::string path) {
          std::string text = readWholeFile(path, "read-json-file");
          return parse(in, text, "read-json-file", path + ": ");
        },
        "The JSON file at PATH as Purple data (see parse-json): config.json, tokenizer.json and the like. A missing "
        "file is a file-error; malformed JSON a read-error naming the path, line and column.");
  sandbox(r, "read-json-file", Needs::Files, "files: reads a JSON file");
  r.def("json->string", "(value :key indent)",
        [](Value v, std::optional<int64_t> indent) { return render(v, indent, "json->string"); },
        "VALUE as JSON text: hash tables are objects (string or symbol keys), vectors and proper lists arrays, the "
        "symbol null is null. :indent N pretty-prints with N spaces. Non-ASCII text stays UTF-8.");
  r.def("write-json-file", "(value path :key (indent 2))",
        [](Value v, std::string path, int64_t indent) {
          std::string text = render(v, indent, "write-json-file") + "\n";
          writeFileAtomically(path, text.data(), text.size(), "write-json-file");
        },
        "Writes VALUE as JSON (see json->string) to PATH atomically, indented by :indent spaces (default 2).");
  sandbox(r, "write-json-file", Needs::Files, "files: writes a JSON file");
}

}  // namespace purple
