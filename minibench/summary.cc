#include "minibench/summary.h"

#include <cmath>
#include <string>
#include <string_view>

namespace minibench {
namespace {

// Display width of UTF-8 text (µs, ×): code points, not bytes.
std::size_t width(const std::string& s) {
  std::size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

std::string pad(std::string s, std::size_t w) {
  const std::size_t have = width(s);
  if (have < w) s.append(w - have, ' ');
  return s;
}

const Row* find(const std::vector<Row>& rows, const std::string& name) {
  for (const auto& r : rows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string format(const char* fmt, double a, double b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

// "0.102 ms / 86 µs", with " (3.24×)" against `base` if given.
std::string cell(const Row* r, const Row* base) {
  if (r == nullptr) return "-";
  std::string s = format("%.3f ms / %.0f µs", r->summary.mean_us / 1000.0, r->summary.p50_us);
  if (base != nullptr && base != r && base->summary.p50_us > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.2f×)", r->summary.p50_us / base->summary.p50_us);
    s += buf;
  }
  return s;
}

struct Line {
  std::string label;
  std::string suffix;  // row name after the method: "/tcp", "+tls/tcp", ...
};

struct Column {
  std::string title;
  std::string method;
};

// One table; false if it had no cell to show.
bool print_table(std::FILE* out, const std::vector<Row>& rows, const std::vector<Line>& lines,
                 const std::vector<Column>& columns, bool first_is_base) {
  std::vector<std::vector<std::string>> cells;
  bool any = false;
  for (const auto& line : lines) {
    std::vector<std::string> texts{line.label};
    const Row* base = find(rows, "simple" + line.suffix);
    bool line_any = false;
    for (const auto& c : columns) {
      const Row* r = find(rows, c.method + line.suffix);
      line_any = line_any || r != nullptr;
      texts.push_back(cell(r, first_is_base || c.method != "simple" ? base : nullptr));
    }
    if (!line_any) continue;
    any = true;
    cells.push_back(std::move(texts));
  }
  if (!any) return false;
  std::vector<std::string> header{"transport"};
  for (const auto& c : columns) header.push_back(c.title);
  std::vector<std::size_t> widths(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) widths[i] = width(header[i]);
  for (const auto& line : cells) {
    for (std::size_t i = 0; i < line.size(); ++i) widths[i] = std::max(widths[i], width(line[i]));
  }
  auto print_line = [&](const std::vector<std::string>& texts) {
    std::string s;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      s += i + 1 < texts.size() ? pad(texts[i], widths[i] + 3) : texts[i];
    }
    std::fprintf(out, "  %s\n", s.c_str());
  };
  print_line(header);
  for (const auto& line : cells) print_line(line);
  return true;
}

}  // namespace

void print_summary(std::FILE* out, const std::vector<Row>& rows, std::size_t warmup) {
  const std::vector<Line> lines = {
      {"tcp", "/tcp"},
      {"unix", "/unix"},
      {"tcp + TLS", "+tls/tcp"},
      {"tcp + TLS, resumed (session ticket kept)", "+tls-resume/tcp"},
  };
  std::fprintf(out, "\nsummary (shape of HADOOP-6637): mean ms / p50 µs per session; secure "
                    "cells: (p50 ÷ No security p50 on the same line)\n");
  const bool main_table =
      print_table(out, rows, lines,
                  {{"No security", "simple"}, {"Kerberos", "kerberos"}, {"Delegation token", "token"}},
                  false);
  if (!main_table) std::fprintf(out, "  (no simple, kerberos or token row measured)\n");
  std::vector<Line> interop_lines(lines.begin(), lines.end() - 1);
  std::fprintf(out, "interop through Cyrus SASL (same cells, ratio to No security):\n");
  if (!print_table(out, rows, interop_lines,
                   {{"Kerberos (SASL GSSAPI)", "kerberos-sasl"},
                    {"Token (SASL DIGEST-MD5)", "token-digest"},
                    {"Token (SASL SCRAM-SHA-256)", "token-scram"}},
                   true)) {
    std::fprintf(out, "  (no kerberos-sasl, token-digest or token-scram row measured)\n");
  }
  // Bearer access tokens travel over TLS only: one line. The cold check
  // (jwt-verify/<alg>, in process) is what a token the server has not seen
  // adds to a session.
  const std::vector<Column> bearer = {{"JWT (server's token cache warm)", "jwt"},
                                      {"JWT (no cache: cold)", "jwt-cold"}};
  if (find(rows, "jwt+tls/tcp") != nullptr || find(rows, "jwt-cold+tls/tcp") != nullptr) {
    std::fprintf(out, "bearer access tokens (OAuth 2.0 JWT; same cells, ratio to No security):\n");
    print_table(out, rows, {lines[2]}, bearer, true);
  }
  constexpr std::string_view kVerifyRow = "jwt-verify/";  // then the algorithm
  std::string verify;
  for (const auto& r : rows) {
    if (!r.name.starts_with(kVerifyRow)) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s %.1f µs", r.name.substr(kVerifyRow.size()).c_str(),
                  r.summary.p50_us);
    verify += (verify.empty() ? "" : ", ") + std::string(buf);
  }
  if (!verify.empty()) {
    std::fprintf(out, "cold JWT check (signature + claims, in process, p50): %s\n", verify.c_str());
  }

  // Each session opened a connection of its own: the server's accepted
  // connections during each row equal its warm-up + timed sessions.
  std::size_t counted = 0;
  std::string mismatches;
  for (const auto& r : rows) {
    if (!r.server_connections) continue;
    ++counted;
    const long expected = static_cast<long>(warmup + r.summary.n);
    if (*r.server_connections != expected) {
      mismatches += " " + r.name + " (" + std::to_string(*r.server_connections) + " for " +
                    std::to_string(expected) + ")";
    }
  }
  if (counted > 0 && mismatches.empty()) {
    std::fprintf(out, "connections: in each of the %zu authrpc rows the server accepted exactly "
                      "warm-up + n connections (one per session)\n", counted);
  } else if (counted > 0) {
    std::fprintf(out, "connections: accepted connections differ from warm-up + n in:%s\n",
                 mismatches.c_str());
  } else {
    std::fprintf(out, "connections: not counted (an external --server has no counter to read)\n");
  }
  std::fprintf(out, "caching: every session opens a new connection and authenticates from "
                    "scratch, keeping only what a real client keeps: the Kerberos service ticket "
                    "in its credential cache (kerberos*, floor/gss*: 0 KDC requests per session "
                    "after the warm-up), and in the resumed TLS row its TLS session ticket%s\n",
               find(rows, "jwt+tls/tcp") != nullptr
                   ? "; the jwt rows send the same access token every session, as a client "
                     "does until it nears its exp"
                   : "");
}

}  // namespace minibench
