-- Run inside `nvim --headless` with a recipe of docs/editors.md as init.lua (tests/editors/neovim.py):
-- opens Purple files in PURPLE_NVIM_DIR and writes ok:/FAIL: lines to PURPLE_NVIM_OUT, then quits.
local dir = os.getenv('PURPLE_NVIM_DIR')
local lines = {}
local function check(name, ok, detail)
  table.insert(lines, (ok and 'ok: ' or 'FAIL: ') .. name .. (ok and '' or ('  ' .. vim.inspect(detail))))
end

local function clients_of(buf)
  if vim.lsp.get_clients then return vim.lsp.get_clients({ bufnr = buf }) end
  local list = {}
  for _, c in pairs(vim.lsp.buf_get_clients(buf)) do table.insert(list, c) end
  return list
end
local function all_clients()
  if vim.lsp.get_clients then return vim.lsp.get_clients() end
  return vim.lsp.get_active_clients()
end
local function attached(buf)
  return vim.wait(30000, function()
    local cs = clients_of(buf)
    return #cs > 0 and cs[1].initialized ~= false and cs[1].server_capabilities ~= nil
  end, 50)
end
local function position_params(buf, row, col)   -- row 1-based, col a byte index (0-based)
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_win_set_cursor(0, { row, col })
  local client = clients_of(buf)[1]
  return vim.lsp.util.make_position_params(0, client and client.offset_encoding or 'utf-16')
end
local function request(buf, method, params)
  local replies = vim.lsp.buf_request_sync(buf, method, params, 20000) or {}
  for _, r in pairs(replies) do
    if r.result then return r.result end
  end
  return nil
end

local ok, err = pcall(function()
  vim.cmd('edit ' .. dir .. '/a.purple')
  local a = vim.api.nvim_get_current_buf()
  check('an existing .purple file has filetype purple', vim.bo[a].filetype == 'purple', vim.bo[a].filetype)
  check('the language server attaches', attached(a), #clients_of(a))
  check('names with - are keywords', vim.bo[a].iskeyword:find('45') ~= nil, vim.bo[a].iskeyword)
  check('omnifunc is the language server', vim.bo[a].omnifunc == 'v:lua.vim.lsp.omnifunc', vim.bo[a].omnifunc)

  local got = vim.wait(30000, function() return #vim.diagnostic.get(a) > 0 end, 50)
  local diags = vim.diagnostic.get(a)
  check('diagnostics arrive', got, #diags)
  local first = vim.api.nvim_buf_get_lines(a, 0, 1, false)[1]
  local zz = nil
  for _, d in ipairs(diags) do
    if d.message:find('zz', 1, true) then zz = d end
  end
  local want = first:find('zz', 1, true) - 1
  check('the diagnostic for zz is at its column after an emoji (UTF-16 positions)',
        zz ~= nil and zz.lnum == 0 and zz.col == want and zz.end_col == want + 2,
        zz and { lnum = zz.lnum, col = zz.col, end_col = zz.end_col, want = want })
  local arity = nil
  for _, d in ipairs(diags) do
    if d.message:find('scale needs 2 arguments', 1, true) then arity = d end
  end
  check('the arity diagnostic is on line 3', arity ~= nil and arity.lnum == 2, arity)

  local third = vim.api.nvim_buf_get_lines(a, 2, 3, false)[1]
  local hover = request(a, 'textDocument/hover', position_params(a, 3, third:find('scale', 1, true)))
  local value = hover and hover.contents and (hover.contents.value or hover.contents) or ''
  check('hover shows the definition and its docstring',
        type(value) == 'string' and value:find('(scale x factor)', 1, true) ~= nil and value:find('Multiplies', 1, true) ~= nil, value)

  -- omni-completion of a hyphenated name: the keyword before the cursor is the whole prefix
  local row = vim.api.nvim_buf_line_count(a)
  local last = vim.api.nvim_buf_get_lines(a, row - 1, row, false)[1]
  vim.api.nvim_win_set_cursor(0, { row, #last })
  local start = vim.fn.match(last, '\\k*$')
  local prefix = last:sub(start + 1)
  check('the completion prefix is the whole hyphenated name', prefix == 'tensor-mat', prefix)
  local result = request(a, 'textDocument/completion', position_params(a, row, #last))
  local items = result and (result.items or result) or {}
  local labels = {}
  for _, item in ipairs(items) do
    if vim.startswith(item.label, prefix) then table.insert(labels, item.label) end
  end
  check('completion offers tensor-matmul for that prefix', vim.tbl_contains(labels, 'tensor-matmul'), labels)

  vim.cmd('edit ' .. dir .. '/b.purple')
  local b = vim.api.nvim_get_current_buf()
  check('a second file attaches', attached(b), #clients_of(b))
  check('... to the same server (one for all buffers)', #all_clients() == 1, #all_clients())
  local kw = vim.api.nvim_buf_get_lines(b, 0, 1, false)[1]
  local keywords = request(b, 'textDocument/completion', position_params(b, 1, #kw))
  local klabels = {}
  for _, item in ipairs(keywords and (keywords.items or keywords) or {}) do table.insert(klabels, item.label) end
  check('after : in a call, its keyword arguments', vim.tbl_contains(klabels, ':bias'), klabels)

  vim.cmd('edit ' .. dir .. '/new.purple')
  local c = vim.api.nvim_get_current_buf()
  check('a new .purple file has filetype purple', vim.bo[c].filetype == 'purple', vim.bo[c].filetype)
  check('... and the server', attached(c), #clients_of(c))
  check('... still one server', #all_clients() == 1, #all_clients())
end)
check('the test ran to its end', ok, err)
local f = io.open(os.getenv('PURPLE_NVIM_OUT'), 'w')
f:write(table.concat(lines, '\n') .. '\n')
f:close()
vim.cmd('qa!')
