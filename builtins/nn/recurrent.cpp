// Recurrent layers and sequences: rnn, lstm, gru (LibTorch's layers), rnn-cell, lstm-cell,
// gru-cell, and padded / packed sequences (pad-sequence, pack-padded-sequence,
// pad-packed-sequence, pack-sequence, unpack-sequence, unpad-sequence). A packed sequence is
// a value of its own (torch.nn.utils.rnn.PackedSequence); rnn, lstm and gru take one in place
// of a padded batch and return one.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"

namespace purple {
namespace nnlayer {

namespace {

using torch::nn::utils::rnn::PackedSequence;

// ---- packed sequence values -------------------------------------------------------------------

struct PackedBox {
  PackedSequence seq;
};
void destroyPacked(void* p) { delete static_cast<PackedBox*>(p); }

Value wrapPacked(PackedSequence s) { return makeForeign(new PackedBox{std::move(s)}, destroyPacked, intern("packed-sequence")); }
bool isPacked(Value v) { return v.is(Kind::Foreign) && v.as<Foreign>()->destroy == destroyPacked && v.as<Foreign>()->ptr; }
const PackedSequence& packedArg(Value v, const std::string& who, int i) {
  if (!isPacked(v)) throwTypeError(who, i, "a packed sequence", v);
  return static_cast<PackedBox*>(v.as<Foreign>()->ptr)->seq;
}

Value list2(Value a, Value b) {
  Value items[2] = {a, b};
  return listFromArray(items, 2);
}

std::vector<at::Tensor> tensorsArg(Value v, const std::string& who, int i) {
  std::vector<at::Tensor> out;
  auto one = [&](Value x) { out.push_back(tensorArg(x, who, i)); };
  if (v.is(Kind::Vector)) {
    for (uint32_t k = 0; k < v.as<Vector>()->extra; k++) one(v.as<Vector>()->items[k]);
  } else if (isList(v)) {
    for (Value p = v; isPair(p); p = cdr(p)) one(car(p));
  } else {
    throwTypeError(who, i, "a list of tensors", v);
  }
  if (out.empty()) throwError("value-error", who + ": needs at least one sequence");
  return out;
}

// Lengths as Python takes them: a list of integers or a 1-d tensor (moved to the CPU as int64).
at::Tensor lengthsArg(Value v, const std::string& who, int i) {
  if (isTensor(v)) {
    const at::Tensor& t = tensorArg(v, who, i);
    if (t.dim() != 1 || t.is_floating_point()) throwError("value-error", who + ": lengths must be a 1-d integer tensor or a list of integers");
    return t.to(at::kCPU, at::kLong);
  }
  IntList l = intsArg(v, who, i);
  return at::tensor(l, at::kLong);
}

// ---- Python's reprs -----------------------------------------------------------------------------

std::string rnnRepr(const torch::nn::detail::RNNOptionsBase& o) {
  std::string s = std::to_string(o.input_size()) + ", " + std::to_string(o.hidden_size());
  if (o.proj_size() != 0) s += ", proj_size=" + std::to_string(o.proj_size());
  if (o.num_layers() != 1) s += ", num_layers=" + std::to_string(o.num_layers());
  if (!o.bias()) s += ", bias=False";
  if (o.batch_first()) s += ", batch_first=True";
  if (o.dropout() != 0) s += ", dropout=" + pyFloat(o.dropout());
  if (o.bidirectional()) s += ", bidirectional=True";
  return s;
}

std::string cellRepr(const torch::nn::detail::RNNCellOptionsBase& o, const std::string& nonlinearity) {
  std::string s = std::to_string(o.input_size()) + ", " + std::to_string(o.hidden_size());
  if (!o.bias()) s += ", bias=False";
  if (!nonlinearity.empty() && nonlinearity != "tanh") s += ", nonlinearity=" + nonlinearity;
  return s;
}

// ---- rnn, lstm, gru -------------------------------------------------------------------------------

// Python accepts unbatched input, (L, H-in) with an (layers, H) state; LibTorch wants a batch.
struct Unbatched {
  bool on = false;
  int64_t batchDim = 1;
};

Unbatched unbatched(const at::Tensor& x, bool batchFirst, const std::string& who) {
  if (x.dim() == 3) return {false, batchFirst ? 0 : 1};
  if (x.dim() == 2) return {true, batchFirst ? 0 : 1};
  throwError("value-error", who + ": input must be (L, N, H-in), (N, L, H-in) with :batch-first #t, or unbatched (L, H-in); got shape " +
                                pyTuple(x.sizes()));
}

at::Tensor hiddenIn(const Unbatched& u, const at::Tensor& h, const std::string& who) {
  if (!u.on || !h.defined()) return h;
  if (h.dim() != 2) throwError("value-error", who + ": for unbatched input the hidden state must be 2-d, got shape " + pyTuple(h.sizes()));
  return h.unsqueeze(1);
}
// Results are taken by value and moved out of LibTorch's tuples, so the wrapped tensor is the only
// owner of its storage and the tensor collector counts its bytes (wrapTensor counts sole-owned
// storage only): an LSTM cell's states left uncounted in a loop of 1,000 steps kept 160 MB a
// forward pass alive until an unprompted collection. `return h;` moves the parameter out;
// `u.on ? ... : h` would copy it, and the parameter lives on (until the end of the caller's
// full expression) while wrapTensor counts the result's owners.
at::Tensor hiddenOut(const Unbatched& u, at::Tensor h) {
  if (u.on) return h.squeeze(1);
  return h;
}

// rnn and gru: (m x [h0]) -> (output h-n); x may be a packed sequence.
template <class Impl>
struct RecurrentLayer : Impl, ModuleForward {
  using Impl::Impl;
  std::string tname;
  std::string typeName() const override { return tname; }
  bool returnsNewValues() const override { return true; }
  void pretty_print(std::ostream& s) const override { s << tname << "(" << rnnRepr(this->options_base) << ")"; }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc < 1 || argc > 2) throwError("arity-error", tname + ": forward takes an input and an optional hidden state");
    at::Tensor h = argc == 2 ? optTensor(argv[1], tname, 2) : at::Tensor();
    if (isPacked(argv[0])) {
      auto r = Impl::forward_with_packed_input(packedArg(argv[0], tname, 1), h);
      return list2(wrapPacked(std::get<0>(r)), wrapTensor(std::move(std::get<1>(r))));
    }
    const at::Tensor& x = tensorIn(argv[0], tname, 1);
    Unbatched u = unbatched(x, this->options_base.batch_first(), tname);
    auto r = Impl::forward(u.on ? x.unsqueeze(u.batchDim) : x, hiddenIn(u, h, tname));
    at::Tensor out = std::get<0>(r), hn = std::get<1>(r);
    r = {};   // the squeezed views below must be their storage's only owners when wrapped
    if (u.on) out = out.squeeze(u.batchDim);
    hn = hiddenOut(u, std::move(hn));
    return list2(wrapTensor(std::move(out)), wrapTensor(std::move(hn)));
  }
};

// lstm: (m x [(h0 c0)]) -> (output (h-n c-n))
struct LstmLayer : torch::nn::LSTMImpl, ModuleForward {
  using torch::nn::LSTMImpl::LSTMImpl;
  std::string typeName() const override { return "LSTM"; }
  bool returnsNewValues() const override { return true; }
  void pretty_print(std::ostream& s) const override { s << "LSTM(" << rnnRepr(options_base) << ")"; }
  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string who = "LSTM";
    if (argc < 1 || argc > 2) throwError("arity-error", "LSTM: forward takes an input and an optional (h0 c0) list");
    c10::optional<std::tuple<at::Tensor, at::Tensor>> hx;
    at::Tensor h0, c0;
    if (argc == 2 && !argv[1].isFalse()) {
      Value s = argv[1];
      if (!isPair(s) || !isPair(cdr(s)) || !cddr(s).isNil()) throwTypeError(who, 2, "a list (h0 c0)", s);
      h0 = tensorIn(car(s), who, 2);
      c0 = tensorIn(cadr(s), who, 2);
    }
    auto state = [](std::tuple<at::Tensor, at::Tensor> hc, const Unbatched& u) {
      at::Tensor h = std::get<0>(hc), c = std::get<1>(hc);
      hc = {};
      h = hiddenOut(u, std::move(h));
      c = hiddenOut(u, std::move(c));
      return list2(wrapTensor(std::move(h)), wrapTensor(std::move(c)));
    };
    if (isPacked(argv[0])) {
      if (h0.defined()) hx = std::make_tuple(h0, c0);
      auto r = forward_with_packed_input(packedArg(argv[0], who, 1), hx);
      return list2(wrapPacked(std::get<0>(r)), state(std::move(std::get<1>(r)), Unbatched{}));
    }
    const at::Tensor& x = tensorIn(argv[0], who, 1);
    Unbatched u = unbatched(x, options_base.batch_first(), who);
    if (h0.defined()) hx = std::make_tuple(hiddenIn(u, h0, who), hiddenIn(u, c0, who));
    auto r = torch::nn::LSTMImpl::forward(u.on ? x.unsqueeze(u.batchDim) : x, hx);
    at::Tensor out = std::get<0>(r);
    std::tuple<at::Tensor, at::Tensor> hc = std::get<1>(r);
    r = {};
    if (u.on) out = out.squeeze(u.batchDim);
    Value outValue = wrapTensor(std::move(out));
    return list2(outValue, state(std::move(hc), u));
  }
};

