// How the purple command shows values that are pictures (plots, images): a terminal cannot, so
// they are written to files whose paths are printed.
#pragma once
#include <purple/purple.hpp>
#include <string>

namespace purple::repl {

// Prints BUNDLE on standard output: its text/plain, and for a picture (image/png, image/svg+xml)
// the file it was written to, in $PURPLE_FIGURE_DIR (default $TMPDIR/purple-figures).
void showOnTerminal(const MimeBundle& bundle);

}  // namespace purple::repl
