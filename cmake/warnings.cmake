# The warnings of Purple's own files (issue 31): every target the project compiles gets -Wall,
# -Wextra and -Wundef through purple_warnings(). LibTorch's, CPython's, xeus' and doctest's
# headers come in as system headers, so what is reported is ours. CI builds with
# -DPURPLE_WERROR=ON (scripts/test.sh), which makes each warning an error.
#
# -Wundef: a version macro used without its header reads as 0 and picks the wrong branch
# silently (interp/platform/torch_compat.hpp).
option(PURPLE_WERROR "Treat warnings in Purple's own files as errors (CI turns it on)" OFF)
set(PURPLE_WARNING_FLAGS -Wall -Wextra -Wundef)
function(purple_warnings target)
  target_compile_options(${target} PRIVATE ${PURPLE_WARNING_FLAGS} $<$<BOOL:${PURPLE_WERROR}>:-Werror>)
endfunction()
