# Runs every example on the host with TERN_KERNEL_DUMP_DIR set, so each kernel it builds is
# written out as CUDA, OpenCL and Metal source, then checks those sources with
# test_kernel_compile (NVRTC for sm_90, clang with the Metal shim).
file(REMOVE_RECURSE ${DIR})
set(ENV{TERN_KERNEL_DUMP_DIR} ${DIR})
set(ENV{TERN_GPU} host)
string(REPLACE "|" ";" exes "${EXES}")
foreach(exe ${exes})
  execute_process(COMMAND ${exe} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${exe} failed (${rc}): ${out}")
  endif()
endforeach()
unset(ENV{TERN_KERNEL_DUMP_DIR})
execute_process(COMMAND ${CHECK} ${DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "example kernels failed to compile")
endif()
