// admin.cpp — the operator's endpoint, idempotency_admin: names a store key
// (admin_key.hpp), peeks and answers the inspection as JSON; DELETE purges
// what it read only if the key still holds it, a claim only when forced.
// Its location's access rules are the endpoint's. Must not touch protected
// requests, nor any key but through the store interface.
// See docs/design.md#inspect-and-purge.

#include "admin.hpp"

#include <openssl/rand.h>

#include <new>

#include "access.hpp"
#include "compression.hpp"
#include "conf.hpp"
#include "conf_util.hpp"
#include "inspect.hpp"
#include "pieces.hpp"
#include "admin_key.hpp"
#include "key.hpp"
#include "problem.hpp"
#include "seal.hpp"
#include "send.hpp"
#include "store_call.hpp"
#include "store_factory.hpp"

namespace idem {
namespace {

struct AdminCtx {
    ngx_http_request_t* request;
    const LocConf* conf;
    OperatorStore* store;
    LiveStore* pieces;    // where a purged record's pieces are deleted
    StoreCall call;       // the peek or the purge in flight
    ngx_str_t key;        // the store key
    ngx_str_t store_name;
    bool purge;           // DELETE
    bool force;           // ?force=1: a claim in flight may be purged too
    ngx_str_t inspection; // the JSON of what the peek found (a purge's answer carries it)
    KeyState state;
    ngx_str_t piece_base; // the peeked record's pieces (a sealed record's are not known: they expire)
    std::uint32_t piece_count;
};

// Drawn at configuration, the same in every worker of this nginx.
unsigned char fingerprint_key[32];

// Either may stand for an execution a retry would otherwise repeat.
bool needs_force(KeyState state)
{
    return state == KeyState::claimed || state == KeyState::unjudged;
}


ngx_int_t send_json(ngx_http_request_t* r, ngx_uint_t status, std::string_view body)
{
    return send_uncached(r, status, "application/json", body);
}

// RFC 9457, like the module's other errors.
ngx_int_t send_error(ngx_http_request_t* r, ngx_uint_t status, std::string_view title, std::string_view detail)
{
    if (status == NGX_HTTP_SERVICE_UNAVAILABLE && !add_header(r, "Retry-After", "1")) {
        return NGX_ERROR;
    }
    if (!add_header(r, "Cache-Control", "no-store")) {
        return NGX_ERROR;
    }
    std::string_view type = status == NGX_HTTP_SERVICE_UNAVAILABLE ? "store-unavailable" : "admin-request";
    return send_problem_document(r, status, {type, title, detail});
}

// {"purged":BOOL[,"reason":"..."],"inspection":{...}}
ngx_int_t send_purge(AdminCtx* ctx, ngx_uint_t status, bool purged, std::string_view reason)
{
    ngx_http_request_t* r = ctx->request;
    size_t room = 64 + reason.size() + ctx->inspection.len;
    auto* body = static_cast<u_char*>(ngx_pnalloc(r->pool, room));
    if (body == nullptr) {
        return NGX_ERROR;
    }
    u_char* p = ngx_sprintf(body, "{\"purged\":%s,", purged ? "true" : "false");
    if (!reason.empty()) {
        ngx_str_t why{reason.size(), bytes(reason)};
        p = ngx_sprintf(p, "\"reason\":\"%V\",", &why);
    }
    p = ngx_sprintf(p, "\"inspection\":%V}", &ctx->inspection);
    return send_json(r, status, {reinterpret_cast<char*>(body), static_cast<size_t>(p - body)});
}

// ctx, in its pool, may be gone after it.
void finish(AdminCtx* ctx, ngx_int_t rc)
{
    ctx->call.abandon();
    end_request(ctx->request, rc);
}


void on_timeout(void* data)
{
    auto* ctx = static_cast<AdminCtx*>(data);
    ngx_log_error(NGX_LOG_ERR, ctx->request->connection->log, 0,
                  "idempotency: the store did not answer the operator's %s of \"%V\" within %M ms",
                  ctx->purge ? "purge" : "inspection", &ctx->key, ctx->conf->redis_timeout);
    finish(ctx, send_error(ctx->request, NGX_HTTP_SERVICE_UNAVAILABLE, "Store unavailable",
                           "the store did not answer in time"));
}

void log_purge(AdminCtx* ctx, bool forced)
{
    ngx_http_request_t* r = ctx->request;
    (void)ngx_http_auth_basic_user(r);  // $remote_user, if the request carries Basic credentials
    ngx_str_t state{key_state_name(ctx->state).size(), bytes(key_state_name(ctx->state))};
    ngx_uint_t level = forced ? NGX_LOG_WARN : NGX_LOG_NOTICE;
    const char* why = !forced ? ""
                      : ctx->state == KeyState::claimed
                          ? " (a claim in flight, forced: a retry may execute again)"
                          : " (not judged here, forced: a location that could replay it executes a retry again)";
    ngx_log_error(level, r->connection->log, 0,
                  "idempotency: purged the %V record under \"%V\"%s, asked by %V, user \"%V\"", &state, &ctx->key,
                  why, &r->connection->addr_text, &r->headers_in.user);
}

// A purged record's pieces go with it, rather than a minute after its ttl.
void delete_pieces(AdminCtx* ctx)
{
    char key[max_piece_key_size];
    std::string_view base = view(ctx->piece_base);
    for (std::uint32_t i = 0; i < ctx->piece_count; i++) {
        ctx->pieces->live_expire({key, write_piece_key(base, i, key)}, 0);
    }
}

void on_purged(void* data, LiveStatus status, std::string_view, std::int64_t)
{
    auto* ctx = static_cast<AdminCtx*>(data);
    ctx->call.answered();
    ngx_int_t rc;
    switch (status) {
    case LiveStatus::done:
        delete_pieces(ctx);
        log_purge(ctx, ctx->force && needs_force(ctx->state));
        rc = send_purge(ctx, NGX_HTTP_OK, true, {});
        break;
    case LiveStatus::gone:
        rc = send_purge(ctx, NGX_HTTP_CONFLICT, false, "the key changed since it was read; inspect it again");
        break;
    default:
        rc = send_error(ctx->request, NGX_HTTP_SERVICE_UNAVAILABLE, "Store unavailable",
                        "the store could not purge the key");
        break;
    }
    finish(ctx, rc);
}

// Never a sealed one: nothing is decrypted here. nullopt when not opened,
// `why` saying when that is this location's doing (a dictionary it lacks, a
// size over its limit: never inflated then).
std::optional<std::string_view> opened(ngx_http_request_t* r, const LocConf* conf, std::optional<std::string_view> value,
                                       NotJudged& why)
{
    why = NotJudged::no;
    std::optional<CompressedHead> head = value && !is_sealed(*value) ? compressed_head(*value) : std::nullopt;
    if (!head) {
        return std::nullopt;
    }
    const Dictionaries& dictionaries = location_dictionaries(*conf);
    std::uint32_t dictionary = frame_dictionary(head->frame);
    if (dictionary != 0 && dictionaries.find(dictionary) == nullptr) {
        why = NotJudged::dictionary;
        return std::nullopt;
    }
    if (head->plain_size > max_plain_record(conf->max_response_size)) {
        why = NotJudged::too_large;
        return std::nullopt;
    }
    auto* out = static_cast<char*>(ngx_pnalloc(r->pool, head->plain_size));
    return out != nullptr ? worker_inflater().inflate(*value, *head, out, dictionaries) : std::nullopt;
}

// A sealed record opened with this location's keys; nullopt when it has
// none that opens it (its pieces are then left to expire).
std::optional<std::string_view> unsealed(AdminCtx* ctx, std::string_view value)
{
    ngx_array_t* keys = ctx->conf->seal_keys;
    auto* out = keys != nullptr ? static_cast<char*>(ngx_pnalloc(ctx->request->pool, value.size())) : nullptr;
    std::size_t length = 0;
    if (out == nullptr
        || open_sealed(static_cast<const SecretKey*>(keys->elts), keys->nelts, view(ctx->key), value, out, length)
               != OpenStatus::ok) {
        return std::nullopt;
    }
    return std::string_view{out, length};
}

// The pieces the peeked record lists, when it can be read here: plain,
// compressed and opened with this location's settings, or sealed and opened
// with its keys (only to name the pieces, never shown).
bool keep_piece_list(AdminCtx* ctx, std::string_view value, std::optional<std::string_view> inflated)
{
    if (is_sealed(value)) {
        std::optional<std::string_view> plain = unsealed(ctx, value);
        NotJudged not_opened;
        return !plain || keep_piece_list(ctx, *plain, opened(ctx->request, ctx->conf, plain, not_opened));
    }
    std::optional<Record> record = decode_record(inflated ? *inflated : value);
    if (!record || record->kind != RecordKind::response || record->pieces.count == 0) {
        return true;
    }
    std::string_view key = view(ctx->key);
    auto* base = static_cast<char*>(ngx_pnalloc(ctx->request->pool, piece_base_size(key)));
    if (base == nullptr) {
        return false;
    }
    ctx->piece_base = {write_piece_base(key, record->pieces.id, base), reinterpret_cast<u_char*>(base)};
    ctx->piece_count = record->pieces.count;
    return true;
}

bool keep_inspection(AdminCtx* ctx, std::optional<std::string_view> value, std::int64_t ttl_ms)
{
    ngx_http_request_t* r = ctx->request;
    ngx_time_t* tp = ngx_timeofday();
    InspectFacts facts;
    facts.key_hash = {reinterpret_cast<char*>(ctx->key.data) + ctx->key.len - key_hash_hex_length, key_hash_hex_length};
    facts.store = view(ctx->store_name);
    facts.now_ms = static_cast<std::uint64_t>(tp->sec) * 1000 + tp->msec;
    facts.ttl_ms = ttl_ms;
    facts.ttl_conf_ms = ctx->conf->ttl;
    facts.wait_ms = ctx->conf->wait;
    facts.sealing = ctx->conf->seal_keys != nullptr;
    if (facts.sealing) {
        facts.seal_keys = static_cast<const SecretKey*>(ctx->conf->seal_keys->elts);
        facts.seal_key_count = ctx->conf->seal_keys->nelts;
    }
    facts.limits = {ctx->conf->max_response_size, piece_body_size(ctx->conf->piece_size)};
    facts.opened = opened(r, ctx->conf, value, facts.not_opened);
    if (ctx->purge && value && !keep_piece_list(ctx, *value, facts.opened)) {
        return false;
    }
    facts.fingerprint_key = {reinterpret_cast<const char*>(fingerprint_key), sizeof fingerprint_key};
    size_t room = inspection_room(ctx->store_name.len);
    auto* json = static_cast<u_char*>(ngx_pnalloc(r->pool, room));
    if (json == nullptr) {
        return false;
    }
    ctx->inspection.data = json;
    ctx->inspection.len = inspection_json(value, facts, reinterpret_cast<char*>(json), room);
    ctx->state = judged_state(value, facts);
    return ctx->inspection.len != 0;
}

void on_peeked(void* data, LiveStatus status, std::string_view value, std::int64_t ttl_ms)
{
    auto* ctx = static_cast<AdminCtx*>(data);
    ngx_http_request_t* r = ctx->request;
    ctx->call.answered();
    if (status == LiveStatus::failed) {
        finish(ctx, send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "Store unavailable", "the store could not be read"));
        return;
    }
    std::optional<std::string_view> found;
    if (status == LiveStatus::done) {
        found = value;
    }
    if (!keep_inspection(ctx, found, ttl_ms)) {
        finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: the operator read \"%V\": %s", &ctx->key,
                   key_state_name(ctx->state).data());
    if (!ctx->purge) {
        finish(ctx, send_json(r, NGX_HTTP_OK, view(ctx->inspection)));
        return;
    }
    if (!found) {
        finish(ctx, send_purge(ctx, NGX_HTTP_NOT_FOUND, false, "nothing is stored under the key"));
        return;
    }
    if (needs_force(ctx->state) && !ctx->force) {
        finish(ctx, send_purge(ctx, NGX_HTTP_CONFLICT, false,
                               ctx->state == KeyState::claimed
                                   ? "the original is in flight; purging its claim lets a retry execute again "
                                     "(add force=1 to purge it all the same)"
                                   : "the record is not judged here: a location whose settings open it may replay "
                                     "it, and a retry there would execute again once it is purged (add force=1 to "
                                     "purge it all the same)"));
        return;
    }
    // purge exactly what was read (the store copies it)
    PeekOp* op = ctx->store->purge(view(ctx->key), *found, on_purged, ctx);
    if (!ctx->call.await(ctx->store, op, ctx->conf->redis_timeout)) {
        finish(ctx, send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "Store unavailable", "the store cannot be reached"));
    }
}


