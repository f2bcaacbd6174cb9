# authrpc_generate(TARGET <target> PROTOS <file.proto>...
#                  [IMPORT_DIRS <dir>...] [OUT_DIR <dir>])
#
# Runs protoc on each .proto file with protoc's C++ generator and authrpc's
# (protoc-gen-authrpc), adds the generated sources (<name>.pb.cc,
# <name>.authrpc.cc) to <target>, puts OUT_DIR on its include path and
# links it with authrpc::protobuf. A file is named in the generated code by
# its path under the first IMPORT_DIRS entry that holds it (default: the
# directory of each file), so `import "a/b.proto"` and
# `#include "a/b.authrpc.h"` agree. authrpc's own options
# (authrpc/components/protobuf/options.proto) are always importable.
# OUT_DIR defaults to <target>'s binary directory, under "proto".
# In the spirit of protobuf_generate(); docs/PROTOBUF.md.
function(authrpc_generate)
  cmake_parse_arguments(arg "" "TARGET;OUT_DIR" "PROTOS;IMPORT_DIRS" ${ARGN})
  if(NOT arg_TARGET OR NOT arg_PROTOS)
    message(FATAL_ERROR "authrpc_generate: TARGET and PROTOS are required")
  endif()
  if(NOT arg_OUT_DIR)
    set(arg_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/proto)
  endif()
  set(import_dirs "")
  foreach(dir ${arg_IMPORT_DIRS})
    get_filename_component(dir ${dir} ABSOLUTE)
    list(APPEND import_dirs ${dir})
  endforeach()
  set(outputs "")
  foreach(proto ${arg_PROTOS})
    get_filename_component(proto ${proto} ABSOLUTE)
    set(relative "")
    foreach(dir ${import_dirs})
      file(RELATIVE_PATH candidate ${dir} ${proto})
      if(NOT candidate MATCHES "^\\.\\./")
        set(relative ${candidate})
        break()
      endif()
    endforeach()
    set(proto_dirs ${import_dirs})
    if(NOT relative)
      get_filename_component(dir ${proto} DIRECTORY)
      get_filename_component(relative ${proto} NAME)
      list(PREPEND proto_dirs ${dir})
    endif()
    string(REGEX REPLACE "\\.proto$" "" stem ${relative})
    set(generated ${arg_OUT_DIR}/${stem}.pb.cc ${arg_OUT_DIR}/${stem}.pb.h
                  ${arg_OUT_DIR}/${stem}.authrpc.cc ${arg_OUT_DIR}/${stem}.authrpc.h)
    list(TRANSFORM proto_dirs PREPEND "-I")
    add_custom_command(
      OUTPUT ${generated}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${arg_OUT_DIR}
      COMMAND protobuf::protoc "--plugin=protoc-gen-authrpc=$<TARGET_FILE:authrpc::protoc-gen-authrpc>"
              --cpp_out=${arg_OUT_DIR} --authrpc_out=${arg_OUT_DIR} ${proto_dirs}
              -I${AUTHRPC_PROTO_IMPORT_DIR} ${proto}
      DEPENDS ${proto} authrpc::protoc-gen-authrpc protobuf::protoc
      COMMENT "protoc + protoc-gen-authrpc: ${relative}"
      VERBATIM)
    list(APPEND outputs ${generated})
  endforeach()
  # Each generated file compiles on its own: protoc's files share private
  # names, and a unity source of two would not compile.
  set_source_files_properties(${outputs} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  target_sources(${arg_TARGET} PRIVATE ${outputs})
  target_include_directories(${arg_TARGET} PUBLIC ${arg_OUT_DIR})
  target_link_libraries(${arg_TARGET} PUBLIC authrpc::protobuf)
endfunction()
