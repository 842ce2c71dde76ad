# Writes the generated version.cpp with the git revision of the source tree at build time (not at
# configure time: a rebuild after a commit records the new revision). A tree with uncommitted
# changes to tracked files is marked "-dirty", so results from an uncommitted build say so. The
# file is replaced only when its text changes, so an unchanged revision recompiles nothing.
# Inputs: SOURCE_DIR, TEMPLATE, OUTPUT, PROJECT_VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE FLUENCE_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT FLUENCE_GIT_REVISION)
  set(FLUENCE_GIT_REVISION "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    string(APPEND FLUENCE_GIT_REVISION "-dirty")
  endif()
endif()
configure_file(${TEMPLATE} ${OUTPUT}.new @ONLY)
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUTPUT}.new ${OUTPUT})
file(REMOVE ${OUTPUT}.new)
