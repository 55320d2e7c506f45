// The interface between libpurple and its SentencePiece plugin (builtins/text/plugin/).
//
// Debian 12's libsentencepiece carries its own copy of protobuf-lite (3.14) and exports its
// symbols; LibTorch brings the system's libprotobuf (3.21) into the process. Linked into
// libpurple, the two copies bind to each other's functions and the process dies before main
// (measured: a segfault in libprotobuf's static initialisation, inside sentencepiece's copy).
// So the binding lives in a plugin that libpurple opens on first use with RTLD_LOCAL |
// RTLD_DEEPBIND: sentencepiece then sees only its own protobuf, and the process only LibTorch's.
// (RTLD_DEEPBIND only where CMake found libsentencepiece without a NEEDED libprotobuf: a
// library-bound lookup also binds sentencepiece's std::cerr to libstdc++'s own copy rather than
// the program's, which only its error logging would touch.) Both sides are built by the same
// compiler from this tree, so C++ types cross the boundary.
#pragma once
#include <string>
#include <vector>

namespace purple::text {

struct SentencePieceApi {
  int version;   // kSentencePieceApiVersion
  // A processor for the model in BYTES (a tokenizer.model file's contents), or nullptr with ERROR set.
  void* (*load)(const std::string& bytes, std::string& error);
  void (*destroy)(void* processor);
  bool (*encode)(void* processor, const std::string& text, std::vector<int>& ids, std::string& error);
  bool (*encodePieces)(void* processor, const std::string& text, std::vector<std::string>& pieces, std::string& error);
  bool (*decode)(void* processor, const std::vector<int>& ids, std::string& text, std::string& error);
  int (*pieceSize)(void* processor);
  void (*specialIds)(void* processor, int out[4]);   // bos eos unk pad, -1 when absent
  void (*idToPiece)(void* processor, int id, std::string& piece);
  int (*pieceToId)(void* processor, const std::string& piece);
};

constexpr int kSentencePieceApiVersion = 1;

}  // namespace purple::text

// The plugin's one exported symbol.
extern "C" const purple::text::SentencePieceApi* purple_sentencepiece_api();
