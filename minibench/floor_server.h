// run_floor_server(): `minibench floor-server URI...`, bare echo listeners
// (the floors, floor.h) on the given endpoints until SIGINT/SIGTERM, for a
// --server run's --floor-server. Called by main.cc.
#pragma once

#include "minibench/args.h"

namespace minibench {

int run_floor_server(const Args& args);

}  // namespace minibench
