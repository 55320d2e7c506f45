// Record types: the procedures define-record-type (prelude/records.purple) expands into.
#include "builtins/builtins.hpp"
#include "interp/language/printer.hpp"

namespace purple {

namespace {

int fieldIndex(RecordType* t, Value field, const char* who) {
  auto* fields = t->fields.as<Vector>();
  for (uint32_t i = 0; i < fields->extra; i++)
    if (fields->items[i] == field) return int(i);
  throwError("error", std::string(who) + ": record type " + toWriteString(t->name) + " has no field " + toWriteString(field));
}

RecordType* recordType(Value v, const char* who) {
  if (!v.is(Kind::RecordType)) throwTypeError(who, 1, "a record type", v);
  return v.as<RecordType>();
}

}  // namespace

void registerRecords(Registry& r) {
  r.def("make-record-type", "(name fields)", [](Value name, Value fields) {
    size_t n = listLength(fields);
    if (n == SIZE_MAX) throwTypeError("make-record-type", 2, "a list of field names", fields);
    auto* t = static_cast<RecordType*>(gcAlloc(sizeof(RecordType)));
    t->kind = Kind::RecordType;
    t->flags = 0;
    t->small = 0;
    t->extra = uint32_t(n);
    t->name = name;
    t->printer = Value::f();
    t->fields = makeVector(n);
    size_t i = 0;
    for (Value p = fields; isPair(p); p = cdr(p)) {
      Value f = isPair(car(p)) ? car(car(p)) : car(p);
      t->fields.as<Vector>()->items[i++] = f;
    }
    return Value(t);
  }, "A new record type named NAME with the given FIELDS.");
  r.def("%record-make", "(type :rest field-values)", [](Value type, RestArgs values) {
    RecordType* t = recordType(type, "record constructor");
    auto* rec = static_cast<Record*>(gcAlloc(sizeof(Record) + t->extra * sizeof(Value)));
    rec->kind = Kind::Record;
    rec->flags = 0;
    rec->small = 0;
    rec->extra = t->extra;
    rec->type = t;
    for (uint32_t i = 0; i < t->extra; i++) rec->fields[i] = Value::f();
    uint32_t i = 0;
    for (Value p = values.list; isPair(p) && i < t->extra; p = cdr(p)) rec->fields[i++] = car(p);
    return Value(rec);
  }, "Internal: a record of TYPE with the FIELD-VALUES in field order.");
  r.def("%record-indices", "(type fields)", [](Value type, Value fields) {
    RecordType* t = recordType(type, "record constructor");
    size_t n = listLength(fields);
    if (n == SIZE_MAX) throwTypeError("record constructor", 2, "a list of field names", fields);
    Value v = makeVector(n);
    size_t i = 0;
    for (Value p = fields; isPair(p); p = cdr(p)) v.as<Vector>()->items[i++] = Value::fixnum(fieldIndex(t, car(p), "record constructor"));
    return v;
  }, "Internal: the field positions of the constructor's FIELDS.");
  r.def("%record-build", "(type indices :rest values)", [](Value type, Value indices, RestArgs values) {
    RecordType* t = recordType(type, "record constructor");
    auto* rec = static_cast<Record*>(gcAlloc(sizeof(Record) + t->extra * sizeof(Value)));
    rec->kind = Kind::Record;
    rec->flags = 0;
    rec->small = 0;
    rec->extra = t->extra;
    rec->type = t;
    for (uint32_t i = 0; i < t->extra; i++) rec->fields[i] = Value::f();
    auto* idx = indices.as<Vector>();
    uint32_t k = 0;
    for (Value p = values.list; isPair(p) && k < idx->extra; p = cdr(p), k++) rec->fields[idx->items[k].fixnum()] = car(p);
    return Value(rec);
  }, "Internal: a record of TYPE with VALUES stored at INDICES.");
  r.def("%record-field-index", "(type field)", [](Value type, Value field) {
    return int64_t(fieldIndex(recordType(type, "record"), field, "record"));
  }, "Internal: the position of FIELD in record TYPE.");
  r.def("%record-of-type?", "(obj type)", [](Value obj, Value type) {
    return obj.is(Kind::Record) && Value(obj.as<Record>()->type) == type;
  }, "Internal: true if OBJ is a record of TYPE.");
  r.def("%record-ref", "(obj type index who)", [](Value obj, Value type, int64_t index, Value who) {
    if (!obj.is(Kind::Record) || Value(obj.as<Record>()->type) != type)
      throwTypeError(isSymbol(who) ? symbolName(who) : "record accessor", 1,
                     "a record of type " + toWriteString(type.as<RecordType>()->name), obj);
    return obj.as<Record>()->fields[index];
  }, "Internal: field INDEX of record OBJ, checked to be of TYPE.");
  r.def("%record-set!", "(obj type index value who)", [](Value obj, Value type, int64_t index, Value value, Value who) {
    if (!obj.is(Kind::Record) || Value(obj.as<Record>()->type) != type)
      throwTypeError(isSymbol(who) ? symbolName(who) : "record modifier", 1,
                     "a record of type " + toWriteString(type.as<RecordType>()->name), obj);
    obj.as<Record>()->fields[index] = value;
  }, "Internal: sets field INDEX of record OBJ.");
  r.def("set-record-type-printer!", "(type printer)", [](Value type, Value printer) {
    RecordType* t = recordType(type, "set-record-type-printer!");
    if (!printer.isFalse() && !isProcedure(printer)) throwTypeError("set-record-type-printer!", 2, "a procedure or #f", printer);
    t->printer = printer;
  }, "Makes display and write show the records of TYPE as the string (PRINTER record) gives, where\n"
     "they would show their fields (#f goes back to the fields). A report's printer gives its text table.");
  r.def("record?", "(obj)", [](Value v) { return v.is(Kind::Record); }, "True if OBJ is a record.");
  r.def("record-type-name", "(type)", [](Value t) { return recordType(t, "record-type-name")->name; },
        "The name of record type TYPE.");
  r.def("record-type-descriptor", "(record)", [](Value v) -> Value {
    if (!v.is(Kind::Record)) throwTypeError("record-type-descriptor", 1, "a record", v);
    return Value(v.as<Record>()->type);
  }, "The record type of RECORD.");
}

}  // namespace purple
