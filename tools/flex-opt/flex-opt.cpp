//===- flex-opt.cpp - torch-mlir-flex optimizer driver --------------------===//
//
// mlir-opt with our registrations, and no abort on inputs that MLIR 22.1.8
// asserts on (PreVerify.h): the text is checked before parsing, the module
// is parsed without verification, then a first pass runs our checks and the
// verifier before the requested pipeline.
//
//===----------------------------------------------------------------------===//
#include "PreVerify.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "torch-mlir-flex/InitAll.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

static MlirOptMainConfig withPreVerification(MlirOptMainConfig config) {
  // Round-trip checks print unverified IR first; leave such runs alone.
  if (!config.shouldVerifyOnParsing() || config.shouldVerifyRoundtrip())
    return config;
  MlirOptMainConfig requested = config;
  config.verifyOnParsing(false);
  config.setPassPipelineSetupFn([requested](PassManager &pm) -> LogicalResult {
    // --pass-pipeline replaces what pm holds: build the requested pipeline,
    // then put it behind ours through its textual form.
    if (failed(requested.setupPassPipeline(pm)))
      return failure();
    if (pm.size() == 0) {
      pm.addPass(flex::createPreVerifyPass());
      return success();
    }
    std::string pipeline;
    llvm::raw_string_ostream os(pipeline);
    pm.printAsTextualPipeline(os);
    // "anchor(A,B)" -> "A,B", the form that appends to pm.
    StringRef passes = StringRef(pipeline).trim();
    passes = passes.drop_until([](char c) { return c == '('; })
                 .drop_front()
                 .drop_back();
    pm.clear();
    pm.addPass(flex::createPreVerifyPass());
    return parsePassPipeline(passes, pm, llvm::errs());
  });
  return config;
}

static LogicalResult run(int argc, char **argv, DialectRegistry &registry) {
  auto [inputFile, outputFile] = registerAndParseCLIOptions(
      argc, argv, "torch-mlir-flex optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    for (StringRef name : registry.getDialectNames())
      llvm::outs() << name << "\n";
    return success();
  }
  if (config.shouldListPasses()) {
    printRegisteredPasses();
    return success();
  }
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return failure();
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return failure();
  }
  if (failed(flex::checkKnownParserAborts(*input)) ||
      failed(MlirOptMain(output->os(), std::move(input), registry,
                         withPreVerification(config))))
    return failure();
  output->keep();
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  flex::registerAllDialects(registry);
  flex::registerAllPasses();
  return asMainReturnCode(run(argc, argv, registry));
}
