# Locate MLIR_DIR / LLVM_DIR inside the PyPI packages xtc-mlir-dev and
# xtc-llvm-dev of the active Python, unless the caller passed them.
if(NOT MLIR_DIR OR NOT LLVM_DIR)
  if(NOT Python3_EXECUTABLE)
    find_package(Python3 COMPONENTS Interpreter REQUIRED)
  endif()
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c
      "import importlib.util as u, os; print(os.path.dirname(list(u.find_spec('mlir').submodule_search_locations)[0])); "
    OUTPUT_VARIABLE _flex_site OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _flex_rc)
  if(NOT _flex_rc EQUAL 0 OR NOT EXISTS "${_flex_site}/mlir/lib/cmake/mlir/MLIRConfig.cmake")
    message(FATAL_ERROR "Could not find the PyPI MLIR package (xtc-mlir-dev) for ${Python3_EXECUTABLE}; "
                        "run build_tools/setup_venv.sh or pass -DMLIR_DIR=...")
  endif()
  set(MLIR_DIR "${_flex_site}/mlir/lib/cmake/mlir" CACHE PATH "MLIR cmake dir" FORCE)
  set(LLVM_DIR "${_flex_site}/llvm/lib/cmake/llvm" CACHE PATH "LLVM cmake dir" FORCE)
  set(FLEX_PYPI_SITE "${_flex_site}" CACHE PATH "site-packages holding mlir/ and llvm/" FORCE)
endif()
