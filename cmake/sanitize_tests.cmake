# Under PURPLE_SANITIZE (docs/hardening.md), the tests of the calling directory run with the
# sanitizers' settings: the collector cannot see AddressSanitizer's fake stacks (so
# detect_stack_use_after_return stays off), LibTorch's allocations that live until exit are not
# leaks of ours, a report aborts the test, and a huge allocation fails as LibTorch expects. The
# instrumented code runs 2 to 5 times slower, so each test gets three times its time limit.
# PURPLE_SANITIZED=1 tells a test that what it measures (resident memory) includes the
# sanitizers' own: such a check is skipped there, with the reason printed.
function(purple_sanitize_tests)
  if(NOT PURPLE_SANITIZE)
    return()
  endif()
  get_property(tests DIRECTORY PROPERTY TESTS)
  if(NOT tests)
    return()
  endif()
  set_property(TEST ${tests} APPEND PROPERTY ENVIRONMENT
               "ASAN_OPTIONS=detect_stack_use_after_return=0:detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
               "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
               "PURPLE_SANITIZED=1")
  foreach(t ${tests})
    get_test_property(${t} TIMEOUT limit)
    if(NOT limit)
      set(limit 1500)
    endif()
    math(EXPR limit "${limit} * 3")
    set_tests_properties(${t} PROPERTIES TIMEOUT ${limit})
  endforeach()
endfunction()
