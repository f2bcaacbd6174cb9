// The configuration check's bookkeeping (server_config.h's
// check_server_config()): turning a reader's CONFIG_ERROR into a problem
// about one key, finding every problem of a document with a check that
// stops at the first, and printing a problem where its key is in the file.
// Used by server/server_config.cc only.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "authrpc/base/status.h"
#include "authrpc/rpc/json_document.h"
#include "authrpc/server/server_config.h"

namespace authrpc {

// A check of a whole document that returns its first problem; it sets
// `conflict` when that problem is between keys rather than of one key.
using ConfigCheckPass = std::function<Status(const nlohmann::json& document, bool& conflict)>;

// The key a reader's message is about and the rest of it: "'tokens.dir'
// must be ..." is {"tokens.dir", "must be ..."}, "unknown key 'auth.x'" is
// {"auth.x", "unknown key"}; a message naming no key is about the document.
ConfigProblem config_problem(const std::string& message);

// Every problem `pass` finds in `document`: after a problem of one key, that
// key is removed (its default applies) and the pass runs again, so
// independent mistakes are all reported. A second problem in a section
// whose earlier problem was not an unknown key may be that problem's echo:
// it is not reported, and the whole section is removed instead. A conflict
// between keys is reported only when no key had a problem of its own.
std::vector<ConfigProblem> collect_config_problems(nlohmann::json document, const ConfigCheckPass& pass);

// "key: message", or the message alone for the document as a whole.
std::string problem_text(const ConfigProblem& problem);
// "PATH:LINE:COLUMN: key: message", `at` where the key is in the file
// (JsonKeyIndex::find()).
std::string format_config_problem(const std::string& path, JsonPosition at, const ConfigProblem& problem);

}  // namespace authrpc
