// Module hooks (torch.nn.Module.register_forward_pre_hook / register_forward_hook): Purple
// procedures run around every call of a module's forward, from Purple or from a parent's
// forward, with removable handles. Native hooks (C++ callbacks) use the same lists: module-summary
// records output shapes with them.
#include "builtins/nn/layer.hpp"
#include "builtins/builtins.hpp"
#include "builtins/core/handle.hpp"

namespace purple {

struct ModuleHooks {
  struct Entry {
    uint64_t id;
    Root proc;                                      // a Purple hook, or
    std::function<void(Value args, Value output)> native;   // a native forward hook, or
    std::function<Value(Value args)> nativePre;     // a native pre-hook: new arguments, or #f
  };
  std::vector<Entry> pre, post;
  uint64_t nextId = 1;
  bool empty() const { return pre.empty() && post.empty(); }
};

bool moduleHasHooks(const torch::nn::Module& m) {
  auto* f = dynamic_cast<const ModuleForward*>(&m);
  return f && f->hooks && !f->hooks->empty();
}

namespace {

using ValueVec = std::vector<Value, traceable_allocator<Value>>;

struct ModuleHookHandle : RemovableHandle {
  std::weak_ptr<ModuleHooks> hooks;
  uint64_t id;
  ModuleHookHandle(std::weak_ptr<ModuleHooks> h, uint64_t i) : hooks(std::move(h)), id(i) {}
  bool remove() override {
    auto h = hooks.lock();
    if (!h) return false;
    for (auto* list : {&h->pre, &h->post})
      for (auto it = list->begin(); it != list->end(); ++it)
        if (it->id == id) {
          list->erase(it);
          return true;
        }
    return false;
  }
};

// What a hook returns that leaves the arguments or the output as they are: Python's None.
bool keeps(Value r) { return r.isUnspecified() || r.isFalse(); }

ModuleForward& hookable(const std::shared_ptr<torch::nn::Module>& m, const char* who) {
  auto* f = dynamic_cast<ModuleForward*>(m.get());
  if (!f) throwError("type-error", std::string(who) + ": module " + moduleTypeName(*m) + " cannot take hooks (it is a part of a LibTorch layer)");
  if (!f->hooks) f->hooks = std::make_shared<ModuleHooks>();
  return *f;
}

Value addHook(const std::shared_ptr<torch::nn::Module>& m, Value proc, bool post, bool prepend, const char* who) {
  ModuleForward& f = hookable(m, who);
  ModuleHooks::Entry e{f.hooks->nextId++, Root(proc), nullptr, nullptr};
  auto& list = post ? f.hooks->post : f.hooks->pre;
  uint64_t id = e.id;
  if (prepend) list.insert(list.begin(), std::move(e));
  else list.push_back(std::move(e));
  return makeRemovableHandle(new ModuleHookHandle(f.hooks, id));
}

}  // namespace

// A native forward hook for module-summary; returns its id for removeNativeHook.
uint64_t addNativeForwardHook(const std::shared_ptr<torch::nn::Module>& m, std::function<void(Value, Value)> fn) {
  ModuleForward& f = hookable(m, "module-summary");
  uint64_t id = f.hooks->nextId++;
  f.hooks->post.push_back(ModuleHooks::Entry{id, Root(), std::move(fn), nullptr});
  return id;
}

// A native forward pre-hook (fully-shard): runs before the Purple pre-hooks; it returns new
// arguments (a list) or #f to keep them. Throws a type error when M cannot take hooks.
uint64_t addNativeForwardPreHook(const std::shared_ptr<torch::nn::Module>& m, std::function<Value(Value)> fn,
                                 const char* who) {
  ModuleForward& f = hookable(m, who);
  uint64_t id = f.hooks->nextId++;
  f.hooks->pre.insert(f.hooks->pre.begin(), ModuleHooks::Entry{id, Root(), nullptr, std::move(fn)});
  return id;
}

// A native forward hook that runs after every other (fully-shard's: it sees the final output).
uint64_t addNativeForwardHookLast(const std::shared_ptr<torch::nn::Module>& m, std::function<void(Value, Value)> fn,
                                  const char* who) {
  ModuleForward& f = hookable(m, who);
  uint64_t id = f.hooks->nextId++;
  f.hooks->post.push_back(ModuleHooks::Entry{id, Root(), std::move(fn), nullptr});
  return id;
}

void removeNativeHook(const std::shared_ptr<torch::nn::Module>& m, uint64_t id) {
  auto* f = dynamic_cast<ModuleForward*>(m.get());
  if (!f || !f->hooks) return;
  for (auto* list : {&f->hooks->pre, &f->hooks->post})
    for (auto it = list->begin(); it != list->end(); ++it)
      if (it->id == id) {
        list->erase(it);
        return;
      }
}

Value forwardWithHooks(Interp& in, const std::shared_ptr<torch::nn::Module>& m, ModuleForward& f, const Value* argv,
                       int argc) {
  std::shared_ptr<ModuleHooks> hooks = f.hooks;   // a hook may remove hooks while they run
  if (!hooks || hooks->empty()) return f.forward(in, argv, argc);
  Value self = wrapModule(m);
  Value args = listFromArray(argv, size_t(argc));
  std::vector<ModuleHooks::Entry> pre = hooks->pre;
  for (auto& e : pre) {
    if (e.nativePre) {
      Value r = e.nativePre(args);
      if (isList(r) && !r.isFalse()) args = r;
      continue;
    }
    if (e.native) continue;
    Value r = in.apply(e.proc.get(), {self, args});
    if (isPair(r) && isList(r)) args = r;   // a circular list would never end
    else if (isPair(r)) throwError("type-error", "forward pre-hook: returned an improper or circular list");
    else if (isTensor(r)) args = listFromArray(&r, 1);
  }
  ValueVec items;
  for (Value p = args; isPair(p); p = cdr(p)) items.push_back(car(p));
  Value out = f.forward(in, items.data(), int(items.size()));
  std::vector<ModuleHooks::Entry> post = hooks->post;
  for (auto& e : post) {
    if (e.native) {
      e.native(args, out);
      continue;
    }
    Value r = in.apply(e.proc.get(), {self, args, out});
    if (!keeps(r)) out = r;
  }
  return out;
}

namespace nnlayer {

void registerHooks(Registry& r) {
  r.def("register-forward-pre-hook!", "(m proc :key (prepend #f))",
        [](ModuleRef m, Procedure proc, bool prepend) {
          return addHook(m.ptr, proc.value, false, prepend, "register-forward-pre-hook!");
        },
        "Calls (PROC module args) before every forward of module M (torch.nn.Module.register_forward_pre_hook), "
        "whether M is called directly or by a parent. ARGS is the list of arguments; when PROC returns a list it "
        "replaces them (a tensor stands for a one-element list); any other result, such as unspecified or #f, keeps "
        "them. :prepend #t runs it before the hooks already registered. Returns a handle for hook-remove!.");
  r.def("register-forward-hook!", "(m proc :key (prepend #f))",
        [](ModuleRef m, Procedure proc, bool prepend) {
          return addHook(m.ptr, proc.value, true, prepend, "register-forward-hook!");
        },
        "Calls (PROC module args output) after every forward of module M (torch.nn.Module.register_forward_hook): "
        "capture activations, check shapes, or change the output. When PROC returns anything but unspecified or #f "
        "(Python's None), that value replaces the output. :prepend #t runs it before the hooks already registered. "
        "Returns a handle for hook-remove!. A hook that refers to M itself keeps M alive until it is removed.");
  r.def("module-hooks", "(m)",
        [](ModuleRef m) {
          auto* f = dynamic_cast<ModuleForward*>(m.ptr.get());
          int64_t pre = 0, post = 0;
          if (f && f->hooks) {
            for (auto& e : f->hooks->pre) pre += (e.native || e.nativePre) ? 0 : 1;
            for (auto& e : f->hooks->post) post += e.native ? 0 : 1;
          }
          return std::make_tuple(pre, post);
        },
        "The numbers of forward pre-hooks and forward hooks registered on module M (not its children), as a list "
        "(pre post).");
}

}  // namespace nnlayer
}  // namespace purple
