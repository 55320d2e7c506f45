// Every builtin family registers itself through one function, called by registerAllBuiltins
// (builtins/all.cpp) when an interpreter is made. Adding a family: write builtins/GROUP/NAME.cpp with
// `void registerNAME(Registry&)`, declare it here and list it in all.cpp.
#pragma once
#include "interp/language/bind.hpp"

namespace purple {

void registerAllBuiltins(Interp& in);

// core language
void registerControl(Registry& r);        // apply, call/cc, dynamic-wind, values, errors, eval
void registerEquality(Registry& r);       // eq? eqv? equal?
void registerNumbers(Registry& r);        // numeric tower
void registerLists(Registry& r);          // pairs and lists
void registerSorting(Registry& r);        // sort, sort!, list-sort, merge
void registerSymbols(Registry& r);        // symbols, keywords, booleans
void registerChars(Registry& r);
void registerStrings(Registry& r);
void registerFormat(Registry& r);         // format (SRFI-28/48)
void registerVectors(Registry& r);        // vectors and bytevectors
void registerHashTables(Registry& r);
void registerRecords(Registry& r);
void registerPorts(Registry& r);          // ports, read, write, display, files
void registerDirectories(Registry& r);    // directory-files, file-directory?
void registerSystem(Registry& r);         // command-line, exit, time, environment, gc-stats, help
void registerAttach(Registry& r);         // serve-repl: the REPL server (docs/attach.md)
void registerServeKernel(Registry& r);    // serve-kernel: the program as a Jupyter kernel

// tensors
void registerTensorCreation(Registry& r);
void registerTensorMath(Registry& r);
void registerTensorReduction(Registry& r);
void registerTensorShape(Registry& r);
void registerTensorIndexing(Registry& r);
void registerTensorLinalg(Registry& r);
void registerTensorDevices(Registry& r);
void registerCudaMemory(Registry& r);
void registerRandom(Registry& r);         // generators, RNG state

// neural networks (nn_value.hpp)
void registerNnModules(Registry& r);      // layers, activations, sequential, module API, init
void registerNnDefine(Registry& r);       // make-module (define-module), current-module
void registerNnFunctional(Registry& r);   // tensor-linear, batch-norm, one-hot, attention
void registerLosses(Registry& r);
void registerOptim(Registry& r);          // optimizers, clipping
void registerSchedulers(Registry& r);     // learning-rate schedulers
void registerCyclicSchedulers(Registry& r);   // cyclic, one-cycle, warm restarts, on plateau
void registerOptimizers(Registry& r);     // nadam, radam, adamax, adadelta
void registerOptimizerState(Registry& r); // optimizer state dicts in PyTorch's layout
void registerAmp(Registry& r);            // autocast, grad scaler
void registerAveragedModels(Registry& r); // ema-model, swa-model, update-bn! helpers
void registerSerialize(Registry& r);      // state dicts and data in torch.save's format
void registerSafetensors(Registry& r);    // .safetensors
void registerNumpy(Registry& r);          // .npy, .npz
void registerTorchScript(Registry& r);    // torch.jit.save modules
void registerJit(Registry& r);            // jit-trace, jit-compile, save-torchscript, export-onnx
void registerJson(Registry& r);           // parse-json, read-json-file, json->string, write-json-file

// data, metrics (builtins/data/; prelude/35-data, 40-training)
void registerData(Registry& r);           // transforms, batchers, default-collate, terminal-output?
void registerSamplers(Registry& r);       // sampler and loader index draws, as PyTorch's
void registerDataWorkers(Registry& r);    // data-loader worker processes for Purple datasets
void registerLoaderSamples(Registry& r);   // the loader's own samples, freed once collated
void registerDataIO(Registry& r);         // load-idx, load-csv
void registerMetrics(Registry& r);        // accuracy, precision, recall, f1-score, confusion-matrix
void registerAutograd(Registry& r);       // gradients, modes, hooks, custom functions

// rich display, plots, TensorBoard (builtins/display, plot, tensorboard; prelude/38-display, 50-plot)
void registerImages(Registry& r);         // tensor->png, save-png, image-grid
void registerHtml(Registry& r);           // tensor->html
void registerImageFiles(Registry& r);     // read-image, write-png, write-jpeg (builtins/io/images.cpp)
void registerPlot(Registry& r);           // %plot-render (PLplot), when built with PLplot
void registerTensorBoard(Registry& r);    // summary-writer, add-scalar ..., when built with protobuf
// text (builtins/text/; lib/purple/text): SentencePiece models, when built with libsentencepiece
void registerSentencePiece(Registry& r);  // sentencepiece-load, -encode, -decode
// profiling (builtins/profile/; prelude/60-profile)
void registerTensorMemory(Registry& r);   // record-tensor-origins!, the rows of tensor-memory-report
void registerSampling(Registry& r);       // the sampling profiler behind profile
void registerOpProfiler(Registry& r);     // LibTorch's operator callbacks: with-profiler, Chrome traces
// your own kernels (builtins/extensions/): C++ and CUDA compiled at run time
void registerLoadInline(Registry& r);       // load-inline: C++ (and .cu) against LibTorch, cached
void registerCudaRawKernels(Registry& r);   // cuda-raw-kernel: CUDA C through NVRTC
// distributed training (builtins/distributed/; when built with c10d + Gloo: PURPLE_HAVE_DISTRIBUTED)
void registerDistGroups(Registry& r);       // dist-init, ranks, sub-groups, dist-destroy
void registerDistCollectives(Registry& r);  // collectives on tensors
void registerDistHandles(Registry& r);      // async handles: dist-wait
void registerDistObjects(Registry& r);      // collectives on Purple values
void registerDistDataParallel(Registry& r); // distributed-data-parallel, no-sync
void registerDistSampler(Registry& r);      // the distributed sampler's shards
void registerDistSharding(Registry& r);     // fully-shard
void registerDistZero(Registry& r);         // zero-redundancy-optimizer

}  // namespace purple
