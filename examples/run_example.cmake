# Runs an example on runtime GPU: it must exit 0 and print a line starting with the
# runtime's name ("host: ...", "opencl: ..."), matching EXPECT when given.
set(ENV{TERN_GPU} ${GPU})
execute_process(COMMAND ${EXE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exited ${rc}")
endif()
if(NOT out MATCHES "^${GPU}: ")
  message(FATAL_ERROR "the output does not start with '${GPU}: '")
endif()
if(EXPECT AND NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'")
endif()
