# Run after a test executable links (lfmvox_add_test in CMakeLists.txt): lists its GoogleTest suites and
# writes one ctest test per suite, so a suite's fixtures (demo checkpoints, GGUF releases, servers, made in
# SetUpTestSuite) are made once per suite rather than once per case, and ctest's parallelism is across
# suites.
#   -D EXE=... -D OUT=... -D WORKDIR=... -D TIMEOUT=seconds
#   -D SANITIZE=ALL|suite,suite,...   suites labelled sanitize-ci (scripts/test.sh's sanitized stage)
#   -D LONG=suite,...                 suites labelled long (Release only; scripts/test.sh --quick skips them)
#   -D VARIANTS=v,... -D VARIANT_SUITES=suite,...
#                                     the named suites again as v.<suite> with LFMVOX_TEST_WEIGHTS=v
# A suite named in SANITIZE, LONG or VARIANT_SUITES that the executable lacks fails the build, so a
# renamed suite cannot silently drop out of a stage.
cmake_minimum_required(VERSION 3.25)
foreach(var SANITIZE LONG VARIANTS VARIANT_SUITES)
  string(REPLACE "," ";" ${var} "${${var}}")
endforeach()

execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing ERROR_VARIABLE errors
                RESULT_VARIABLE rc TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}):\n${listing}\n${errors}")
endif()
# Suite lines start in column 0 and end in "." (a typed suite adds "  # TypeParam = ..."); case lines are
# indented. A parameter printed on a case line may hold ';', CMake's list separator.
string(REPLACE ";" "," listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites)
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( |$)")
    list(APPEND suites "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES suites)
if(NOT suites)
  message(FATAL_ERROR "${EXE} lists no test suite")
endif()
foreach(var SANITIZE LONG VARIANT_SUITES)
  foreach(s IN LISTS ${var})
    if(NOT s STREQUAL "ALL" AND NOT s IN_LIST suites)
      message(FATAL_ERROR "${EXE} has no suite ${s} (named in ${var}); it has: ${suites}")
    endif()
  endforeach()
endforeach()

set(script "")
macro(add_suite test_name suite labels env)
  string(APPEND script "add_test([==[${test_name}]==] \"${EXE}\" [==[--gtest_filter=${suite}.*]==])\n"
         "set_tests_properties([==[${test_name}]==] PROPERTIES WORKING_DIRECTORY \"${WORKDIR}\" TIMEOUT ${TIMEOUT}")
  if(NOT "${labels}" STREQUAL "")
    string(APPEND script " LABELS \"${labels}\"")
  endif()
  # ctest -j starts the costliest tests first; a clean tree has no timings yet, so the long suites say so.
  if("long" IN_LIST labels)
    string(APPEND script " COST 1000")
  endif()
  if(NOT "${env}" STREQUAL "")
    string(APPEND script " ENVIRONMENT \"${env}\"")
  endif()
  string(APPEND script ")\n")
endmacro()
foreach(s IN LISTS suites)
  set(labels "")
  if(SANITIZE STREQUAL "ALL" OR s IN_LIST SANITIZE)
    list(APPEND labels sanitize-ci)
  endif()
  if(s IN_LIST LONG)
    list(APPEND labels long)
  endif()
  add_suite("${s}" "${s}" "${labels}" "")
endforeach()
foreach(v IN LISTS VARIANTS)
  foreach(s IN LISTS VARIANT_SUITES)
    add_suite("${v}.${s}" "${s}" "" "LFMVOX_TEST_WEIGHTS=${v}")
  endforeach()
endforeach()
file(WRITE "${OUT}" "${script}")
