;;; Purple's prelude for ecraven/r7rs-benchmarks (prepended to each program, as the suite's
;;; own src/<System>-prelude.scm files are). Purple reads the programs as written: their
;;; `(import (scheme base) ...)` lines and the common harness need nothing else.
(define (this-scheme-implementation-name) "purple")
