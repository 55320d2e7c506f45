;; A user library for tests/check/bad/imports.purple, found on the path given with -I.
(define-library (shapes geometry)
  (export circle-area box-volume (rename geometry--area square-area))
  (import (scheme base))
  (begin
    (define geometry--pi-ish 3.14159)
    (define (circle-area r) (* geometry--pi-ish r r))
    (define (geometry--area side) (* side side))
    (define (box-volume w h d :key (scale 1)) (* w h d scale))))
