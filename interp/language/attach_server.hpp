// The REPL server behind `purple --listen SOCKET` and (serve-repl SOCKET) (docs/attach.md).
//
// A thread of its own accepts connections on a Unix socket (mode 0600; a peer of another uid is
// refused by SO_PEERCRED), reads requests in the attach protocol (attach_wire.hpp) and queues
// them. It never touches a Purple value. The interpreter's own thread runs the requests at its
// safe points (Interp::safePoint, through Interp::pendingWorkHook): the program's globals,
// modules and optimizers are the live ones, and a define or set! there changes what the program
// does next. A request's output, displays, values and errors go back to its client only.
//
// A request is stopped (as an interrupt of that request alone) when its client asks, or when
// its client disconnects; the program goes on. The socket file is removed when the server stops
// (the interpreter is destroyed) and when the process is ended by SIGTERM, SIGHUP or SIGINT
// while they have their default action.
#pragma once
#include "interp/core/value.hpp"
#include <string>

namespace purple {

class Interp;

// Starts serving on PATH (replacing a stale socket a dead program left there). Throws a
// file-error when PATH is in use by a live server, is not a socket, or cannot be bound.
// Calling it again with the same PATH does nothing; with another PATH is an error.
void startAttachServer(Interp& in, const std::string& path);
// Stops the server of IN (closing its clients' connections) and removes its socket file.
void stopAttachServer(Interp& in);
// The socket IN serves on, or "".
std::string attachServerPath(Interp& in);
// On IN's thread, when it has nothing else to do (a REPL at its prompt, serve-kernel): waits up
// to SECONDS for a request and runs the ones that came. Returns how many ran.
int serveAttachedClients(Interp& in, double seconds);
// What %display-hook is while a request runs: (show x) in a client's code sends X's
// representations (a Purple list) to that client.
void attachDisplay(Interp& in, Value reps, Value id, bool update);

}  // namespace purple
