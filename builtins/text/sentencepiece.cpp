// SentencePiece models (tokenizer.model: Llama, Mistral, T5 ...) through Debian's libsentencepiece,
// the reference implementation itself, so that ids match Python's sentencepiece exactly. The
// library is reached through a plugin opened on first use (sentencepiece_api.hpp says why); a
// processor is a Foreign value, and (purple text)'s load-tokenizer wraps it (lib/purple/text/).
#include "builtins/builtins.hpp"
#include "builtins/text/sentencepiece_api.hpp"
#include "interp/core/file_io.hpp"
#include "interp/limits/sandbox.hpp"
#include <dlfcn.h>
#include <cstdlib>
#include <mutex>

namespace purple {

namespace {

using text::SentencePieceApi;

// The plugin beside libpurple (build/ in the build tree, the library directory when installed),
// or the file $PURPLE_SENTENCEPIECE_PLUGIN names.
const SentencePieceApi& api() {
  static const SentencePieceApi* loaded = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string path;
    if (const char* env = std::getenv("PURPLE_SENTENCEPIECE_PLUGIN")) {
      path = env;
    } else {
      Dl_info info;
      if (dladdr(reinterpret_cast<void*>(&api), &info) && info.dli_fname) {
        path = info.dli_fname;
        auto slash = path.rfind('/');
        path = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/libpurple_sentencepiece.so";
      }
    }
    int flags = RTLD_NOW | RTLD_LOCAL;
#if defined(PURPLE_SENTENCEPIECE_DEEPBIND) && !defined(__SANITIZE_ADDRESS__)
    // Set by CMake when libsentencepiece carries its own protobuf. AddressSanitizer refuses
    // RTLD_DEEPBIND; there the two protobufs may clash.
    flags |= RTLD_DEEPBIND;
#endif
    void* handle = path.empty() ? nullptr : dlopen(path.c_str(), flags);
    if (!handle) {
      const char* e = dlerror();
      failure = "cannot open the SentencePiece plugin " + path + (e ? std::string(" (") + e + ")" : std::string());
      return;
    }
    auto entry = reinterpret_cast<const SentencePieceApi* (*)()>(dlsym(handle, "purple_sentencepiece_api"));
    const SentencePieceApi* a = entry ? entry() : nullptr;
    if (!a || a->version != text::kSentencePieceApiVersion) {
      failure = "the SentencePiece plugin " + path + " is not this build's";
      return;
    }
    loaded = a;
  });
  if (!loaded) throwError("file-error", "sentencepiece: " + failure);
  return *loaded;
}

struct Processor {
  void* handle;
};

void destroyProcessor(void* p) {
  auto* proc = static_cast<Processor*>(p);
  api().destroy(proc->handle);
  delete proc;
}

void* processorArg(Value v, const char* who) {
  if (!(v.is(Kind::Foreign) && v.as<Foreign>()->destroy == destroyProcessor && v.as<Foreign>()->ptr))
    throwTypeError(who, 1, "a SentencePiece processor (sentencepiece-load)", v);
  return static_cast<Processor*>(v.as<Foreign>()->ptr)->handle;
}

int idArg(void* sp, int64_t id, const char* who) {
  int size = api().pieceSize(sp);
  if (id < 0 || id >= size)
    throwError("range-error", std::string(who) + ": id " + std::to_string(id) + " is outside the vocabulary (0 to " +
                                  std::to_string(size - 1) + ")");
  return int(id);
}

}  // namespace

void registerSentencePiece(Registry& r) {
  r.def("sentencepiece-load", "(path)",
        [](std::string path) {
          // Read here, so a missing file is the usual file-error; the library then parses the bytes.
          std::string bytes = readWholeFile(path, "sentencepiece-load");
          std::string error;
          void* handle = api().load(bytes, error);
          if (!handle) throwError("file-error", "sentencepiece-load: " + path + ": not a SentencePiece model (" + error + ")");
          return makeForeign(new Processor{handle}, destroyProcessor, intern("sentencepiece-processor"));
        },
        "Loads a SentencePiece model file (tokenizer.model) with libsentencepiece and returns its processor.");
  sandbox(r, "sentencepiece-load", Needs::Files, "files: reads a SentencePiece model");
  r.def("sentencepiece-processor?", "(x)",
        [](Value v) { return v.is(Kind::Foreign) && v.as<Foreign>()->destroy == destroyProcessor; },
        "True when X is a SentencePiece processor.");
  r.def("sentencepiece-encode", "(sp text)",
        [](Value spv, std::string text) {
          std::vector<int> ids;
          std::string error;
          if (!api().encode(processorArg(spv, "sentencepiece-encode"), text, ids, error))
            throwError("value-error", "sentencepiece-encode: " + error);
          return std::vector<int64_t>(ids.begin(), ids.end());
        },
        "The ids of TEXT (a string) as the model segments it, without BOS or EOS: what Python's "
        "sentencepiece.SentencePieceProcessor.encode(text) returns.");
  r.def("sentencepiece-encode-pieces", "(sp text)",
        [](Value spv, std::string text) {
          std::vector<std::string> pieces;
          std::string error;
          if (!api().encodePieces(processorArg(spv, "sentencepiece-encode-pieces"), text, pieces, error))
            throwError("value-error", "sentencepiece-encode-pieces: " + error);
          return pieces;
        },
        "The pieces (strings, with U+2581 for spaces) TEXT segments into.");
  r.def("sentencepiece-decode", "(sp ids)",
        [](Value spv, std::vector<int64_t> ids) {
          void* sp = processorArg(spv, "sentencepiece-decode");
          std::vector<int> v;
          v.reserve(ids.size());
          for (int64_t id : ids) v.push_back(idArg(sp, id, "sentencepiece-decode"));
          std::string text, error;
          if (!api().decode(sp, v, text, error)) throwError("value-error", "sentencepiece-decode: " + error);
          return text;
        },
        "The text of the ids IDS (a list), as sentencepiece's decode: control tokens (BOS, EOS) give nothing, "
        "byte pieces are joined into UTF-8.");
  r.def("sentencepiece-vocab-size", "(sp)",
        [](Value spv) { return int64_t(api().pieceSize(processorArg(spv, "sentencepiece-vocab-size"))); },
        "The number of pieces in the model.");
  r.def("sentencepiece-special-ids", "(sp)",
        [](Value spv) {
          int ids[4];
          api().specialIds(processorArg(spv, "sentencepiece-special-ids"), ids);
          return std::vector<int64_t>{ids[0], ids[1], ids[2], ids[3]};
        },
        "The list (BOS EOS UNK PAD) of the model's special ids; -1 for one it does not have.");
  r.def("sentencepiece-id->piece", "(sp id)",
        [](Value spv, int64_t id) {
          void* sp = processorArg(spv, "sentencepiece-id->piece");
          std::string piece;
          api().idToPiece(sp, idArg(sp, id, "sentencepiece-id->piece"), piece);
          return piece;
        },
        "The piece (a string) of ID.");
  r.def("sentencepiece-piece->id", "(sp piece)",
        [](Value spv, std::string piece) { return int64_t(api().pieceToId(processorArg(spv, "sentencepiece-piece->id"), piece)); },
        "The id of PIECE, or the unknown id when the model has no such piece.");
}

}  // namespace purple
