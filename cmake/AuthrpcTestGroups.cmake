# Run as `cmake -P` after a test program links (tests/CMakeLists.txt,
# authrpc_test_program with AUTHRPC_TEST_GROUP_SIZE above 1): lists the
# program's test cases and writes a ctest file that runs them in groups of up
# to GROUP_SIZE cases of one suite each, one process per group. Where starting
# a process costs more than the case it runs (the sanitizer tree: ~0.1 s of
# CPU a start), this saves most of the starts; a failing group's output names
# its failed cases.
#
# Variables: TEST_EXECUTABLE, TEST_WORKING_DIR, TEST_PREFIX, TEST_FILTER (a
# gtest filter: which cases to list), GROUP_SIZE, TEST_TIMEOUT, CTEST_FILE.
# Entries are named <prefix><Suite> when the suite fits one group, else
# <prefix><Suite>.part<N>.

execute_process(
  COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests "--gtest_filter=${TEST_FILTER}"
  WORKING_DIRECTORY "${TEST_WORKING_DIR}"
  TIMEOUT 60
  OUTPUT_VARIABLE listing
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed (${result}):\n${listing}")
endif()

# The listing: "Suite." lines, each followed by "  Case" lines; a
# parameterized or typed name may carry a "  # GetParam() = ..." comment.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
# Suite i's name is suite_<i>, its cases cases_<i>.
set(count_suites 0)
set(suite "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE " *#.*" "" line "${line}")
  if(line MATCHES "^([^ ]+)\\.$")
    set(suite "${CMAKE_MATCH_1}")
    math(EXPR count_suites "${count_suites} + 1")
    set(key ${count_suites})
    set(suite_${key} "${suite}")
    set(cases_${key} "")
  elseif(line MATCHES "^  ([^ ]+)$" AND suite)
    set(case_name "${CMAKE_MATCH_1}")
    # gtest runs a disabled case only when asked to.
    if(NOT suite MATCHES "(^|/)DISABLED_" AND NOT case_name MATCHES "^DISABLED_")
      list(APPEND cases_${key} "${suite}.${case_name}")
    endif()
  endif()
endforeach()

set(script "")
foreach(key RANGE 1 ${count_suites})
  if(key GREATER count_suites)  # RANGE 1 0 still runs once
    break()
  endif()
  set(suite "${suite_${key}}")
  list(LENGTH cases_${key} count)
  if(count EQUAL 0)
    continue()
  endif()
  # As many groups as GROUP_SIZE needs, of nearly equal sizes.
  math(EXPR parts "(${count} + ${GROUP_SIZE} - 1) / ${GROUP_SIZE}")
  math(EXPR size "(${count} + ${parts} - 1) / ${parts}")
  set(part 0)
  set(index 0)
  while(index LESS count)
    math(EXPR part "${part} + 1")
    list(SUBLIST cases_${key} ${index} ${size} group)
    list(LENGTH group group_count)
    math(EXPR index "${index} + ${size}")
    # Each case keeps the time it would have alone.
    math(EXPR timeout "${TEST_TIMEOUT} * ${group_count}")
    list(JOIN group ":" filter)
    set(name "${TEST_PREFIX}${suite}")
    if(parts GREATER 1)
      string(APPEND name ".part${part}")
    endif()
    string(APPEND script
      "add_test([==[${name}]==] [==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${filter}]==])\n"
      "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==]"
      " TIMEOUT ${timeout})\n")
  endwhile()
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