// ---- cells ------------------------------------------------------------------------------------

// Cells take (N, H-in) or unbatched (H-in) input.
void checkCellInput(const at::Tensor& x, const std::string& who) {
  if (x.dim() != 1 && x.dim() != 2)
    throwError("value-error", who + ": input must be (N, H-in) or unbatched (H-in), got shape " + pyTuple(x.sizes()));
}
at::Tensor batched(const at::Tensor& t, bool unbatched) { return unbatched && t.defined() ? t.unsqueeze(0) : t; }
at::Tensor unbatch(at::Tensor t, bool unbatched) {   // returns T itself as hiddenOut does
  if (unbatched) return t.squeeze(0);
  return t;
}

// rnn-cell and gru-cell: (cell x [h]) -> h'
template <class Impl>
struct CellLayer : Impl, ModuleForward {
  using Impl::Impl;
  std::string tname, nonlinearity;
  std::string typeName() const override { return tname; }
  void pretty_print(std::ostream& s) const override { s << tname << "(" << cellRepr(this->options_base, nonlinearity) << ")"; }
  at::Tensor run(const at::Tensor& x, const at::Tensor& h) {
    checkCellInput(x, tname);
    bool u = x.dim() == 1;
    return unbatch(Impl::forward(batched(x, u), batched(h, u)), u);
  }
  Value forward(Interp&, const Value* argv, int argc) override {
    if (argc < 1 || argc > 2) throwError("arity-error", tname + ": forward takes an input and an optional hidden state");
    return wrapTensor(run(tensorIn(argv[0], tname, 1), argc == 2 ? optTensor(argv[1], tname, 2) : at::Tensor()));
  }
  bool hasTensorForward() const override { return true; }
  at::Tensor tensorForward(const at::Tensor& x) override { return run(x, at::Tensor()); }
};

