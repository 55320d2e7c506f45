// SentencePiece models (tokenizer.model: Llama, Mistral, T5 ...) through Debian's libsentencepiece,
// the reference implementation itself, so that ids match Python's sentencepiece exactly. The
// processor is a Foreign value; (purple text)'s load-tokenizer wraps it (lib/purple/text/).
#include "builtins/builtins.hpp"
#include "interp/core/file_io.hpp"
#include "interp/limits/sandbox.hpp"
#include <sentencepiece_processor.h>

namespace purple {

namespace {

void destroyProcessor(void* p) { delete static_cast<sentencepiece::SentencePieceProcessor*>(p); }

const sentencepiece::SentencePieceProcessor& processorArg(Value v, const char* who) {
  if (!(v.is(Kind::Foreign) && v.as<Foreign>()->destroy == destroyProcessor && v.as<Foreign>()->ptr))
    throwTypeError(who, 1, "a SentencePiece processor (sentencepiece-load)", v);
  return *static_cast<const sentencepiece::SentencePieceProcessor*>(v.as<Foreign>()->ptr);
}

int idArg(const sentencepiece::SentencePieceProcessor& sp, int64_t id, const char* who) {
  if (id < 0 || id >= sp.GetPieceSize())
    throwError("range-error", std::string(who) + ": id " + std::to_string(id) + " is outside the vocabulary (0 to " +
                                  std::to_string(sp.GetPieceSize() - 1) + ")");
  return int(id);
}

}  // namespace

void registerSentencePiece(Registry& r) {
  r.def("sentencepiece-load", "(path)",
        [](std::string path) {
          // Read here, so a missing file is the usual file-error; the library then parses the bytes.
          std::string bytes = readWholeFile(path, "sentencepiece-load");
          auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
          auto status = sp->LoadFromSerializedProto(bytes);
          if (!status.ok())
            throwError("file-error", "sentencepiece-load: " + path + ": not a SentencePiece model (" +
                                         status.ToString() + ")");
          return makeForeign(sp.release(), destroyProcessor, intern("sentencepiece-processor"));
        },
        "Loads a SentencePiece model file (tokenizer.model) with libsentencepiece and returns its processor.");
  sandbox(r, "sentencepiece-load", Needs::Files, "files: reads a SentencePiece model");
  r.def("sentencepiece-processor?", "(x)",
        [](Value v) { return v.is(Kind::Foreign) && v.as<Foreign>()->destroy == destroyProcessor; },
        "True when X is a SentencePiece processor.");
  r.def("sentencepiece-encode", "(sp text)",
        [](Value spv, std::string text) {
          auto& sp = processorArg(spv, "sentencepiece-encode");
          std::vector<int> ids;
          auto status = sp.Encode(text, &ids);
          if (!status.ok()) throwError("value-error", "sentencepiece-encode: " + status.ToString());
          return std::vector<int64_t>(ids.begin(), ids.end());
        },
        "The ids of TEXT (a string) as the model segments it, without BOS or EOS: what Python's "
        "sentencepiece.SentencePieceProcessor.encode(text) returns.");
  r.def("sentencepiece-encode-pieces", "(sp text)",
        [](Value spv, std::string text) {
          auto& sp = processorArg(spv, "sentencepiece-encode-pieces");
          std::vector<std::string> pieces;
          auto status = sp.Encode(text, &pieces);
          if (!status.ok()) throwError("value-error", "sentencepiece-encode-pieces: " + status.ToString());
          return pieces;
        },
        "The pieces (strings, with U+2581 for spaces) TEXT segments into.");
  r.def("sentencepiece-decode", "(sp ids)",
        [](Value spv, std::vector<int64_t> ids) {
          auto& sp = processorArg(spv, "sentencepiece-decode");
          std::vector<int> v;
          v.reserve(ids.size());
          for (int64_t id : ids) v.push_back(idArg(sp, id, "sentencepiece-decode"));
          std::string text;
          auto status = sp.Decode(v, &text);
          if (!status.ok()) throwError("value-error", "sentencepiece-decode: " + status.ToString());
          return text;
        },
        "The text of the ids IDS (a list), as sentencepiece's decode: control tokens (BOS, EOS) give nothing, "
        "byte pieces are joined into UTF-8.");
  r.def("sentencepiece-vocab-size", "(sp)",
        [](Value spv) { return int64_t(processorArg(spv, "sentencepiece-vocab-size").GetPieceSize()); },
        "The number of pieces in the model.");
  r.def("sentencepiece-special-ids", "(sp)",
        [](Value spv) {
          auto& sp = processorArg(spv, "sentencepiece-special-ids");
          return std::vector<int64_t>{sp.bos_id(), sp.eos_id(), sp.unk_id(), sp.pad_id()};
        },
        "The list (BOS EOS UNK PAD) of the model's special ids; -1 for one it does not have.");
  r.def("sentencepiece-id->piece", "(sp id)",
        [](Value spv, int64_t id) {
          auto& sp = processorArg(spv, "sentencepiece-id->piece");
          return sp.IdToPiece(idArg(sp, id, "sentencepiece-id->piece"));
        },
        "The piece (a string) of ID.");
  r.def("sentencepiece-piece->id", "(sp piece)",
        [](Value spv, std::string piece) { return int64_t(processorArg(spv, "sentencepiece-piece->id").PieceToId(piece)); },
        "The id of PIECE, or the unknown id when the model has no such piece.");
}

}  // namespace purple
