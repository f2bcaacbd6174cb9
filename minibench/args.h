// Args: the command line of `minibench [sessions|calls]` and `minibench
// floor-server`, read by parse_args (on FlagParser, tools/flag_parser.h);
// kUsage is its help page. Called by main.cc; the other stages (plan.h,
// run.h, report.h) read Args.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "minibench/realm.h"

namespace authrpc::cli {
class FlagParser;
}  // namespace authrpc::cli

namespace minibench {

// The sizes of a schedule of blocks (rotation.h) and the options that set
// them, -n, --warmup and --blocks, which `minibench [sessions|calls]` and
// `minibench idle` share.
struct BlockSizes {
  std::size_t n = 1000;
  std::size_t warmup = 100;
  std::size_t blocks = 10;
  void add_options(authrpc::cli::FlagParser& parser);
};

struct Args : BlockSizes {
  bool sessions = true;
  bool calls = true;
  bool floor_server_mode = false;
  std::vector<std::string> floor_listen;
  std::vector<std::string> methods;  // empty: the default set
  bool methods_given = false;
  RealmFlags realm;
  std::string transport = "all";
  bool transport_given = false;
  std::size_t server_threads = 1;
  bool server_threads_given = false;
  std::string server;
  std::string floor_server;
  bool floors_on_server_thread = true;
  bool floors = true;  // --floors off: session rows without their floors
  int server_cpu = -1;
  int client_cpu = -1;
  std::string json;
  std::size_t token_ops = 0;
  std::string zk_connect;  // --zk-connect: the token rows' store
  std::string acl_file;
  bool progress = true;
  std::string tls = "both";  // sessions: "on", "off", "both"
  std::size_t concurrency = 1;
  std::size_t depth = 1;        // --depth: calls in flight per connection
  double duration_s = 3;        // --duration: calls under load, per row
  std::string plot;          // --plot FILE.svg
  std::string token_file;    // --token-file, with --server
  std::string ca;            // --ca, with a tls:// --server
  bool in_process = false;   // --in-process
  std::string metrics = "on";  // --metrics on|off|compare
  std::string api = "bytes";   // --api bytes|proto|all (calls)
};

// TLS rows run on tcp (tls://): by default unless --transport unix, always
// with --tls on, never with --tls off.
bool tls_rows(const Args& args);
// Calls under load (calls.h) instead of sequential calls.
bool call_load(const Args& args);

// Reads argv (the mode first, if any): nullopt to go on; else the exit
// status, after the help page (0) or a usage line (2).
std::optional<int> parse_args(int argc, char** argv, Args& args);

// "minibench: USAGE: message (see minibench --help)"; returns 2.
int usage_error(const std::string& message);

}  // namespace minibench
