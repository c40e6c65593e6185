// make_seeds.cpp — writes the seed corpora of the libFuzzer targets into
// <dir>/fuzz_key, <dir>/fuzz_record, <dir>/fuzz_reply and <dir>/fuzz_live.
// The seeds are committed (fuzz/corpus/); rerun this only to change them:
//
//   g++ -std=c++17 -Imodule -Ifuzz -o build/make_seeds fuzz/make_seeds.cpp
//       module/record.cpp module/replayable.cpp module/outcome.cpp module/compression.cpp module/live_log.cpp
//       module/pieces.cpp module/fingerprint.cpp -lzstd -lcrypto
//       (one line)
//   build/make_seeds fuzz/corpus
//
// Records are built with the module's own encoders (record.hpp); the key
// values and the RESP framing are spelled out here.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "big_endian.hpp"
#include "compression.hpp"
#include "pieces.hpp"
#include "live_log.hpp"
#include "record.hpp"

namespace {

std::string g_dir;
int g_written = 0;

void seed(const std::string& target, const std::string& name, const std::string& bytes)
{
    const std::string path = g_dir + "/" + target + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()
        || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::exit(1);
    }
    ++g_written;
}

idem::Digest other_digest()
{
    idem::Digest d = fuzz::fixed_digest();
    d[31] ^= 0xff;
    return d;
}

std::string claim(const idem::Digest& fp, const std::string& token)
{
    std::string out(idem::claim_size(token), '\0');
    out.resize(idem::encode_claim(fp, token, out.data()));
    return out;
}

std::string response(const idem::Digest& fp, std::uint16_t status,
                     const std::vector<idem::Header>& headers, const std::string& body,
                     std::uint8_t flags = 0, const std::vector<idem::Header>& trailers = {})
{
    const idem::ResponseExtras extras{flags, trailers.data(), trailers.size()};
    std::string out(idem::response_size(headers.data(), headers.size(), body.size(), extras), '\0');
    char* at = idem::encode_response_head(out.data(), fp, status, headers.data(),
                                          headers.size(), body.size(), extras);
    body.copy(at, body.size());
    idem::encode_response_tail(at + body.size(), extras);
    return out;
}

std::string unreplayable(const idem::Digest& fp, std::uint16_t status)
{
    std::string out(idem::unreplayable_size, '\0');
    idem::encode_unreplayable(fp, status, out.data());
    return out;
}

std::string marker_saying(const idem::Digest& fp, std::uint16_t status, idem::MarkerWhy why)
{
    std::string out(idem::unreplayable_why_size, '\0');
    out.resize(idem::encode_unreplayable(fp, status, why, out.data()));
    return out;
}

std::string bulk(const std::string& payload)
{
    return "$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n";
}

// fuzz_reply's command mode: 0x80, then each argument as len(2) bytes.
std::string command(const std::vector<std::string>& args)
{
    std::string out = "\x80";
    for (const std::string& a : args) {
        out.push_back(static_cast<char>(a.size() >> 8));
        out.push_back(static_cast<char>(a.size() & 0xff));
        out += a;
    }
    return out;
}

// fuzz_reply's reply mode: the chunk size, then the stream.
std::string replies(unsigned chunk, const std::string& stream)
{
    return std::string(1, static_cast<char>(chunk & 0x7f)) + stream;
}

void key_seeds()
{
    const std::string t = "fuzz_key";
    std::string visible;
    for (int c = 0x21; c <= 0x7e; ++c) {
        visible.push_back(static_cast<char>(c));
    }
    seed(t, "bare_simple", "abc");
    seed(t, "bare_uuid", "4f1c2b7e-8d3a-4b6e-9f00-1a2b3c4d5e6f");
    seed(t, "bare_all_visible", visible);
    seed(t, "bare_1", "x");
    seed(t, "bare_255", std::string(255, 'k'));
    seed(t, "bare_256_too_long", std::string(256, 'k'));
    seed(t, "quoted_simple", "\"abc\"");
    seed(t, "quoted_space", "\"order 42 / retry\"");
    seed(t, "quoted_escapes", "\"a\\\"b\\\\c\"");
    seed(t, "quoted_leading_quote", "\"\\\"abc\"");
    seed(t, "quoted_255", "\"" + std::string(255, 'q') + "\"");
    seed(t, "quoted_255_escaped", "\"" + std::string(2 * 255, '\\') + "\"");
    seed(t, "quoted_256_too_long", "\"" + std::string(256, 'q') + "\"");
    seed(t, "quoted_empty", "\"\"");
    seed(t, "empty", "");
    seed(t, "bad_unterminated", "\"abc");
    seed(t, "bad_inner_quote", "\"a\"b\"");
    seed(t, "bad_parameters", "\"abc\";a=1");
    seed(t, "bad_escape", "\"a\\x\"");
    seed(t, "bad_escape_at_end", "\"\\\"");
    seed(t, "bad_bare_space", "a b");
    seed(t, "bad_bare_del", "abc\x7f");
    seed(t, "bad_bare_tab", "\tabc");
    seed(t, "bad_utf8", "cl\xc3\xa9");
    seed(t, "bad_quoted_ctl", "\"a\nb\"");
    // For derive_redis_key: prefix length, scope length, prefix scope key.
    seed(t, "derive_prefix_scope_key", std::string("\x05\x0a") + "idem:api.ex.com" + "key-123");
    seed(t, "derive_empty_prefix_scope", std::string("\x00\x00", 2) + "key");
    seed(t, "derive_long_scope", std::string("\x04\xff") + "idm:" + std::string(255, 's') + "k");
}

