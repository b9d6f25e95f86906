# Runs product with TERN_GPU=cuda: on a machine with a CUDA GPU it must print
# "cuda: first element = 7" and exit 0; without one it must print
# "product failed: <message>" and exit 1 (never crash).
set(ENV{TERN_GPU} cuda)
execute_process(COMMAND ${EXE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "product (TERN_GPU=cuda) exited ${rc}: ${out}${err}")
if(rc EQUAL 0 AND out MATCHES "^cuda: first element = 7\n$")
  return()
endif()
if(rc EQUAL 1 AND out MATCHES "^product failed: [^\n]+\n$")
  return()
endif()
message(FATAL_ERROR "product under TERN_GPU=cuda neither worked nor failed cleanly")