// lstm-cell: (cell x [(h c)]) -> (h' c')
struct LstmCellLayer : torch::nn::LSTMCellImpl, ModuleForward {
  using torch::nn::LSTMCellImpl::LSTMCellImpl;
  std::string typeName() const override { return "LSTMCell"; }
  bool returnsNewValues() const override { return true; }
  void pretty_print(std::ostream& s) const override { s << "LSTMCell(" << cellRepr(options_base, "") << ")"; }
  Value forward(Interp&, const Value* argv, int argc) override {
    const std::string who = "LSTMCell";
    if (argc < 1 || argc > 2) throwError("arity-error", "LSTMCell: forward takes an input and an optional (h c) list");
    const at::Tensor& x = tensorIn(argv[0], who, 1);
    checkCellInput(x, who);
    bool u = x.dim() == 1;
    c10::optional<std::tuple<at::Tensor, at::Tensor>> hx;
    if (argc == 2 && !argv[1].isFalse()) {
      Value s = argv[1];
      if (!isPair(s) || !isPair(cdr(s)) || !cddr(s).isNil()) throwTypeError(who, 2, "a list (h c)", s);
      hx = std::make_tuple(batched(tensorIn(car(s), who, 2), u), batched(tensorIn(cadr(s), who, 2), u));
    }
    auto r = torch::nn::LSTMCellImpl::forward(batched(x, u), hx);
    at::Tensor h = std::get<0>(r), c = std::get<1>(r);
    r = {};   // unbatched, h and c are views: the tuple must not share their storage when wrapped
    h = unbatch(std::move(h), u);
    c = unbatch(std::move(c), u);
    return list2(wrapTensor(std::move(h)), wrapTensor(std::move(c)));
  }
};

}  // namespace

