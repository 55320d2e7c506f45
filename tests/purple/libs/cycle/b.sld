(define-library (libs cycle b)
  (export b-value)
  (import (scheme base) (libs cycle a))
  (begin (define b-value 2)))
