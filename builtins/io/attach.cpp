// The REPL server from inside a program (docs/attach.md): serve-repl, stop-repl-server,
// repl-server-path, serve-repl-wait. The server itself is interp/language/attach_server.cpp.
#include "builtins/builtins.hpp"
#include "interp/language/attach_server.hpp"
#include "interp/limits/sandbox.hpp"

#include <chrono>
#include <ctime>

namespace purple {

void registerAttach(Registry& r) {
  r.def("serve-repl", "(socket)", [](Interp& in, std::string socket) {
    startAttachServer(in, socket);
    return socket;
  }, "Serves a REPL on the Unix socket SOCKET (a path; mode 0600, this user only) and returns the "
     "path: `purple --attach SOCKET` connects to it. Clients' forms run on this program's thread "
     "at its safe points (procedure calls, loop iterations), with its globals, modules and "
     "optimizers live: a define or set! there changes what the program does next. Their output "
     "and values go to the client. The socket is removed when the program ends. A stale socket a "
     "dead program left at SOCKET is replaced; a live one is an error.");
  sandbox(r, "serve-repl", Needs::Files | Needs::Process, "a socket file, and the program to other processes of its user");
  r.def("stop-repl-server", "()", [](Interp& in) { stopAttachServer(in); },
        "Stops the REPL server (serve-repl), closing its clients' connections and removing its socket.");
  sandbox(r, "stop-repl-server", Needs::Process, "the program's REPL server");
  r.def("repl-server-path", "()", [](Interp& in) -> Value {
    std::string path = attachServerPath(in);
    return path.empty() ? Value::f() : makeString(path);
  }, "The socket the REPL server listens on (serve-repl, purple --listen), or #f.");
  sandboxAllowed(r, "repl-server-path", "the program's REPL server: its socket's path", "reads a path the host chose; changes nothing");
  r.def("serve-repl-wait", "(seconds)", [](Interp& in, double seconds) {
    // In slices, so that an interrupt of the program is noticed within a tenth of a second.
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int ran = 0;
    while (true) {
      double left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
      if (left <= 0) break;
      in.poll();
      int served = serveAttachedClients(in, std::min(left, 0.1));
      ran += served;
      if (served == 0 && attachServerPath(in).empty()) {
        struct timespec ts{0, long(std::min(left, 0.1) * 1e9)};
        nanosleep(&ts, nullptr);
      }
    }
    in.poll();
    return int64_t(ran);
  }, "Waits SECONDS, running the requests of attached clients (serve-repl) as they come, and "
     "returns how many ran: a program that has finished its work can stay open to them. Without "
     "a REPL server it just waits.");
  sandboxAllowed(r, "serve-repl-wait", "the program's REPL server: runs its clients' requests",
                 "the requests run in this interpreter, under its limits; the wait counts against the time budget");
  r.def("%attach-display", "(representations display-id update)", [](Interp& in, Value reps, Value id, bool update) {
    attachDisplay(in, reps, id, update);
  }, "Internal: what %display-hook is while an attached client's request runs: (show x) goes to that client.");
}

}  // namespace purple
