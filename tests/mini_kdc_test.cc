// Tests for tests/testing/mini_kdc.h against a real krb5kdc: realm setup, kinit,
// request counting, key rotation, lifetimes, stopping, and two KDCs at once.
#include "tests/testing/mini_kdc.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace authrpc::testing {
namespace {

using namespace std::chrono_literals;

#define ASSERT_OK(expr)                                      \
  do {                                                       \
    const ::authrpc::Status _s = (expr);                     \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s.to_string(); \
  } while (0)

// Runs ARGV with the KDC's environment; its exit code (-1 if it could not run).
int exit_code(const MiniKdc& kdc, const std::vector<std::string>& argv,
              std::string* out = nullptr) {
  auto r = kdc.run(argv);
  if (!r.ok()) {
    ADD_FAILURE() << r.status().to_string();
    return -1;
  }
  if (out) *out = r->out + r->err;
  return r->exit_code;
}

bool port_is_free(int port) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
    int fd = socket(AF_INET, type, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool bound = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (!bound) return false;
  }
  return true;
}

// A started realm with alice (keytab client_keytab()) and rpc/localhost
// (keytab service_keytab()).
class MiniKdcTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start_realm(kdc_)); }

  static void start_realm(MiniKdc& kdc) {
    ASSERT_OK(kdc.start());
    ASSERT_OK(kdc.add_principal("alice"));
    ASSERT_OK(kdc.create_keytab("alice", kdc.client_keytab()));
    ASSERT_OK(kdc.create_service_keytab("rpc/localhost"));
  }

  MiniKdc kdc_;
};

TEST_F(MiniKdcTest, KinitWithKeytabFillsTheCcache) {
  EXPECT_NE(exit_code(kdc_, {"klist", "-s"}), 0) << "no TGT before kinit";
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));

  std::string out;
  EXPECT_EQ(exit_code(kdc_, {"klist", "-s"}), 0);
  EXPECT_EQ(exit_code(kdc_, {"klist"}, &out), 0);
  EXPECT_NE(out.find("Default principal: alice@AUTHRPC.TEST"), std::string::npos) << out;
  EXPECT_NE(out.find("krbtgt/AUTHRPC.TEST@AUTHRPC.TEST"), std::string::npos) << out;
}

TEST_F(MiniKdcTest, KinitWithPreauthIsTwoAsRequests) {
  const KdcRequestCounts before = kdc_.kdc_request_counts();
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
  const KdcRequestCounts after = kdc_.kdc_request_counts();
  EXPECT_EQ(after.as - before.as, 2) << "NEEDED_PREAUTH, then ISSUE";
  EXPECT_EQ(after.tgs - before.tgs, 0);
}

TEST(MiniKdcNoPreauthTest, KinitIsOneAsRequest) {
  MiniKdcOptions options;
  options.require_preauth = false;
  MiniKdc kdc(options);
  ASSERT_OK(kdc.start());
  ASSERT_OK(kdc.add_principal("alice"));
  ASSERT_OK(kdc.create_keytab("alice", kdc.client_keytab()));
  const int before = kdc.kdc_requests();
  ASSERT_OK(kdc.kinit("alice", kdc.client_keytab()));
  EXPECT_EQ(kdc.kdc_requests() - before, 1);
}

TEST_F(MiniKdcTest, ServiceTicketIsCached) {
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
  const KdcRequestCounts start = kdc_.kdc_request_counts();
  ASSERT_EQ(exit_code(kdc_, {"kvno", "rpc/localhost"}), 0);
  const KdcRequestCounts first = kdc_.kdc_request_counts();
  ASSERT_EQ(exit_code(kdc_, {"kvno", "rpc/localhost"}), 0);
  const KdcRequestCounts second = kdc_.kdc_request_counts();
  EXPECT_EQ(first.tgs - start.tgs, 1);
  EXPECT_EQ(second.tgs - first.tgs, 0) << "second kvno should use the cached ticket";
  EXPECT_EQ(second.as, start.as);
}

TEST_F(MiniKdcTest, ServiceKeytabDecryptsTickets) {
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
  std::string out;
  EXPECT_EQ(exit_code(kdc_, {"kvno", "-k", kdc_.service_keytab(), "rpc/localhost"}, &out), 0)
      << out;
}

TEST_F(MiniKdcTest, ChangeKeyMakesOldKeytabStale) {
  ASSERT_EQ(kdc_.key_version("rpc/localhost").value(), 1);
  ASSERT_OK(kdc_.change_key("rpc/localhost"));
  EXPECT_EQ(kdc_.key_version("rpc/localhost").value(), 2);

  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));  // a fresh ccache: no old ticket
  std::string out;
  EXPECT_NE(exit_code(kdc_, {"kvno", "-k", kdc_.service_keytab(), "rpc/localhost"}, &out), 0)
      << "the keytab only has kvno 1: " << out;
  EXPECT_NE(out.find("kvno = 2"), std::string::npos) << out;

  ASSERT_OK(kdc_.create_keytab("rpc/localhost", kdc_.service_keytab()));  // append kvno 2
  EXPECT_EQ(exit_code(kdc_, {"kvno", "-k", kdc_.service_keytab(), "rpc/localhost"}, &out), 0)
      << out;
}

TEST_F(MiniKdcTest, PasswordPrincipal) {
  ASSERT_OK(kdc_.add_principal("bob", std::string("bob-secret")));
  EXPECT_FALSE(kdc_.kinit_with_password("bob", "wrong").ok());
  ASSERT_OK(kdc_.kinit_with_password("bob", "bob-secret"));
  std::string out;
  EXPECT_EQ(exit_code(kdc_, {"klist"}, &out), 0);
  EXPECT_NE(out.find("Default principal: bob@AUTHRPC.TEST"), std::string::npos) << out;
}

