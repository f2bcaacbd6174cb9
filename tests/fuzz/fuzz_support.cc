#include "tests/fuzz/fuzz_support.h"

#include "authrpc/security/memory_token_store.h"

#include <asio/post.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace authrpc::fuzz {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz harness: %s\n", what);
  std::abort();
}

InputStream::InputStream(const asio::any_io_executor& executor, std::string_view input,
                         std::vector<std::size_t> chunks, Endpoint::Scheme scheme)
    : executor_(executor), input_(input), chunks_(std::move(chunks)), scheme_(scheme) {}

std::size_t InputStream::take(asio::mutable_buffer buffer, std::error_code& ec) {
  if (closed_) {
    ec = asio::error::operation_aborted;
    return 0;
  }
  if (pos_ == input_.size()) {
    ec = asio::error::eof;
    return 0;
  }
  std::size_t n = std::min(buffer.size(), input_.size() - pos_);
  if (!chunks_.empty()) n = std::min(n, chunks_[next_chunk_++ % chunks_.size()]);
  std::memcpy(buffer.data(), input_.data() + pos_, n);
  pos_ += n;
  ec = {};
  return n;
}

asio::awaitable<std::size_t> InputStream::read_some(asio::mutable_buffer buffer,
                                                    std::error_code& ec) {
  co_return take(buffer, ec);
}

std::size_t InputStream::try_read_some(asio::mutable_buffer buffer, std::error_code& ec) {
  return take(buffer, ec);
}

void InputStream::write_all(std::span<const asio::const_buffer> buffers, WriteCompletion& done) {
  for (const auto& b : buffers) written_ += b.size();
  const bool closed = closed_;
  // Never from inside this call (the ByteStream contract).
  asio::post(executor_, [&done, closed] {
    done.write_done(closed ? std::error_code(asio::error::operation_aborted) : std::error_code());
  });
}

std::size_t InputStream::try_write(asio::const_buffer buffer, std::error_code& ec) {
  if (closed_) {
    ec = asio::error::operation_aborted;
    return 0;
  }
  ec = {};
  written_ += buffer.size();
  return buffer.size();
}

std::vector<std::size_t> take_chunks(std::string_view& data) {
  std::vector<std::size_t> chunks;
  if (data.empty()) return chunks;
  const std::size_t count = static_cast<std::uint8_t>(data[0]) % 4;
  data.remove_prefix(1);
  for (std::size_t i = 0; i < count && !data.empty(); ++i) {
    const auto size = static_cast<std::uint8_t>(data[0]);
    chunks.push_back(size == 0 ? 1 : size);
    data.remove_prefix(1);
  }
  return chunks;
}

ScratchDir::ScratchDir(const char* tag) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                        "/authrpc-fuzz-" + tag + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) fail("mkdtemp failed");
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void ScratchDir::clear() const {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path_, ec)) {
    std::filesystem::remove_all(entry.path(), ec);
  }
}

std::string ScratchDir::write(const std::string& name, std::string_view bytes) const {
  const std::string file = path_ + "/" + name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail("cannot write a scratch file");
  return file;
}

}  // namespace authrpc::fuzz

namespace authrpc::fuzz {

TokenRealm::TokenRealm()
    : clock(std::make_shared<security::ManualClock>(
          security::TokenTime(std::chrono::milliseconds(1'700'000'000'000)))) {
  auto store = std::make_shared<security::MemoryTokenStore>();
  security::MasterKey key;
  key.id = 1;
  key.created = clock->now();
  key.expires = clock->now() + std::chrono::hours(24 * 30);
  key.secret = security::SecretBytes(std::string_view("authrpc fuzz master key, fixed!!"));
  if (!store->put_master_key(key).ok()) fail("put_master_key");
  store->raise_counters(0, 1);
  security::SecretManagerOptions options;
  options.clock = clock;
  auto opened = security::SecretManager::open(store, options);
  if (!opened.ok()) fail("SecretManager::open");
  secrets = std::move(*opened);
  auto issued = secrets->issue({"alice@EXAMPLE.COM", "yarn@EXAMPLE.COM", "", std::string(kService)});
  if (!issued.ok()) fail("SecretManager::issue");
  token = std::move(*issued);
}

const TokenRealm& token_realm() {
  static const TokenRealm* realm = new TokenRealm();  // lives for the process, never destroyed
  return *realm;
}

}  // namespace authrpc::fuzz
