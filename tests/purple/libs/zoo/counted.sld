;; Loaded by tests/purple/libraries.purple: prints once each time its body is evaluated.
(define-library (libs zoo counted)
  (export counted-value)
  (import (scheme base) (scheme write))
  (begin
    (display "[zoo counted loaded]")
    (define counted-value 42)))