TEST_F(MiniKdcTest, ErrorsCarryTheCommandAndItsStderr) {
  Status dup = kdc_.add_principal("alice");
  EXPECT_EQ(dup.code, make_error_code(Errc::kConfigError));
  EXPECT_NE(dup.message.find("addprinc -randkey alice"), std::string::npos) << dup.message;
  EXPECT_NE(dup.message.find("already exists"), std::string::npos) << dup.message;

  Status unknown = kdc_.kinit("nobody", kdc_.client_keytab());
  EXPECT_EQ(unknown.code, make_error_code(Errc::kConfigError));
  EXPECT_NE(unknown.message.find("kinit -kt"), std::string::npos) << unknown.message;
  EXPECT_NE(unknown.message.find("nobody@AUTHRPC.TEST"), std::string::npos) << unknown.message;

  Status secret = kdc_.add_principal("carol", std::string("carol-secret"));
  ASSERT_OK(secret);
  Status again = kdc_.add_principal("carol", std::string("carol-secret"));
  EXPECT_EQ(again.message.find("carol-secret"), std::string::npos)
      << "passwords stay out of errors";
}

TEST_F(MiniKdcTest, ShortTicketLifetimeExpires) {
  EXPECT_EQ(kdc_.set_ticket_lifetime(24h).code, make_error_code(Errc::kInvalidArgument));
  ASSERT_OK(kdc_.set_ticket_lifetime(1s));
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
  std::this_thread::sleep_for(1500ms);
  EXPECT_NE(exit_code(kdc_, {"klist", "-s"}), 0) << "the TGT should have expired";
}

TEST_F(MiniKdcTest, EnvNamesTheRealmFiles) {
  auto env = kdc_.env();
  EXPECT_EQ(env["KRB5_CONFIG"], kdc_.dir() + "/krb5.conf");
  EXPECT_EQ(env["KRB5_KDC_PROFILE"], kdc_.dir() + "/kdc.conf");
  EXPECT_EQ(env["KRB5CCNAME"], "FILE:" + kdc_.dir() + "/ccache");
  EXPECT_EQ(env["KRB5_KTNAME"], "FILE:" + kdc_.service_keytab());
  EXPECT_EQ(env["KRB5_CLIENT_KTNAME"], "FILE:" + kdc_.client_keytab());
  EXPECT_EQ(env["KRB5RCACHEDIR"], kdc_.dir() + "/rcache");
  EXPECT_EQ(env["AUTHRPC_KDC_PORT"], std::to_string(kdc_.port()));
  EXPECT_EQ(kdc_.realm(), "AUTHRPC.TEST");

  kdc_.set_env_for_process();
  EXPECT_STREQ(std::getenv("KRB5_CONFIG"), env["KRB5_CONFIG"].c_str());
  for (const auto& [name, value] : env) unsetenv(name.c_str());
}

TEST_F(MiniKdcTest, StopKillsTheKdcAndFreesThePort) {
  const pid_t pid = kdc_.pid();
  const int port = kdc_.port();
  ASSERT_GT(pid, 0);
  ASSERT_OK(kdc_.stop());
  EXPECT_FALSE(kdc_.running());
  EXPECT_EQ(kill(pid, 0), -1) << "krb5kdc pid " << pid << " still exists";
  EXPECT_TRUE(port_is_free(port));

  Status s = kdc_.kinit("alice", kdc_.client_keytab());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("Cannot contact any KDC"), std::string::npos) << s.message;
}

TEST_F(MiniKdcTest, RestartServesTheSameRealm) {
  ASSERT_OK(kdc_.stop());
  ASSERT_OK(kdc_.start());
  ASSERT_OK(kdc_.kinit("alice", kdc_.client_keytab()));
}

TEST(MiniKdcTwoTest, TwoKdcsGetDifferentPortsAndDoNotInterfere) {
  MiniKdc one, two;
  ASSERT_OK(one.start());
  ASSERT_OK(two.start());
  EXPECT_NE(one.port(), two.port());
  EXPECT_NE(one.dir(), two.dir());
  for (MiniKdc* kdc : {&one, &two}) {
    ASSERT_OK(kdc->add_principal("alice"));
    ASSERT_OK(kdc->create_keytab("alice", kdc->client_keytab()));
  }

  const int two_before = two.kdc_requests();
  ASSERT_OK(one.kinit("alice", one.client_keytab()));
  EXPECT_EQ(two.kdc_requests(), two_before) << "kinit against one reached two";
  // Same realm name, different random keys: one's keytab is useless at two.
  EXPECT_FALSE(two.kinit("alice", one.client_keytab()).ok());
  ASSERT_OK(two.kinit("alice", two.client_keytab()));
}

TEST(MiniKdcTimingTest, StartAndStopTakeLessThanTwoSeconds) {
  const auto t0 = std::chrono::steady_clock::now();
  MiniKdc kdc;
  ASSERT_OK(kdc.start());
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_OK(kdc.stop());
  const auto t2 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  ::testing::Test::RecordProperty("start_ms", std::to_string(ms(t1 - t0)));
  ::testing::Test::RecordProperty("stop_ms", std::to_string(ms(t2 - t1)));
  EXPECT_LT(t2 - t0, 2s) << "start " << ms(t1 - t0) << " ms, stop " << ms(t2 - t1) << " ms";
}

}  // namespace
}  // namespace authrpc::testing
