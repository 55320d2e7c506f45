;;; Interpreter workloads, Guile side (same work as interp.purple and interp.py).
;;; Run: guile [--no-auto-compile] bench/interp/interp.scm WORKLOAD [SIZE]
;;; Prints "WORK ...", "RESULT name seconds checksum" (wall clock, timed region only) and
;;; "CPU name seconds" (processor time of the same region).

(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))

(define (tak x y z)
  (if (not (< y x)) z
      (tak (tak (- x 1) y z) (tak (- y 1) z x) (tak (- z 1) x y))))

(define (build-list n)
  (let loop ((i (- n 1)) (acc '()))
    (if (< i 0) acc (loop (- i 1) (cons i acc)))))
(define (sum-list l)
  (let loop ((l l) (s 0))
    (if (null? l) s (loop (cdr l) (+ s (car l))))))
(define (list-bench n reps)
  (let loop ((r 0) (total 0))
    (if (= r reps) total (loop (+ r 1) (+ total (sum-list (build-list n)))))))

(define (make-adder k) (lambda (x) (+ x k)))
(define (closure-bench n)
  (let ((xs (build-list 1000)))
    (let loop ((k 0) (total 0))
      (if (= k n) total
          (loop (+ k 1)
                (+ total (car (map (lambda (y) (* 2 y)) (map (make-adder k) xs)))))))))

(define (symbol-hash-bench n)
  (let ((h (make-hash-table)))
    (let loop ((i 0) (keys '()))
      (if (< i n)
          (let ((k (string->symbol (string-append "k" (number->string i)))))
            (hashq-set! h k i)
            (loop (+ i 1) (cons k keys)))
          (let sum ((ks keys) (s 0))
            (if (null? ks) s (sum (cdr ks) (+ s (hashq-ref h (car ks) 0)))))))))

(define args (cdr (command-line)))
(define workload (string->symbol (car args)))
(define size (if (pair? (cdr args)) (string->number (cadr args)) #f))

(define (run name work thunk)
  (display "WORK ") (display name) (display ": ") (display work) (newline)
  (let* ((c0 (get-internal-run-time))
         (t0 (get-internal-real-time))
         (r (thunk))
         (t1 (get-internal-real-time))
         (c1 (get-internal-run-time)))
    (display "RESULT ") (display name) (display " ")
    (display (exact->inexact (/ (- t1 t0) internal-time-units-per-second)))
    (display " ") (display r) (newline)
    (display "CPU ") (display name) (display " ")
    (display (exact->inexact (/ (- c1 c0) internal-time-units-per-second))) (newline)))

(case workload
  ((fib) (let ((n (or size 30)))
           (run "fib" (string-append "naive (fib " (number->string n) ")") (lambda () (fib n)))))
  ((tak) (let ((n (or size 10)))
           (run "tak" (string-append "(tak 18 12 6) " (number->string n) " times, summed")
                (lambda () (let loop ((i 0) (s 0)) (if (= i n) s (loop (+ i 1) (+ s (tak 18 12 6)))))))))
  ((list) (let ((n (or size 1000000)))
            (run "list" (string-append "cons a " (number->string n) "-element list and sum it, 5 times")
                 (lambda () (list-bench n 5)))))
  ((closure) (let ((n (or size 1000)))
               (run "closure" (string-append (number->string n) " x (map double (map (make-adder k) xs)), |xs| = 1000")
                    (lambda () (closure-bench n)))))
  ((symbol-hash) (let ((n (or size 200000)))
                   (run "symbol-hash" (string-append (number->string n) " symbol keys: intern, insert, look up, sum")
                        (lambda () (symbol-hash-bench n)))))
  (else (error "unknown workload" workload)))
