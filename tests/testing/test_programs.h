// The programs integration tests run as child processes: AUTHRPC_CLI_BIN (the
// `authrpc` CLI) and AUTHRPC_SERVER_BIN (`authrpc-server`), paths that
// tests/CMakeLists.txt defines (authrpc_program_definitions) for the test
// programs that run them. A test file that runs either includes this: built
// without the definitions, it fails to compile rather than to find a program.
#pragma once

#ifndef AUTHRPC_CLI_BIN
#error "AUTHRPC_CLI_BIN must name the authrpc binary"
#endif
#ifndef AUTHRPC_SERVER_BIN
#error "AUTHRPC_SERVER_BIN must name the authrpc-server binary"
#endif