void record_seeds()
{
    const std::string t = "fuzz_record";
    const idem::Digest fp = fuzz::fixed_digest();
    const std::vector<idem::Header> typical = {
        {"Content-Type", "application/json"},
        {"Location", "/orders/42"},
        {"Set-Cookie", "a=1; Path=/"},
        {"Set-Cookie", "b=2; Path=/"},
    };
    std::string binary;
    for (int i = 0; i < 256; ++i) {
        binary.push_back(static_cast<char>(i));
    }

    seed(t, "claim_empty_token", claim(fp, ""));
    seed(t, "claim_token", claim(fp, "0123456789abcdef"));
    seed(t, "claim_token_255", claim(fp, std::string(255, 't')));
    seed(t, "response_empty", response(fp, 204, {}, ""));
    seed(t, "response_typical", response(fp, 201, typical, "{\"id\":42,\"status\":\"created\"}"));
    seed(t, "response_empty_name_value", response(fp, 200, {{"", ""}, {"X", ""}}, "ok"));
    seed(t, "response_binary_body", response(fp, 200, {{"Content-Type", "application/octet-stream"}}, binary));
    seed(t, "response_1k_body", response(fp, 500, {{"Retry-After", "5"}}, std::string(1024, 'b')));
    seed(t, "response_ranges", response(fp, 200, typical, "0123456789", idem::allow_ranges | idem::single_range));
    seed(t, "response_trailers", response(fp, 200, {{"Content-Type", "application/grpc"}}, std::string("\0\0\0\0\2hi", 7),
                                          idem::expect_trailers, {{"grpc-status", "0"}, {"grpc-message", "ok"}}));
    seed(t, "unreplayable_413", unreplayable(fp, 413));
    seed(t, "unreplayable_0", unreplayable(fp, 0));
    seed(t, "unreplayable_65535", unreplayable(fp, 65535));
    seed(t, "unreplayable_why_600", marker_saying(fp, 600, idem::MarkerWhy::bad_status));
    seed(t, "unreplayable_why_name", marker_saying(fp, 201, idem::MarkerWhy::bad_header_name));

    std::string r = response(fp, 200, typical, "body");
    seed(t, "bad_truncated", r.substr(0, r.size() - 1));
    seed(t, "bad_trailing", r + "x");
    std::string v = r;
    v[3] = 2;
    seed(t, "bad_version", v);
    std::string k0 = unreplayable(fp, 200);
    k0[4] = 0;
    seed(t, "bad_kind_0", k0);
    k0[4] = 4;
    seed(t, "bad_kind_4", k0);
    std::string m = claim(fp, "tok");
    m[0] = 'X';
    seed(t, "bad_magic", m);
    std::string count = response(fp, 200, {{"A", "b"}}, "");
    count[3 + 1 + 1 + 32 + 2 + 1] = 2;  // header_count 2, one header there
    seed(t, "bad_header_count", count);

    // compressed records (version 3): a JSON list, a response with extras
    idem::RecordCompressor compressor(idem::record_compression_level);
    std::string list = "[";
    for (int i = 0; list.size() < 3000; ++i) {
        list += "{\"id\":\"pi_" + std::to_string(i * 7919 % 10007) + "\",\"status\":\"succeeded\"},";
    }
    for (const auto& [name, plain] :
         {std::pair<const char*, std::string>{"compressed_list", response(fp, 200, typical, list)},
          {"compressed_trailers", response(fp, 200, {{"Content-Type", "application/grpc"}}, list, idem::expect_trailers,
                                           {{"grpc-status", "0"}})}}) {
        std::string packed(idem::RecordCompressor::bound(plain.size()), '\0');
        packed.resize(compressor.compress(plain, packed.data()));
        if (packed.empty()) {
            std::fprintf(stderr, "%s did not compress\n", name);
            std::exit(1);
        }
        seed(t, name, packed);
    }

    // a response kept in pieces (version 4): the record listing three
    std::string sizes;
    for (std::uint32_t stored : {1048602u, 1048602u, 4242u}) {
        char be[4];
        idem::put_be<std::uint32_t>(be, stored);
        sizes.append(be, 4);
    }
    idem::PieceList pieces;
    pieces.id = "0123456789abcdef";
    pieces.count = 3;
    pieces.size = 1048576;
    pieces.body_size = 2 * 1048576 + 4216;
    pieces.stored_sizes = sizes;
    std::string listed(idem::pieces_record_size(typical.data(), typical.size(), {}, 3), '\0');
    idem::encode_pieces_record(listed.data(), fp, 201, typical.data(), typical.size(), {}, pieces);
    seed(t, "pieces_record", listed);
    std::string piece(idem::piece_head_size, '\0');
    idem::encode_piece_head(piece.data(), pieces.id, 2, idem::piece_form_plain);
    seed(t, "piece", piece + "the last piece's bytes");
}

