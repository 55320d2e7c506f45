// The samples a data loader reads for one batch, owned by the loader until they are collated,
// so that they die then rather than at the next collection. A dataset's ref returns, and a
// transform makes, fresh tensors (an image read, then made float and normalised): consed into
// the batch's list of samples, each would be shared and wait for the collector, 3 MB a step in
// a resnet18 trained on an image folder (bench/results/2026-11-29-resnet-folder-2.md).
//
// %read-samples calls the loader's sample reader as for-each calls a procedure (applyOwning) and
// keeps what it returns as it came: a sole-owned list owning its fresh tensors, or a sole-owned
// tensor (interp/language/ownership.hpp). The list it returns is the loader's own: its pairs
// carry no mark, so reading it marks nothing, and no Purple code reads it but the loader's. Once
// default-collate has stacked them, %release-samples! frees what each sample still owns. Before
// the samples go to code of the user's (a :collate procedure), %share-samples! marks them shared,
// as any value that leaves its owner is.
#include "builtins/builtins.hpp"
#include "builtins/core/checks.hpp"
#include "interp/language/ownership.hpp"

namespace purple {

namespace {
void checkSamples(Value samples, const char* who) {
  if (!isList(samples)) throwTypeError(who, 1, "a list of samples", samples);
}
}  // namespace

void registerLoaderSamples(Registry& r) {
  r.def("%read-samples", "(count read)",
        [](Interp& in, int64_t count, Value read) {
          if (count < 0) throwError("range-error", "%read-samples: count must not be negative");
          data::ListBuilder samples;
          for (int64_t k = 0; k < count; k++) {
            Value index = Value::fixnum(k);
            samples.add(in.applyOwning(read, &index, 1));   // as it came: the loader owns it
          }
          return samples.finish();
        },
        "A data loader's samples for one batch: (READ k) for k from 0 below COUNT, in order, in a "
        "list of the loader's own (see %release-samples!).");
  r.def("%release-samples!", "(samples)",
        [](Value samples) {
          checkSamples(samples, "%release-samples!");
          for (Value p = samples; isPair(p); p = cdr(p))
            if (isSoleOwned(car(p))) releaseOwned(car(p));
        },
        "Frees the tensors that the samples %read-samples gave, once collated, still own.");
  r.def("%share-samples!", "(samples)",
        [](Value samples) {
          checkSamples(samples, "%share-samples!");
          for (Value p = samples; isPair(p); p = cdr(p)) shareValue(car(p));
        },
        "Marks the samples %read-samples gave shared, before code that may keep them sees them.");
}

}  // namespace purple
