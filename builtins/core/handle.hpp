// Removable handles: what registering a hook returns (tensor hooks in autograd/, module hooks in
// nn/). One Foreign kind for all of them, so `hook-remove!` and `hook-handle?` work on any.
#pragma once
#include "interp/core/value.hpp"

namespace purple {

class RemovableHandle {
 public:
  virtual ~RemovableHandle() = default;
  // Unregisters what the handle stands for; false when it was already gone.
  virtual bool remove() = 0;
};

inline void destroyRemovableHandle(void* p) { delete static_cast<RemovableHandle*>(p); }

inline Value makeRemovableHandle(RemovableHandle* h) {
  return makeForeign(h, destroyRemovableHandle, intern("hook-handle"));
}

inline bool isRemovableHandle(Value v) {
  return v.is(Kind::Foreign) && v.as<Foreign>()->destroy == destroyRemovableHandle && v.as<Foreign>()->ptr;
}

inline RemovableHandle* removableHandleOf(Value v) { return static_cast<RemovableHandle*>(v.as<Foreign>()->ptr); }

}  // namespace purple
