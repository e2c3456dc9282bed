//===- SiteInitializer.cpp - registers torch-mlir-flex in Python ----------===//
//
// Loaded by torch_mlir_flex.mlir._mlir_libs at import: adds our dialects to
// the default registry of every new Context and registers our passes with
// the pass manager's textual pipeline parser.
//
//===----------------------------------------------------------------------===//
#include "mlir-c/IR.h"
#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"
#include "torch-mlir-flex-c/Registration.h"

NB_MODULE(_site_initialize_0, m) {
  m.doc() = "torch-mlir-flex dialect and pass registration";
  torchMlirFlexRegisterPasses();
  // Contexts without MLIR's thread pool: with it, the verifier and
  // function-level passes emit diagnostics on worker threads, where the
  // bindings' error capture (Module.parse, PassManager.run) builds Python
  // objects without the GIL and nanobind aborts the process (race; found by
  // test/robustness, see docs/robustness.md).
  m.attr("disable_multithreading") = true;
  m.def("register_dialects", [](MlirDialectRegistry registry) {
    torchMlirFlexRegisterDialects(registry);
  });
  m.def(
      "register_translations",
      [](MlirContext context) { torchMlirFlexRegisterTranslations(context); },
      "Registers the LLVM IR translations of our dialects on a context.");
  m.def("context_init_hook", [](MlirContext context) {
    torchMlirFlexRegisterTranslations(context);
  });
}