ngx_str_t store_name(ngx_http_request_t* r, const LocConf* conf)
{
    ngx_str_t name = ngx_null_string;
    const ngx_str_t& what = conf->zone != nullptr ? conf->zone->shm.name : conf->server->name;
    const char* kind = conf->zone != nullptr ? "zone "
                       : conf->server->kind == RedisKind::cluster ? "redis cluster "
                       : conf->server->kind == RedisKind::sentinel ? "redis sentinel "
                       : "redis ";
    name.data = static_cast<u_char*>(ngx_pnalloc(r->pool, 16 + what.len));
    if (name.data != nullptr) {
        name.len = static_cast<size_t>(ngx_sprintf(name.data, "%s%V", kind, &what) - name.data);
    }
    return name;
}

ngx_int_t admin_handler(ngx_http_request_t* r)
{
    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD | NGX_HTTP_DELETE))) {
        if (!add_header(r, "Allow", "GET, HEAD, DELETE")) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        return NGX_HTTP_NOT_ALLOWED;
    }
    if (ngx_http_discard_request_body(r) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    auto* conf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_idempotency_module));

    ngx_str_t key = ngx_null_string, hash, header;
    bool by_hash = query_arg(r, "hash", hash);
    KeyLookup lookup = find_key_header(r, conf->header_lowcase, header);
    if (by_hash == (lookup != KeyLookup::none)) {
        return send_error(r, NGX_HTTP_BAD_REQUEST, "Key missing",
                          "name the key in the idempotency_header request header, or its hash in ?hash=, not both");
    }
    if (by_hash) {
        if (!key_from_hash(r, conf, hash, key)) {
            return send_error(r, NGX_HTTP_BAD_REQUEST, "Bad hash", "?hash= takes the 64 hex digits of a key's hash");
        }
    } else {
        auto* parsed_key = static_cast<char*>(ngx_pnalloc(r->pool, header.len ? header.len : 1));
        if (parsed_key == nullptr) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ParsedKey parsed = lookup == KeyLookup::one ? parse_key(view(header), parsed_key) : ParsedKey{KeyStatus::invalid, 0};
        if (parsed.status != KeyStatus::ok) {
            return send_error(r, NGX_HTTP_BAD_REQUEST, "Invalid key",
                              "the key is empty, longer than 255 bytes, sent twice, or holds bytes outside visible ASCII");
        }
        if (!key_from_header(r, conf, {parsed_key, parsed.length}, key)) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    void* memory = ngx_palloc(r->pool, sizeof(AdminCtx));
    auto* ctx = memory != nullptr ? new (memory) AdminCtx() : nullptr;
    if (ctx == nullptr || !ctx->call.bind(r->pool)) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->request = r;
    ctx->conf = conf;
    ctx->key = key;
    ctx->store_name = store_name(r, conf);
    ctx->purge = r->method == NGX_HTTP_DELETE;
    ngx_str_t force;
    ctx->force = query_arg(r, "force", force) && is_yes(force);
    Store* store = store_for(*conf);
    ctx->store = store;
    ctx->pieces = store;
    if (ctx->store == nullptr) {
        return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "Store unavailable", "the store cannot be reached");
    }
    ctx->call.init(on_timeout, ctx, r->connection->log);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: the operator %s \"%V\"",
                   ctx->purge ? "purges" : "inspects", &key);
    if (!ctx->call.await(ctx->store, ctx->store->peek(view(key), on_peeked, ctx), conf->redis_timeout)) {
        return send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, "Store unavailable", "the store cannot be reached");
    }
    r->main->count++;
    return NGX_DONE;
}

}  // namespace

char* set_admin_handler(ngx_conf_t* cf, ngx_command_t*, void* conf)
{
    auto* clcf = static_cast<ngx_http_core_loc_conf_t*>(ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));
    clcf->handler = admin_handler;
    static_cast<LocConf*>(conf)->admin = true;
    static bool drawn = false;
    if (!drawn && RAND_bytes(fingerprint_key, sizeof fingerprint_key) != 1) {
        return const_cast<char*>("cannot draw a random key");
    }
    drawn = true;
    return NGX_CONF_OK;
}

bool merge_admin(ngx_conf_t* cf, LocConf* conf, bool enabled_here)
{
    if (!conf->admin) {
        return true;
    }
    if (enabled_here && conf->enable) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"idempotency on\" and \"idempotency_admin\" in one location: the operator's endpoint is "
                           "never a protected request (a purge would be claimed under the very key it purges); "
                           "leave \"idempotency on\" out of it");
        return false;
    }
    conf->enable = 0;  // inherited: the endpoint wins
    return true;
}

}  // namespace idem
