// The SentencePiece plugin (libpurple_sentencepiece.so): libsentencepiece behind the C++
// interface of builtins/text/sentencepiece_api.hpp, for libpurple to open with dlopen (that
// header says why it is not linked into libpurple).
#include "builtins/text/sentencepiece_api.hpp"
#include <sentencepiece_processor.h>

namespace {

using sentencepiece::SentencePieceProcessor;
SentencePieceProcessor* sp(void* p) { return static_cast<SentencePieceProcessor*>(p); }

void* load(const std::string& bytes, std::string& error) {
  auto* p = new SentencePieceProcessor();
  auto status = p->LoadFromSerializedProto(bytes);
  if (!status.ok()) {
    error = status.ToString();
    delete p;
    return nullptr;
  }
  return p;
}

void destroy(void* p) { delete sp(p); }

bool encode(void* p, const std::string& text, std::vector<int>& ids, std::string& error) {
  auto status = sp(p)->Encode(text, &ids);
  if (!status.ok()) error = status.ToString();
  return status.ok();
}

bool encodePieces(void* p, const std::string& text, std::vector<std::string>& pieces, std::string& error) {
  auto status = sp(p)->Encode(text, &pieces);
  if (!status.ok()) error = status.ToString();
  return status.ok();
}

bool decode(void* p, const std::vector<int>& ids, std::string& text, std::string& error) {
  auto status = sp(p)->Decode(ids, &text);
  if (!status.ok()) error = status.ToString();
  return status.ok();
}

int pieceSize(void* p) { return sp(p)->GetPieceSize(); }

void specialIds(void* p, int out[4]) {
  out[0] = sp(p)->bos_id();
  out[1] = sp(p)->eos_id();
  out[2] = sp(p)->unk_id();
  out[3] = sp(p)->pad_id();
}

void idToPiece(void* p, int id, std::string& piece) { piece = sp(p)->IdToPiece(id); }

int pieceToId(void* p, const std::string& piece) { return sp(p)->PieceToId(piece); }

const purple::text::SentencePieceApi kApi = {purple::text::kSentencePieceApiVersion,
                                             load, destroy, encode, encodePieces, decode, pieceSize, specialIds,
                                             idToPiece, pieceToId};

}  // namespace

extern "C" __attribute__((visibility("default"))) const purple::text::SentencePieceApi* purple_sentencepiece_api() {
  return &kApi;
}
