// protoc-gen-authrpc: the protoc plugin that generates, for each service of
// a .proto file, the server base class and client stub of authrpc's typed
// services (docs/PROTOBUF.md). For a.proto it writes a.authrpc.h and
// a.authrpc.cc beside protoc's own a.pb.h and a.pb.cc:
//
//   protoc --plugin=protoc-gen-authrpc=<prefix>/bin/protoc-gen-authrpc
//          --cpp_out=OUT --authrpc_out=OUT -I. -I<prefix>/include a.proto
//
// The generated code builds on components/protobuf/ (service_binding.h,
// stub_calls.h); the execution kind of a unary method comes from the
// (authrpc.execution) option of components/protobuf/options.proto.
#include <google/protobuf/compiler/code_generator.h>
#include <google/protobuf/compiler/cpp/names.h>
#include <google/protobuf/compiler/plugin.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/io/printer.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include <map>
#include <memory>
#include <string>

#include "authrpc/components/protobuf/options.pb.h"
#include "authrpc/components/protobuf/service_schema.h"

namespace {

namespace pb = google::protobuf;
using Vars = std::map<std::string, std::string>;

enum class Shape { kUnary, kServerStream, kClientStream, kBidi };

Shape shape_of(const pb::MethodDescriptor* m) {
  if (m->client_streaming()) return m->server_streaming() ? Shape::kBidi : Shape::kClientStream;
  return m->server_streaming() ? Shape::kServerStream : Shape::kUnary;
}

// A C++ namespace from a proto package: "a.b" → "a::b".
std::string cpp_namespace(const std::string& package) {
  std::string out;
  for (char c : package) out += c == '.' ? std::string("::") : std::string(1, c);
  return out;
}

// Where a unary method runs: "kInline", "kAsync" or "kBlocking"; an
// execution option on a streaming method is an error.
bool execution_of(const pb::MethodDescriptor* m, std::string* execution, std::string* error) {
  const authrpc::MethodExecution option = m->options().GetExtension(authrpc::execution);
  if (shape_of(m) != Shape::kUnary) {
    if (option == authrpc::EXECUTION_DEFAULT) return true;
    *error = m->full_name() + ": (authrpc.execution) applies to unary methods only; a streaming method "
                              "always runs as a coroutine on the IO thread";
    return false;
  }
  switch (option) {
    case authrpc::EXECUTION_INLINE: *execution = "kInline"; break;
    case authrpc::EXECUTION_ASYNC: *execution = "kAsync"; break;
    default: *execution = "kBlocking"; break;
  }
  return true;
}

Vars method_vars(const pb::MethodDescriptor* m, const std::string& execution) {
  return {{"method", m->name()},
          {"full", m->full_name()},
          {"request", pb::compiler::cpp::QualifiedClassName(m->input_type())},
          {"response", pb::compiler::cpp::QualifiedClassName(m->output_type())},
          {"execution", execution}};
}

// The server base class's virtual for one method, with its default body
// (UNIMPLEMENTED), so that a method added to the .proto file later does
// not break an implementation written before it.
void print_virtual(pb::io::Printer& p, const pb::MethodDescriptor* m, const std::string& execution) {
  Vars v = method_vars(m, execution);
  v["proto"] = authrpc::proto::rpc_declaration(*m);
  const bool coroutine = shape_of(m) != Shape::kUnary || execution == "kAsync";
  v["where"] = !coroutine ? (execution == "kInline" ? "on the IO thread: must not block" : "on the blocking pool")
                          : "a coroutine on the IO thread";
  v["return"] = coroutine ? "co_return" : "return";
  switch (shape_of(m)) {
    case Shape::kUnary:
      v["result"] = "::authrpc::Result<" + v["response"] + ">";
      v["params"] = "const " + v["request"] + "& /*request*/";
      break;
    case Shape::kServerStream:
      v["result"] = "::authrpc::Status";
      v["params"] = "const " + v["request"] + "& /*request*/,\n      ::authrpc::proto::ServerWriter<" +
                    v["response"] + ">& /*writer*/";
      break;
    case Shape::kClientStream:
      v["result"] = "::authrpc::Result<" + v["response"] + ">";
      v["params"] = "::authrpc::proto::ServerReader<" + v["request"] + ">& /*reader*/";
      break;
    case Shape::kBidi:
      v["result"] = "::authrpc::Status";
      v["params"] = "::authrpc::proto::ServerReaderWriter<" + v["request"] + ", " + v["response"] +
                    ">& /*stream*/";
      break;
  }
  if (coroutine) v["result"] = "::asio::awaitable<" + v["result"] + ">";
  p.Print(v,
          "\n  // $proto$: $where$.\n"
          "  virtual $result$ $method$(\n"
          "      ::authrpc::CallContext& /*ctx*/, $params$) {\n"
          "    $return$ unimplemented(\"$method$\");\n  }\n");
}

// One method's declarations in the stub class. The coroutine calls have an
// overload without CallOptions rather than a default argument: GCC 12
// destroys a defaulted argument's temporary wrongly in a co_await
// expression (`co_await stub.AsyncGet(request)` freed an invalid pointer).
void print_stub_declarations(pb::io::Printer& p, const pb::MethodDescriptor* m) {
  Vars v = method_vars(m, "");
  v["proto"] = authrpc::proto::rpc_declaration(*m);
  p.Print(v, "\n  // $proto$\n");
  switch (shape_of(m)) {
    case Shape::kUnary:
      p.Print(v,
              "  ::authrpc::Result<$response$> $method$(const $request$& request,\n"
              "      const ::authrpc::proto::CallOptions& options = {});\n"
              "  std::future<::authrpc::Result<$response$>> $method$Future(const $request$& request,\n"
              "      const ::authrpc::proto::CallOptions& options = {});\n"
              "  ::asio::awaitable<::authrpc::Result<$response$>> Async$method$(const $request$& request);\n"
              "  ::asio::awaitable<::authrpc::Result<$response$>> Async$method$(const $request$& request,\n"
              "      const ::authrpc::proto::CallOptions& options);\n");
      break;
    case Shape::kServerStream:
      p.Print(v,
              "  ::asio::awaitable<::authrpc::Result<::authrpc::proto::ClientReader<$response$>>> $method$(\n"
              "      const $request$& request);\n"
              "  ::asio::awaitable<::authrpc::Result<::authrpc::proto::ClientReader<$response$>>> $method$(\n"
              "      const $request$& request, const ::authrpc::proto::CallOptions& options);\n");
      break;
    case Shape::kClientStream:
    case Shape::kBidi:
      v["handle"] = shape_of(m) == Shape::kBidi ? "ClientReaderWriter" : "ClientWriter";
      p.Print(v,
              "  ::asio::awaitable<::authrpc::Result<::authrpc::proto::$handle$<$request$, $response$>>>\n"
              "  $method$();\n"
              "  ::asio::awaitable<::authrpc::Result<::authrpc::proto::$handle$<$request$, $response$>>>\n"
              "  $method$(const ::authrpc::proto::CallOptions& options);\n");
      break;
  }
}

// One method's definitions in the stub class.
void print_stub_definitions(pb::io::Printer& p, const pb::ServiceDescriptor* s, const pb::MethodDescriptor* m) {
  Vars v = method_vars(m, "");
  v["stub"] = s->name() + "Stub";
  v["service_full"] = s->full_name();
  switch (shape_of(m)) {
    case Shape::kUnary:
      p.Print(v,
              "\n::authrpc::Result<$response$> $stub$::$method$(const $request$& request,\n"
              "    const ::authrpc::proto::CallOptions& options) {\n"
              "  return ::authrpc::proto::call<$response$>(*channel_, \"$service_full$\", \"$method$\", request, "
              "options);\n}\n"
              "\nstd::future<::authrpc::Result<$response$>> $stub$::$method$Future(const $request$& request,\n"
              "    const ::authrpc::proto::CallOptions& options) {\n"
              "  return ::authrpc::proto::call_future<$response$>(channel_, \"$service_full$\", \"$method$\", "
              "request, options);\n}\n"
              "\n::asio::awaitable<::authrpc::Result<$response$>> $stub$::Async$method$(const $request$& request) {\n"
              "  return Async$method$(request, ::authrpc::proto::CallOptions());\n}\n"
              "\n::asio::awaitable<::authrpc::Result<$response$>> $stub$::Async$method$(const $request$& request,\n"
              "    const ::authrpc::proto::CallOptions& options) {\n"
              "  return ::authrpc::proto::async_call<$response$>(*channel_, \"$service_full$\", \"$method$\", "
              "request, options);\n}\n");
      break;
    case Shape::kServerStream:
      p.Print(v,
              "\n::asio::awaitable<::authrpc::Result<::authrpc::proto::ClientReader<$response$>>> $stub$::$method$(\n"
              "    const $request$& request) {\n"
              "  return $method$(request, ::authrpc::proto::CallOptions());\n}\n"
              "\n::asio::awaitable<::authrpc::Result<::authrpc::proto::ClientReader<$response$>>> $stub$::$method$(\n"
              "    const $request$& request, const ::authrpc::proto::CallOptions& options) {\n"
              "  return ::authrpc::proto::open_server_stream<$response$>(*channel_, \"$service_full$\", "
              "\"$method$\", request, options);\n}\n");
      break;
    case Shape::kClientStream:
    case Shape::kBidi:
      v["handle"] = shape_of(m) == Shape::kBidi ? "ClientReaderWriter" : "ClientWriter";
      p.Print(v,
              "\n::asio::awaitable<::authrpc::Result<::authrpc::proto::$handle$<$request$, $response$>>>\n"
              "$stub$::$method$() {\n"
              "  return $method$(::authrpc::proto::CallOptions());\n}\n"
              "\n::asio::awaitable<::authrpc::Result<::authrpc::proto::$handle$<$request$, $response$>>>\n"
              "$stub$::$method$(const ::authrpc::proto::CallOptions& options) {\n"
              "  return ::authrpc::proto::open_stream<::authrpc::proto::$handle$<$request$, $response$>>(\n"
              "      *channel_, \"$service_full$\", \"$method$\", options);\n}\n");
      break;
  }
}

// make_service(): one adapter of service_binding.h per method.
void print_binding(pb::io::Printer& p, const pb::MethodDescriptor* m, const std::string& execution) {
  const Vars v = method_vars(m, execution);
  switch (shape_of(m)) {
    case Shape::kUnary:
      if (execution == "kAsync") {
        p.Print(v,
                "  ::authrpc::proto::add_unary_async<$request$>(service, \"$method$\",\n"
                "      [impl](::authrpc::CallContext& ctx, const $request$& request) {\n"
                "        return impl->$method$(ctx, request);\n      });\n");
      } else {
        p.Print(v,
                "  ::authrpc::proto::add_unary<$request$>(service, \"$method$\", ::authrpc::Execution::$execution$,\n"
                "      [impl](::authrpc::CallContext& ctx, const $request$& request) {\n"
                "        return impl->$method$(ctx, request);\n      });\n");
      }
      break;
    case Shape::kServerStream:
      p.Print(v,
              "  ::authrpc::proto::add_server_stream<$request$, $response$>(service, \"$method$\",\n"
              "      [impl](::authrpc::CallContext& ctx, const $request$& request,\n"
              "             ::authrpc::proto::ServerWriter<$response$>& writer) {\n"
              "        return impl->$method$(ctx, request, writer);\n      });\n");
      break;
    case Shape::kClientStream:
      p.Print(v,
              "  ::authrpc::proto::add_client_stream<$request$, $response$>(service, \"$method$\",\n"
              "      [impl](::authrpc::CallContext& ctx, ::authrpc::proto::ServerReader<$request$>& reader) {\n"
              "        return impl->$method$(ctx, reader);\n      });\n");
      break;
    case Shape::kBidi:
      p.Print(v,
              "  ::authrpc::proto::add_bidi_stream<$request$, $response$>(service, \"$method$\",\n"
              "      [impl](::authrpc::CallContext& ctx,\n"
              "             ::authrpc::proto::ServerReaderWriter<$request$, $response$>& stream) {\n"
              "        return impl->$method$(ctx, stream);\n      });\n");
      break;
  }
}

// The stub names a unary method M also M + "Future" and "Async" + M: no
// other method of the service may have those names.
bool stub_names_free(const pb::ServiceDescriptor* s, const pb::MethodDescriptor* m, std::string* error) {
  if (shape_of(m) != Shape::kUnary) return true;
  for (const std::string& name : {m->name() + "Future", "Async" + m->name()}) {
    if (s->FindMethodByName(name) != nullptr) {
      *error = s->full_name() + ": method " + name + " has the name of " + m->name() +
               "'s future or coroutine call in the generated stub; rename one of them";
      return false;
    }
  }
  return true;
}

void print_service_header(pb::io::Printer& p, const pb::ServiceDescriptor* s, const std::vector<std::string>& exec) {
  const Vars v = {{"name", s->name()}, {"full", s->full_name()}};
  p.Print(v,
          "\n// Server side of $full$: derive from it, override its methods (each one\n"
          "// not overridden answers UNIMPLEMENTED) and register the result of\n"
          "// make_service() with Server::add_service().\n"
          "class $name$Service {\n public:\n"
          "  static constexpr std::string_view kServiceName = \"$full$\";\n"
          "  virtual ~$name$Service() = default;\n");
  for (int i = 0; i < s->method_count(); ++i) print_virtual(p, s->method(i), exec[i]);
  p.Print(v,
          "\n  // The authrpc::Service to register; it keeps `impl` alive.\n"
          "  static ::authrpc::Service make_service(std::shared_ptr<$name$Service> impl);\n\n"
          " protected:\n"
          "  static ::authrpc::Status unimplemented(std::string_view method) {\n"
          "    return ::authrpc::Status(::authrpc::Errc::kUnimplemented,\n"
          "                             \"$full$.\" + std::string(method) + \" is not implemented\");\n"
          "  }\n};\n"
          "\n// Client side of $full$: blocking, future and coroutine calls over a\n"
          "// Client, or over a Channel (per-call do_as).\n"
          "class $name$Stub {\n public:\n"
          "  explicit $name$Stub(::authrpc::Client& client);\n"
          "  explicit $name$Stub(std::shared_ptr<::authrpc::proto::Channel> channel);\n");
  for (int i = 0; i < s->method_count(); ++i) print_stub_declarations(p, s->method(i));
  p.Print("\n  ::authrpc::proto::Channel& channel() noexcept { return *channel_; }\n\n private:\n"
          "  std::shared_ptr<::authrpc::proto::Channel> channel_;\n};\n");
}

void print_service_source(pb::io::Printer& p, const pb::ServiceDescriptor* s, const std::vector<std::string>& exec) {
  const Vars v = {{"name", s->name()}, {"full", s->full_name()}};
  p.Print(v,
          "\n::authrpc::Service $name$Service::make_service(std::shared_ptr<$name$Service> impl) {\n"
          "  ::authrpc::Service service(\"$full$\");\n");
  for (int i = 0; i < s->method_count(); ++i) print_binding(p, s->method(i), exec[i]);
  p.Print(v,
          "  service.set_schema(::authrpc::proto::schema_of(\"$full$\"));\n"
          "  return service;\n}\n"
          "\n$name$Stub::$name$Stub(::authrpc::Client& client)\n"
          "    : channel_(std::make_shared<::authrpc::proto::Channel>(client)) {}\n"
          "\n$name$Stub::$name$Stub(std::shared_ptr<::authrpc::proto::Channel> channel)\n"
          "    : channel_(std::move(channel)) {}\n");
  for (int i = 0; i < s->method_count(); ++i) print_stub_definitions(p, s, s->method(i));
}

class AuthrpcGenerator final : public pb::compiler::CodeGenerator {
 public:
  bool Generate(const pb::FileDescriptor* file, const std::string& parameter, pb::compiler::GeneratorContext* context,
                std::string* error) const override {
    if (!parameter.empty()) {
      *error = "protoc-gen-authrpc takes no parameters (got \"" + parameter + "\")";
      return false;
    }
    std::vector<std::vector<std::string>> executions(file->service_count());
    for (int i = 0; i < file->service_count(); ++i) {
      const auto* s = file->service(i);
      executions[i].resize(s->method_count());
      for (int j = 0; j < s->method_count(); ++j) {
        if (!execution_of(s->method(j), &executions[i][j], error)) return false;
        if (!stub_names_free(s, s->method(j), error)) return false;
      }
    }
    const std::string base = pb::compiler::cpp::StripProto(file->name());
    const Vars v = {{"file", file->name()}, {"base", base}, {"ns", cpp_namespace(file->package())}};
    {
      std::unique_ptr<pb::io::ZeroCopyOutputStream> out(context->Open(base + ".authrpc.h"));
      pb::io::Printer p(out.get(), '$');
      p.Print(v,
              "// Generated by protoc-gen-authrpc from $file$. Do not edit.\n#pragma once\n\n"
              "#include <authrpc/components/protobuf/service_binding.h>\n"
              "#include <authrpc/components/protobuf/stub_calls.h>\n\n"
              "#include <future>\n#include <memory>\n#include <string>\n#include <string_view>\n\n"
              "#include \"$base$.pb.h\"\n");
      if (!file->package().empty()) p.Print(v, "\nnamespace $ns$ {\n");
      for (int i = 0; i < file->service_count(); ++i) print_service_header(p, file->service(i), executions[i]);
      if (!file->package().empty()) p.Print(v, "\n}  // namespace $ns$\n");
    }
    std::unique_ptr<pb::io::ZeroCopyOutputStream> out(context->Open(base + ".authrpc.cc"));
    pb::io::Printer p(out.get(), '$');
    p.Print(v,
            "// Generated by protoc-gen-authrpc from $file$. Do not edit.\n"
            "#include \"$base$.authrpc.h\"\n\n#include <authrpc/components/protobuf/service_schema.h>\n");
    if (!file->package().empty()) p.Print(v, "\nnamespace $ns$ {\n");
    for (int i = 0; i < file->service_count(); ++i) print_service_source(p, file->service(i), executions[i]);
    if (!file->package().empty()) p.Print(v, "\n}  // namespace $ns$\n");
    return true;
  }
};

}  // namespace

int main(int argc, char* argv[]) {
  AuthrpcGenerator generator;
  return pb::compiler::PluginMain(argc, argv, &generator);
}
