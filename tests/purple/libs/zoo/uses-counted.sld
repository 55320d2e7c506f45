;; A library that imports another found under the same root (tests/purple/libs).
(define-library (libs zoo uses-counted)
  (export twice-counted)
  (import (scheme base) (libs zoo counted))
  (begin (define (twice-counted) (* 2 counted-value))))
