// MiniKdc: a real MIT krb5kdc in a throwaway realm, for tests. It is
// minibench's LocalKdc (minibench/local_kdc.h), which minibench uses to set up
// its own realm; the names here keep tests independent of where it lives.
// scripts/kdc is its shell twin (same configuration) for people.
#pragma once

#include "minibench/local_kdc.h"

namespace authrpc::testing {

using MiniKdc = minibench::LocalKdc;
using MiniKdcOptions = minibench::LocalKdcOptions;
using CommandResult = minibench::CommandResult;
using KdcRequestCounts = minibench::KdcRequestCounts;

}  // namespace authrpc::testing