void registerRecurrent(Registry& r) {
  auto rnnCommon = [](auto& o, int64_t layers, bool bias, bool batchFirst, double dropout, bool bidirectional) {
    o.num_layers(layers).bias(bias).batch_first(batchFirst).dropout(dropout).bidirectional(bidirectional);
  };
  const char* seqDoc =
      " Input is (L, N, H-in), (N, L, H-in) with :batch-first #t, unbatched (L, H-in), or a packed sequence "
      "(pack-padded-sequence), in which case the output is packed too. :dropout applies between layers in "
      "training mode.";
  r.def("rnn", "(input-size hidden-size :key (num-layers 1) (nonlinearity \"tanh\") (bias #t) (batch-first #f) (dropout 0.0) (bidirectional #f))",
        [rnnCommon](int64_t in, int64_t hidden, int64_t layers, Value nl, bool bias, bool bf, double dropout, bool bi) {
          torch::nn::RNNOptions o(in, hidden);
          rnnCommon(o, layers, bias, bf, dropout, bi);
          if (!nl.isMissing() && choiceArg(nl, "rnn", ":nonlinearity", {"tanh", "relu"}) == "relu") o.nonlinearity(torch::kReLU);
          auto m = std::make_shared<RecurrentLayer<torch::nn::RNNImpl>>(o);
          m->tname = "RNN";
          return wrapModule(m);
        },
        std::string("An Elman RNN module (torch.nn.RNN). (m x [h0]) returns (output h-n); h0 is (layers * "
                    "directions, N, H).") + seqDoc);
  r.def("lstm", "(input-size hidden-size :key (num-layers 1) (bias #t) (batch-first #f) (dropout 0.0) (bidirectional #f) (proj-size 0))",
        [rnnCommon](int64_t in, int64_t hidden, int64_t layers, bool bias, bool bf, double dropout, bool bi, int64_t proj) {
          torch::nn::LSTMOptions o(in, hidden);
          rnnCommon(o, layers, bias, bf, dropout, bi);
          o.proj_size(proj);
          return wrapModule(std::make_shared<LstmLayer>(o));
        },
        std::string("An LSTM module (torch.nn.LSTM). (m x [(h0 c0)]) returns (output (h-n c-n)); :proj-size projects "
                    "the hidden state.") + seqDoc);
  r.def("gru", "(input-size hidden-size :key (num-layers 1) (bias #t) (batch-first #f) (dropout 0.0) (bidirectional #f))",
        [rnnCommon](int64_t in, int64_t hidden, int64_t layers, bool bias, bool bf, double dropout, bool bi) {
          torch::nn::GRUOptions o(in, hidden);
          rnnCommon(o, layers, bias, bf, dropout, bi);
          auto m = std::make_shared<RecurrentLayer<torch::nn::GRUImpl>>(o);
          m->tname = "GRU";
          return wrapModule(m);
        },
        std::string("A GRU module (torch.nn.GRU). (m x [h0]) returns (output h-n).") + seqDoc);

  r.def("rnn-cell", "(input-size hidden-size :key (bias #t) (nonlinearity \"tanh\"))",
        [](int64_t in, int64_t hidden, bool bias, Value nl) {
          torch::nn::RNNCellOptions o(in, hidden);
          o.bias(bias);
          std::string n = nl.isMissing() ? "tanh" : choiceArg(nl, "rnn-cell", ":nonlinearity", {"tanh", "relu"});
          if (n == "relu") o.nonlinearity(torch::kReLU);
          auto m = std::make_shared<CellLayer<torch::nn::RNNCellImpl>>(o);
          m->tname = "RNNCell";
          m->nonlinearity = n;
          return wrapModule(m);
        },
        "An Elman RNN cell (torch.nn.RNNCell): one step h' = tanh(x W-ih^T + b-ih + h W-hh^T + b-hh) (or relu). "
        "(cell x [h]) returns h'; X is (N, H-in) or unbatched (H-in); H defaults to zeros.");
  r.def("lstm-cell", "(input-size hidden-size :key (bias #t))",
        [](int64_t in, int64_t hidden, bool bias) {
          return wrapModule(std::make_shared<LstmCellLayer>(torch::nn::LSTMCellOptions(in, hidden).bias(bias)));
        },
        "An LSTM cell (torch.nn.LSTMCell): one step of an LSTM. (cell x [(h c)]) returns (h' c'); X is (N, H-in) or "
        "unbatched (H-in); the state defaults to zeros.");
  r.def("gru-cell", "(input-size hidden-size :key (bias #t))",
        [](int64_t in, int64_t hidden, bool bias) {
          auto m = std::make_shared<CellLayer<torch::nn::GRUCellImpl>>(torch::nn::GRUCellOptions(in, hidden).bias(bias));
          m->tname = "GRUCell";
          return wrapModule(m);
        },
        "A GRU cell (torch.nn.GRUCell): one step of a GRU. (cell x [h]) returns h'; X is (N, H-in) or unbatched "
        "(H-in); H defaults to zeros.");

  // ---- sequences ----
  r.def("pad-sequence", "(sequences :key (batch-first #f) (padding-value 0.0) (padding-side \"right\"))",
        [](Value seqs, bool batchFirst, double value, Value side) {
          const std::string who = "pad-sequence";
          std::vector<at::Tensor> ts = tensorsArg(seqs, who, 1);
          bool left = !side.isMissing() && choiceArg(side, who, ":padding-side", {"right", "left"}) == "left";
          if (!left) return at::pad_sequence(ts, batchFirst, value);
          for (auto& t : ts) t = t.flip(0);
          return at::pad_sequence(ts, batchFirst, value).flip(batchFirst ? 1 : 0);
        },
        "Stacks SEQUENCES (a list of tensors (L-i, *...) of different lengths) into one (L-max, N, *...) tensor, or "
        "(N, L-max, *...) with :batch-first #t, filling the rest with :padding-value "
        "(torch.nn.utils.rnn.pad_sequence). :padding-side \"left\" pads before each sequence instead of after.");
  r.def("pack-padded-sequence", "(input lengths :key (batch-first #f) (enforce-sorted #t))",
        [](const at::Tensor& input, Value lengths, bool batchFirst, bool enforceSorted) {
          const std::string who = "pack-padded-sequence";
          at::Tensor l = lengthsArg(lengths, who, 2);
          if (input.dim() < 2) throwError("value-error", who + ": input must be at least 2-d (L, N, *)");
          int64_t batch = input.size(batchFirst ? 0 : 1);
          if (l.numel() != batch)
            throwError("value-error", who + ": " + std::to_string(l.numel()) + " lengths for a batch of " + std::to_string(batch));
          if (enforceSorted && l.numel() > 1 && (l.slice(0, 1) > l.slice(0, 0, -1)).any().item<bool>())
            throwError("value-error", who + ": lengths must be sorted in decreasing order with :enforce-sorted #t (the "
                                             "default); pass :enforce-sorted #f to pack unsorted sequences");
          if (l.numel() > 0 && (l <= 0).any().item<bool>()) throwError("value-error", who + ": every length must be positive");
          return wrapPacked(torch::nn::utils::rnn::pack_padded_sequence(input, l, batchFirst, enforceSorted));
        },
        "Packs a padded batch INPUT (L, N, *...) (or (N, L, *...) with :batch-first #t) whose sequences have "
        "LENGTHS (a list or a 1-d tensor) into a packed sequence for rnn, lstm and gru, which then skip the padding "
        "(torch.nn.utils.rnn.pack_padded_sequence). With :enforce-sorted #t LENGTHS must be decreasing; #f sorts "
        "them and the result keeps the original order.");
  r.def("pad-packed-sequence", "(sequence :key (batch-first #f) (padding-value 0.0) total-length)",
        [](Value seq, bool batchFirst, double value, std::optional<int64_t> total) {
          const std::string who = "pad-packed-sequence";
          const PackedSequence& p = packedArg(seq, who, 1);
          if (total && *total < p.batch_sizes().size(0))
            throwError("value-error", who + ": :total-length " + std::to_string(*total) + " is less than the longest sequence (" +
                                          std::to_string(p.batch_sizes().size(0)) + ")");
          auto r = torch::nn::utils::rnn::pad_packed_sequence(p, batchFirst, value, copt(total));
          return list2(wrapTensor(std::move(std::get<0>(r))), wrapTensor(std::move(std::get<1>(r))));
        },
        "The inverse of pack-padded-sequence: returns (padded lengths), PADDED being (L, N, *...) (or (N, L, *...) "
        "with :batch-first #t) filled with :padding-value, and LENGTHS an int64 tensor, in the original batch order "
        "(torch.nn.utils.rnn.pad_packed_sequence). :total-length pads to that many steps.");
  r.def("pack-sequence", "(sequences :key (enforce-sorted #t))",
        [](Value seqs, bool enforceSorted) {
          const std::string who = "pack-sequence";
          std::vector<at::Tensor> ts = tensorsArg(seqs, who, 1);
          for (size_t k = 1; enforceSorted && k < ts.size(); k++)
            if (ts[k].size(0) > ts[k - 1].size(0))
              throwError("value-error", who + ": sequences must be sorted by decreasing length with :enforce-sorted #t "
                                               "(the default); pass :enforce-sorted #f");
          return wrapPacked(torch::nn::utils::rnn::pack_sequence(ts, enforceSorted));
        },
        "Packs SEQUENCES, a list of tensors (L-i, *...), into a packed sequence (torch.nn.utils.rnn.pack_sequence).");
  r.def("unpack-sequence", "(sequence)",
        [](Value seq) {
          const std::string who = "unpack-sequence";
          auto r = torch::nn::utils::rnn::pad_packed_sequence(packedArg(seq, who, 1), true);
          at::Tensor padded = std::get<0>(r), lengths = std::get<1>(r);
          std::vector<at::Tensor> out;
          for (int64_t k = 0; k < padded.size(0); k++) out.push_back(padded[k].slice(0, 0, lengths[k].item<int64_t>()));
          return out;
        },
        "The list of tensors a packed SEQUENCE holds, each (L-i, *...), in the original order "
        "(torch.nn.utils.rnn.unpack_sequence).");
  r.def("unpad-sequence", "(padded lengths :key (batch-first #f))",
        [](const at::Tensor& padded, Value lengths, bool batchFirst) {
          const std::string who = "unpad-sequence";
          at::Tensor l = lengthsArg(lengths, who, 2);
          at::Tensor p = batchFirst ? padded : padded.transpose(0, 1);
          if (l.numel() != p.size(0))
            throwError("value-error", who + ": " + std::to_string(l.numel()) + " lengths for a batch of " + std::to_string(p.size(0)));
          std::vector<at::Tensor> out;
          for (int64_t k = 0; k < p.size(0); k++) out.push_back(p[k].slice(0, 0, l[k].item<int64_t>()));
          return out;
        },
        "The list of sequences in PADDED (L, N, *...) (or (N, L, *...) with :batch-first #t) cut to their LENGTHS "
        "(torch.nn.utils.rnn.unpad_sequence).");
  r.def("packed-sequence?", "(x)", [](Value x) { return isPacked(x); }, "True when X is a packed sequence.");
  r.def("packed-sequence-data", "(sequence)",
        [](Value s) { return packedArg(s, "packed-sequence-data", 1).data(); },
        "The packed time steps of SEQUENCE, one row per (step, sequence) pair: (sum of lengths, *...).");
  r.def("packed-sequence-batch-sizes", "(sequence)",
        [](Value s) { return packedArg(s, "packed-sequence-batch-sizes", 1).batch_sizes(); },
        "How many sequences of SEQUENCE are still running at each time step (an int64 tensor on the CPU).");
  r.def("packed-sequence-sorted-indices", "(sequence)",
        [](Value s) -> Value {
          at::Tensor t = packedArg(s, "packed-sequence-sorted-indices", 1).sorted_indices();
          return t.defined() ? wrapTensor(t) : Value::f();
        },
        "The batch order SEQUENCE was sorted into when packed (#f when it was packed already sorted).");
  r.def("packed-sequence-unsorted-indices", "(sequence)",
        [](Value s) -> Value {
          at::Tensor t = packedArg(s, "packed-sequence-unsorted-indices", 1).unsorted_indices();
          return t.defined() ? wrapTensor(t) : Value::f();
        },
        "The permutation that restores SEQUENCE's original batch order (#f when it was packed already sorted).");
}

}  // namespace nnlayer
}  // namespace purple
