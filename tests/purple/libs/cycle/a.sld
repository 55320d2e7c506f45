;; (libs cycle a) imports (libs cycle b), which imports it back: a cycle, which import must report.
(define-library (libs cycle a)
  (export a-value)
  (import (scheme base) (libs cycle b))
  (begin (define a-value 1)))
