// doctest for a unit test that includes LibTorch: include it after every other header.
// LibTorch's c10/util/Logging.h defines CHECK (and CHECK_EQ ...) as fatal assertions, and its
// CHECK replaces doctest's when it comes later: a failing check would then abort the whole
// binary instead of being reported, and the checks that pass are not counted.
#pragma once
#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_GT
#undef CHECK_LE
#undef CHECK_GE
#include <doctest/doctest.h>
