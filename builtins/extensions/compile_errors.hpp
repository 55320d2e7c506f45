// A failed compile as a Purple error: the part of the compiler's output worth reading in an error
// message (the lines about the user's own files and every error line, with the source excerpt the
// compiler printed under each), the whole output kept in a log file the message names.
#pragma once
#include <string>
#include <vector>

namespace purple::extensions {

// From OUTPUT, the lines that name one of USER_FILES (as "file:" or "file("), say "error" or hold
// one of ALSO_KEEP, each followed by the compiler's excerpt lines ("    3 |   return x +;"), at
// most MAX_LINES of them; the first lines of OUTPUT when none match.
std::string compilerOutputSummary(const std::string& output, const std::vector<std::string>& userFiles,
                                  const std::vector<std::string>& alsoKeep = {}, size_t maxLines = 24);

// NVRTC writes "name.cu(3): error: ..."; this gives "name.cu:3: error: ...", the form gcc, nvcc's
// host compiler and editors use, for each line that starts with FILE.
std::string colonLineNumbers(const std::string& log, const std::string& file);

// Throws a compile-error: "WHO: compiling WHAT failed:\nSUMMARY", with LOG_PATH (when not empty)
// named at the end and given as the irritant.
[[noreturn]] void throwCompileError(const std::string& who, const std::string& what, const std::string& summary,
                                    const std::string& logPath);

}  // namespace purple::extensions