void reply_seeds()
{
    const std::string t = "fuzz_reply";
    const idem::Digest fp = fuzz::fixed_digest();
    const std::string replay =
        bulk(response(fp, 201, {{"Content-Type", "application/json"}, {"Location", "/orders/42"}},
                      "{\"id\":42}"));

    seed(t, "nil", replies(0, "$-1\r\n"));
    seed(t, "nil_bytewise", replies(1, "$-1\r\n"));
    seed(t, "error_noscript",
         replies(0, "-NOSCRIPT No matching script. Please use EVAL.\r\n"));
    seed(t, "error_oom",
         replies(0, "-OOM command not allowed when used memory > 'maxmemory'.\r\n"));
    seed(t, "error_wrongtype",
         replies(0, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"));
    seed(t, "error_readonly", replies(5, "-READONLY You can't write against a read only replica.\r\n"));
    seed(t, "status_ok", replies(0, "+OK\r\n"));
    seed(t, "integer", replies(0, ":1\r\n"));
    seed(t, "integer_negative", replies(2, ":-9223372036854775808\r\n"));
    seed(t, "array", replies(0, "*2\r\n$3\r\nfoo\r\n:42\r\n"));
    seed(t, "array_nested", replies(3, "*2\r\n*1\r\n$-1\r\n*2\r\n+OK\r\n-ERR x\r\n"));
    seed(t, "array_nil", replies(0, "*-1\r\n"));
    seed(t, "array_empty", replies(0, "*0\r\n"));
    seed(t, "bulk_empty", replies(0, "$0\r\n\r\n"));
    seed(t, "bulk_corrupt", replies(0, bulk("hello")));
    seed(t, "bulk_claim_in_flight", replies(0, bulk(claim(fp, "0123456789abcdef"))));
    seed(t, "bulk_claim_mismatch", replies(0, bulk(claim(other_digest(), "0123456789abcdef"))));
    seed(t, "bulk_response_replay", replies(0, replay));
    seed(t, "bulk_response_replay_chunked", replies(7, replay));
    seed(t, "bulk_response_mismatch",
         replies(0, bulk(response(other_digest(), 200, {{"A", "b"}}, "x"))));
    seed(t, "bulk_unreplayable", replies(0, bulk(unreplayable(fp, 413))));
    seed(t, "bulk_unreplayable_mismatch", replies(1, bulk(unreplayable(other_digest(), 413))));
    seed(t, "pipelined", replies(3, "$-1\r\n" + replay + "-OOM no\r\n" + bulk(claim(fp, "t"))
                                        + "+OK\r\n"));
    seed(t, "bad_protocol", replies(0, "?what\r\n"));
    seed(t, "bad_bulk_length", replies(0, "$x\r\nabc\r\n"));

    seed(t, "command_set_claim",
         command({"SET", "idem:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                  claim(fp, "0123456789abcdef"), "NX", "PX", "30000", "GET"}));
    seed(t, "command_evalsha",
         command({"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "1", "idem:k", "tok"}));
    seed(t, "command_none", command({}));
    seed(t, "command_empty_arg", command({""}));
    seed(t, "command_binary_arg", command({"SET", "k", std::string("\r\n$-1\r\n\0*", 9)}));
    seed(t, "command_12_args", command(std::vector<std::string>(12, "a")));
    seed(t, "command_300_byte_arg", command({"SET", "k", std::string(300, 'v')}));
}

std::string live_start()
{
    std::string out(idem::live_start_size, '\0');
    idem::encode_live_start(out.data());
    return out;
}

std::string live_head(const idem::Digest& fp, std::uint16_t status, const std::vector<idem::Header>& headers,
                      std::uint8_t flags = 0, const std::vector<idem::Header>& trailers = {})
{
    const idem::ResponseExtras extras{flags, trailers.data(), trailers.size()};
    std::string out(idem::live_head_size(headers.data(), headers.size(), extras), '\0');
    idem::encode_live_head(out.data(), fp, status, headers.data(), headers.size(), extras);
    return out;
}

std::string live_body(const std::string& bytes)
{
    std::string out(idem::live_frame_overhead, '\0');
    idem::encode_live_body_header(out.data(), bytes.size());
    return out + bytes;
}

std::string live_end(idem::LiveEnd how)
{
    std::string out(idem::live_end_size, '\0');
    idem::encode_live_end(out.data(), how);
    return out;
}

// fuzz_live reads its input as a live log, and as an event stream after an
// id whose length is the first byte (mod 16).
void live_seeds()
{
    const std::string t = "fuzz_live";
    const idem::Digest fp = fuzz::fixed_digest();
    const std::string sse_head = live_head(fp, 200, {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}});
    const std::string log = live_start() + sse_head + live_body("id: 1\ndata: a\n\n") + live_body("id: 2\ndata: b\n\n");

    seed(t, "live_start_only", live_start());
    seed(t, "live_head_only", live_start() + sse_head);
    seed(t, "live_streaming", log);
    seed(t, "live_complete", log + live_end(idem::LiveEnd::complete));
    seed(t, "live_aborted", log + live_end(idem::LiveEnd::aborted));
    seed(t, "live_cut", live_start() + live_head(fp, 201, {}) + live_body(std::string(1024, 'b')) + live_end(idem::LiveEnd::cut));
    seed(t, "live_trailers", live_start()
                                 + live_head(fp, 200, {{"Content-Type", "application/grpc"}}, idem::expect_trailers,
                                             {{"grpc-status", "0"}})
                                 + live_body(std::string("\0\0\0\0\2hi", 7)) + live_end(idem::LiveEnd::complete));
    seed(t, "live_mid_frame", log.substr(0, log.size() - 3));
    seed(t, "bad_after_end", log + live_end(idem::LiveEnd::complete) + live_body("x"));
    seed(t, "bad_body_first", live_start() + live_body("x"));
    seed(t, "bad_two_heads", live_start() + sse_head + sse_head);
    seed(t, "bad_empty_body", live_start() + sse_head + std::string("B\0\0\0\0", 5));
    seed(t, "bad_end_byte", live_start() + sse_head + std::string("E\0\0\0\x01\x04", 6));
    seed(t, "bad_length", live_start() + sse_head + std::string("B\x80\0\0\x01", 5));
    seed(t, "bad_head_record", live_start() + live_body(claim(fp, "tok")).replace(0, 1, "H"));

    seed(t, "sse_lf", "\x01" "2" "id: 1\ndata: a\n\nid: 2\ndata: b\n\nid: 3\n\n");
    seed(t, "sse_crlf_bom", "\x02" "42" "\xEF\xBB\xBF: hi\r\nid: 42\r\ndata: x\r\n\r\ndata: y\r\n\r\n");
    seed(t, "sse_cr_at_end", "\x01" "5" "id:5\r\r");
    seed(t, "sse_nul_id", std::string("\x01" "7" "id: 7\nid: 8\0\n\n", 16));
    seed(t, "sse_utf8_id", "\x04" "\xEF\xBF\xBD" "z" "id: \xE2\x82z\n\n");
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    for (const char* sub : {"", "/fuzz_key", "/fuzz_record", "/fuzz_reply", "/fuzz_live"}) {
        mkdir((g_dir + sub).c_str(), 0755);  // EEXIST is fine; seed() reports the rest
    }
    key_seeds();
    record_seeds();
    reply_seeds();
    live_seeds();
    std::printf("%d seeds written under %s\n", g_written, g_dir.c_str());
    return 0;
}
