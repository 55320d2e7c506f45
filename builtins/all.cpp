#include "builtins/builtins.hpp"

namespace purple {

void registerAllBuiltins(Interp& in) {
  // Order matters only where a family aliases another's names.
  struct Family { const char* name; void (*fn)(Registry&); };
  const Family families[] = {
      {"control", registerControl},     {"equality", registerEquality},
      {"numbers", registerNumbers},     {"lists", registerLists}, {"lists", registerSorting},
      {"symbols", registerSymbols},     {"chars", registerChars},
      {"strings", registerStrings}, {"strings", registerFormat},     {"vectors", registerVectors},
      {"hash-tables", registerHashTables}, {"records", registerRecords},
      {"ports", registerPorts}, {"ports", registerDirectories},         {"system", registerSystem},
      {"system", registerAttach}, {"system", registerServeKernel},
      {"tensor", registerTensorCreation}, {"tensor", registerTensorMath},
      {"tensor", registerTensorReduction}, {"tensor", registerTensorShape},
      {"tensor", registerTensorIndexing}, {"tensor", registerTensorLinalg},
      {"tensor", registerTensorDevices}, {"tensor", registerRandom}, {"tensor", registerCudaMemory},
      {"autograd", registerAutograd},
      {"nn", registerNnModules}, {"nn", registerNnDefine}, {"nn", registerNnFunctional},
      {"nn", registerLosses}, {"nn", registerOptim}, {"nn", registerSchedulers}, {"nn", registerCyclicSchedulers},
      {"nn", registerOptimizers}, {"nn", registerOptimizerState}, {"nn", registerAmp},
      {"nn", registerAveragedModels}, {"nn", registerSerialize},
      {"formats", registerSafetensors}, {"formats", registerNumpy}, {"formats", registerTorchScript}, {"formats", registerJit},
      {"formats", registerJson},
      {"data", registerData}, {"data", registerSamplers}, {"data", registerDataWorkers}, {"data", registerDataIO}, {"metrics", registerMetrics},
      {"data", registerLoaderSamples},
      {"display", registerImages}, {"display", registerHtml}, {"images", registerImageFiles},
      {"profile", registerTensorMemory}, {"profile", registerSampling}, {"profile", registerOpProfiler},
      {"extensions", registerLoadInline}, {"extensions", registerCudaRawKernels},
#ifdef PURPLE_HAVE_PLOT
      {"plot", registerPlot},
#endif
#ifdef PURPLE_HAVE_SENTENCEPIECE
      {"text", registerSentencePiece},
#endif
#ifdef PURPLE_HAVE_TENSORBOARD
      {"tensorboard", registerTensorBoard},
#endif
#ifdef PURPLE_HAVE_DISTRIBUTED
      {"distributed", registerDistGroups}, {"distributed", registerDistCollectives},
      {"distributed", registerDistHandles}, {"distributed", registerDistObjects},
      {"distributed", registerDistDataParallel}, {"distributed", registerDistSampler},
      {"distributed", registerDistSharding}, {"distributed", registerDistZero},
#endif
  };
  for (const auto& f : families) {
    Registry r(in, f.name);
    f.fn(r);
  }
}

}  // namespace purple
