;;; purple-mode-tests.el --- ERT tests of editors/emacs/purple-mode.el  -*- lexical-binding: t; -*-

;; Run: emacs --batch -L editors/emacs -l tests/editors/purple-mode-tests.el \
;;        --eval '(purple-tests-run "build/purple")'
;; Indentation, the inferior REPL (comint), eldoc from Purple's documentation, and the language
;; server through eglot (Debian's elpa-eglot): diagnostics, hover, completion, definition.

(require 'ert)
(require 'purple-mode)

(defun purple-tests--wait-for (predicate seconds)
  "Wait until PREDICATE returns true, at most SECONDS; return its value."
  (let ((deadline (+ (float-time) seconds)) (value nil))
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.1))
    value))

(ert-deftest purple-mode-is-chosen-for-purple-files ()
  (let ((file (make-temp-file "purple-test" nil ".purple")))
    (unwind-protect
        (with-current-buffer (find-file-noselect file)
          (should (eq major-mode 'purple-mode))
          (kill-buffer))
      (delete-file file))))

(ert-deftest purple-mode-indents-special-forms ()
  (let ((expected "(define-module (mlp in hidden out)
  (submodules (fc1 (linear in hidden))
              (fc2 (linear hidden out)))
  (forward (x)
    (fc2 (relu (fc1 x)))))
(with-grad
  (backward loss))
(with-optimizer opt
  (optimizer-step))
(define/shapes (f [x (B 4)])
  (tensor-sum x))
(guard (e (#t #f))
  (car '()))
"))
    (with-temp-buffer
      (purple-mode)
      (insert (replace-regexp-in-string "^ +" "" expected))
      (indent-region (point-min) (point-max))
      (should (equal (buffer-string) expected)))))

(ert-deftest purple-mode-sends-code-to-the-repl ()
  (let ((purple-repl-buffer-name "*purple-test*"))
    (unwind-protect
        (with-temp-buffer
          (purple-mode)
          (insert "(define answer-base 41)\n(display (list 'answer (+ answer-base 1)))\n")
          (goto-char (point-min))
          (purple-send-definition)
          (purple-send-region (line-beginning-position 2) (point-max))
          (should (purple-tests--wait-for
                   (lambda () (with-current-buffer purple-repl-buffer-name
                                (string-match-p "(answer 42)" (buffer-string))))
                   60))
          (erase-buffer)
          (insert "(display \"whole buffer\")\n")
          (purple-send-buffer)
          (should (purple-tests--wait-for
                   (lambda () (with-current-buffer purple-repl-buffer-name
                                (string-match-p "whole buffer" (buffer-string))))
                   60)))
      (let ((process (get-buffer-process purple-repl-buffer-name)))
        (when process (delete-process process))))))

(ert-deftest purple-mode-attaches-to-a-running-program ()
  (let* ((dir (make-temp-file "purple-attach" t))
         (socket (expand-file-name "job.sock" dir))
         (script (expand-file-name "job.purple" dir))
         (job nil)
         (source (generate-new-buffer "job-source")))
    (with-temp-file script
      (insert "(define done #f)\n(define (report) 'original)\n"
              "(let loop () (serve-repl-wait 0.05) (unless done (loop)))\n"
              "(display (list 'finally (report)))\n"))
    (unwind-protect
        (progn
          (setq job (start-process "purple-job" "*purple-job*" purple-program "--listen" socket script))
          (should (purple-tests--wait-for (lambda () (file-exists-p socket)) 60))
          (with-current-buffer source
            (purple-mode)
            (purple-attach socket)
            (set-buffer source)
            (should (equal purple-repl-buffer-name "*purple-attach job.sock*"))
            ;; C-c C-c on a definition redefines it inside the running program
            (insert "(define (report) 'redefined-from-emacs)\n")
            (goto-char (point-min))
            (purple-send-definition)
            (purple-send-string "(list 'inside (report))"))
          (should (purple-tests--wait-for
                   (lambda () (with-current-buffer "*purple-attach job.sock*"
                                (string-match-p "(inside redefined-from-emacs)" (buffer-string))))
                   60))
          (with-current-buffer source (purple-send-string "(set! done #t)"))
          (should (purple-tests--wait-for (lambda () (not (process-live-p job))) 60))
          (should (string-match-p "(finally redefined-from-emacs)"
                                  (with-current-buffer "*purple-job*" (buffer-string))))
          (should-not (file-exists-p socket)))
      (dolist (b (list "*purple-attach job.sock*" "*purple-job*"))
        (let ((p (get-buffer-process b))) (when p (delete-process p))))
      (kill-buffer source)
      (delete-directory dir t))))

(ert-deftest purple-mode-eldoc-shows-documentation ()
  (clrhash purple--documentation-cache)
  (should (string-match-p "matrix product" (purple-documentation "tensor-matmul")))
  (should-not (purple-documentation "no-such-purple-name"))
  (with-temp-buffer
    (purple-mode)
    (insert "(tensor-matmul a ")
    (should (string-match-p "matrix product" (purple-eldoc-function)))))

(ert-deftest purple-mode-eglot-talks-to-the-language-server ()
  (require 'eglot)
  (let* ((dir (make-temp-file "purple-eglot" t))
         (file (expand-file-name "sample.purple" dir)))
    (with-temp-file file
      (insert "(define (scale x factor) (* x factor))\n(display (scale 2))\n(display (tensor-matmul (tensor-zeros 2 3) (tensor-zeros 4 5)))\n"))
    (unwind-protect
        (with-current-buffer (find-file-noselect file)
          (should (eq major-mode 'purple-mode))
          (apply #'eglot (eglot--guess-contact))
          (should (purple-tests--wait-for #'eglot-current-server 60))
          ;; diagnostics from purple check, through flymake
          ;; (flymake checks on idle timers, which a batch Emacs does not fire by itself)
          (should (purple-tests--wait-for
                   (lambda () (flymake-start) (>= (length (flymake-diagnostics)) 2))
                   60))
          (let ((texts (mapcar #'flymake-diagnostic-text (flymake-diagnostics))))
            (should (seq-some (lambda (s) (string-match-p "scale needs 2 arguments" s)) texts))
            (should (seq-some (lambda (s) (string-match-p "tensor-matmul: cannot multiply" s)) texts)))
          ;; hover on tensor-matmul (line 3)
          (goto-char (point-min))
          (search-forward "tensor-matmul")
          (let* ((server (eglot-current-server))
                 (hover (jsonrpc-request server :textDocument/hover (eglot--TextDocumentPositionParams))))
            (should (string-match-p "matrix product" (plist-get (plist-get hover :contents) :value))))
          ;; completion of a prefix
          (goto-char (point-max))
          (insert "(tensor-mat")
          (eglot--signal-textDocument/didChange)
          (let* ((items (plist-get (jsonrpc-request (eglot-current-server) :textDocument/completion
                                                    (eglot--TextDocumentPositionParams))
                                   :items))
                 (labels (mapcar (lambda (i) (plist-get i :label)) items)))
            (should (member "tensor-matmul" labels)))
          ;; go to definition of scale (line 2) lands on line 1
          (goto-char (point-min))
          (search-forward "(scale 2")
          (backward-char 3)
          (let ((location (jsonrpc-request (eglot-current-server) :textDocument/definition
                                           (eglot--TextDocumentPositionParams))))
            (should (= 0 (plist-get (plist-get (plist-get location :range) :start) :line))))
          (eglot-shutdown (eglot-current-server))
          (set-buffer-modified-p nil)
          (kill-buffer))
      (delete-directory dir t))))

(defun purple-tests-run (purple)
  "Run every test with PURPLE as the `purple' command, then exit Emacs with the result."
  (setq purple-program (expand-file-name purple))
  ;; Debian's elpa-eglot is on the load path through the site start files (so no -Q)
  (require 'eglot)
  (add-to-list 'eglot-server-programs `(purple-mode . (,purple-program "--lsp")))
  (ert-run-tests-batch-and-exit))

;;; purple-mode-tests.el ends here
