;;; purple-mode.el --- Major mode for Purple, a Lisp with tensors  -*- lexical-binding: t; -*-

;; Keywords: languages, lisp
;; Package-Requires: ((emacs "27.1"))

;;; Commentary:

;; A major mode for Purple (.purple files), built on scheme-mode:
;; - indentation rules for Purple's special forms and syntax (define-module, with-grad ...);
;; - an inferior Purple REPL through comint: `run-purple' (C-c C-z), and sending the
;;   definition at point (C-M-x, C-c C-c), the region (C-c C-r) or the buffer (C-c C-b);
;; - `purple-attach' (C-c C-a): a REPL inside a running program (purple --listen SOCKET, or
;;   (serve-repl SOCKET) in it); the buffer's C-c C-c and friends then send there, so a
;;   redefinition changes what the running program does next (docs/attach.md);
;; - eldoc: the signature of the procedure being called, from Purple's own `documentation';
;; - the language server (`purple --lsp'): M-x eglot in a Purple buffer starts it.
;;
;; Install: (add-to-list 'load-path "/path/to/purple/editors/emacs") (require 'purple-mode)
;; docs/editors.md says more.

;;; Code:

(require 'scheme)
(require 'comint)
(require 'cl-lib)

(defgroup purple nil
  "Purple, a Lisp with tensors."
  :group 'languages)

(defcustom purple-program "purple"
  "The `purple' command: the REPL, the language server and eldoc's documentation come from it."
  :type 'string)

(defcustom purple-program-arguments '()
  "Arguments given to `purple-program' when the inferior REPL starts."
  :type '(repeat string))

;;;; Indentation

(defconst purple-indent-rules
  '((define-module . 1) (define/shapes . defun) (define-record-type . 1) (define-library . 1)
    (define-autograd-function . 1) (define-values . 1) (define-macro . 1)
    (with-grad . 0) (no-grad . 0) (enable-grad . 0) (inference-mode . 0) (with-detect-anomaly . 0)
    (with-tensor-scope . 0) (with-autocast . 0) (with-optimizer . 1) (with-averaged-model . 1)
    (parameterize . 1) (guard . 1) (receive . 2) (let-values . 1) (let*-values . 1)
    (case-lambda . 0) (named-lambda . 1) (when . 1) (unless . 1) (test-group . 1)
    (submodules . 0) (parameters . 0) (buffers . 0) (forward . 1) (backward . 1)
    (time . 0) (dynamic-wind . 0))
  "How many distinguished arguments each form takes (as `scheme-indent-function' reads them).")

(defun purple--install-indentation ()
  (dolist (rule purple-indent-rules)
    (put (car rule) 'scheme-indent-function (cdr rule))))

;;;; The inferior REPL

(defvar purple-repl-buffer-name "*purple*"
  "The buffer of the inferior Purple REPL.")

(define-derived-mode purple-repl-mode comint-mode "Purple REPL"
  "Major mode for the inferior Purple REPL."
  (setq-local comint-prompt-regexp "^purple> *")
  (setq-local comint-process-echoes nil))

(defvar-local purple--attached-socket nil
  "In a REPL buffer made by `purple-attach': the socket of the program it runs in.")

(defun purple--start-repl (buffer-name socket)
  "Start `purple' in BUFFER-NAME.
Attached to SOCKET when it is non-nil, else a REPL of its own."
  (let ((buffer (apply #'make-comint-in-buffer (if socket "purple-attach" "purple") buffer-name
                       purple-program nil
                       (if socket (list "--attach" socket) purple-program-arguments))))
    (with-current-buffer buffer
      (purple-repl-mode)
      (setq purple--attached-socket socket))
    buffer))

(defun purple-repl-process ()
  "The inferior Purple process, started when there is none.
A REPL that was attached to a program attaches again."
  (let ((buffer (get-buffer purple-repl-buffer-name)))
    (unless (comint-check-proc buffer)
      (setq buffer (purple--start-repl purple-repl-buffer-name
                                       (and buffer (buffer-local-value 'purple--attached-socket buffer)))))
    (get-buffer-process buffer)))

;;;###autoload
(defun purple-attach (socket)
  "Attach to the running Purple program that serves a REPL on SOCKET.
Start the program with `purple --listen SOCKET FILE', or call
\(serve-repl SOCKET) in it.  Forms typed in the attached REPL, and
those the current Purple buffer sends (\\[purple-send-definition],
\\[purple-send-region], \\[purple-send-buffer]), run inside that program
at its next safe point, with its globals, modules and optimizers: a
redefinition changes what it does next."
  (interactive (list (read-file-name "Socket of the running program: " nil nil t)))
  (let* ((socket (expand-file-name socket))
         (name (format "*purple-attach %s*" (file-name-nondirectory socket)))
         (buffer (get-buffer name)))
    (unless (comint-check-proc buffer)
      (setq buffer (purple--start-repl name socket)))
    (when (derived-mode-p 'purple-mode)
      (setq-local purple-repl-buffer-name name))
    (pop-to-buffer buffer)))

;;;###autoload
(defun run-purple ()
  "Start the inferior Purple REPL (or go to it)."
  (interactive)
  (purple-repl-process)
  (pop-to-buffer purple-repl-buffer-name))

(defun purple-send-string (text)
  "Send TEXT to the inferior REPL, which evaluates it."
  (let ((process (purple-repl-process)))
    (comint-send-string process (concat (string-trim-right text) "\n"))))

(defun purple-send-region (start end)
  "Send the region from START to END to the inferior REPL."
  (interactive "r")
  (purple-send-string (buffer-substring-no-properties start end)))

(defun purple-send-definition ()
  "Send the top-level form around point to the inferior REPL."
  (interactive)
  (save-excursion
    (end-of-defun)
    (let ((end (point)))
      (beginning-of-defun)
      (purple-send-region (point) end))))

(defun purple-send-buffer ()
  "Send the whole buffer to the inferior REPL."
  (interactive)
  (purple-send-region (point-min) (point-max)))

;;;; Eldoc

(defvar purple--documentation-cache (make-hash-table :test 'equal)
  "Name -> first line of its documentation (or nil), as `purple' gave it.")

(defun purple-documentation (name)
  "The signature and first documentation line of NAME, from Purple's `documentation'; cached."
  (let ((cached (gethash name purple--documentation-cache 'none)))
    (if (not (eq cached 'none))
        cached
      (let ((text
             (and (string-match-p "\\`[^\"'`,;() \t\n]+\\'" name)
                  (with-temp-buffer
                    (when (eql 0 (ignore-errors
                                   (call-process purple-program nil t nil "-e"
                                                 (format "(display (documentation '%s))" name))))
                      ;; the signature line, then the first line of the docstring
                      (let* ((lines (split-string (buffer-string) "\n" t "[ \t]+"))
                             (first (car lines)))
                        (and first (not (string-match-p "\\(no documentation\\|unbound\\|not bound\\|not defined\\)" first))
                             (if (cadr lines) (concat first "  " (cadr lines)) first))))))))
        (puthash name text purple--documentation-cache)
        text))))

(defun purple--called-name ()
  "The name of the procedure whose call point is in, or nil."
  (save-excursion
    (ignore-errors
      (let ((ppss (syntax-ppss)))
        (when (nth 1 ppss)
          (goto-char (1+ (nth 1 ppss)))
          (let ((symbol (thing-at-point 'symbol t)))
            symbol))))))

(defun purple-eldoc-function (&rest _)
  "Eldoc: the documentation line of the call around point."
  (let ((name (or (purple--called-name) (thing-at-point 'symbol t))))
    (and name (purple-documentation name))))

;;;; The mode

(defvar purple-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-M-x") #'purple-send-definition)
    (define-key map (kbd "C-c C-c") #'purple-send-definition)
    (define-key map (kbd "C-c C-r") #'purple-send-region)
    (define-key map (kbd "C-c C-b") #'purple-send-buffer)
    (define-key map (kbd "C-c C-z") #'run-purple)
    (define-key map (kbd "C-c C-a") #'purple-attach)
    map)
  "Keys of `purple-mode'.")

;;;###autoload
(define-derived-mode purple-mode scheme-mode "Purple"
  "Major mode for Purple source.
\\{purple-mode-map}"
  (purple--install-indentation)
  (setq-local comment-start ";")
  (setq-local indent-tabs-mode nil)
  (if (boundp 'eldoc-documentation-functions)
      (add-hook 'eldoc-documentation-functions #'purple-eldoc-function nil t)
    (setq-local eldoc-documentation-function #'purple-eldoc-function)))

;;;###autoload
(add-to-list 'auto-mode-alist '("\\.purple\\'" . purple-mode))

;; The language server: M-x eglot in a Purple buffer runs `purple --lsp'.
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs `(purple-mode . (,purple-program "--lsp"))))

(provide 'purple-mode)
;;; purple-mode.el ends here
