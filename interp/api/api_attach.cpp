// The embedding API's REPL server (Interpreter::serveRepl): interp/language/attach_server.hpp
// does the work; the client is attach_client.cpp.
#define PURPLE_IMPLEMENTATION
#include "purple/purple.hpp"

#include "interp/api/api_internal.hpp"
#include "interp/language/attach_server.hpp"

namespace purple::embed {

using PV = ::purple::Value;
using detail::interpOf;
using detail::runGuarded;

void Interpreter::serveRepl(const std::string& socketPath) {
  runGuarded(impl_, [&]() -> PV {
    startAttachServer(interpOf(impl_), socketPath);
    return PV::unspecified();
  });
}

void Interpreter::stopServingRepl() {
  runGuarded(impl_, [&]() -> PV {
    stopAttachServer(interpOf(impl_));
    return PV::unspecified();
  });
}

bool Interpreter::serveClients(double seconds) {
  return runGuarded(impl_, [&]() -> PV { return PV::boolean(serveAttachedClients(interpOf(impl_), seconds) > 0); }).isTrue();
}

}  // namespace purple::embed
