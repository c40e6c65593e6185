// conf.hpp — the module's configuration structures and per-request state,
// shared by the nginx-facing files. Defaults live in module.cpp's merge.
#pragma once

#include "fingerprint.hpp"
#include "seal.hpp"
#include "ngx.hpp"
#include "store.hpp"

extern "C" ngx_module_t ngx_http_idempotency_module;

namespace idem {

// What every connection to a Redis data node sends first (AUTH, SELECT).
struct RedisAuth {
    ngx_str_t username;
    ngx_str_t password;
    ngx_int_t db;
};

// How the module reaches Redis: one server (`idempotency_redis`), a Redis
// Cluster found from seed nodes (`idempotency_redis_cluster`), or the
// master that Redis Sentinel names (`idempotency_redis_sentinel`).
enum class RedisKind { single, cluster, sentinel };

// One Redis deployment named by a directive; each worker keeps one store
// (and its connections) per distinct deployment.
struct RedisServer {
    ngx_str_t name;       // for logs: the address, or the list of seeds
    RedisKind kind;
    ngx_url_t* urls;      // the server, the cluster's seed nodes, or the sentinels
    ngx_uint_t nurls;
    ngx_str_t master_name;     // sentinel: the monitored master's name
    RedisAuth auth;            // for data nodes
    RedisAuth sentinel_auth;   // sentinel: for the sentinels themselves
    ngx_uint_t index;     // position in MainConf::servers
};

struct MainConf {
    ngx_array_t servers;  // of RedisServer*
};

struct LocConf {
    ngx_flag_t enable;
    RedisServer* server;
    ngx_shm_zone_t* zone;                 // idempotency_store zone=NAME; nullptr: Redis
    ngx_msec_t redis_timeout;
    ngx_uint_t methods;                   // NGX_HTTP_* bit mask
    ngx_str_t header;                     // request header carrying the key
    ngx_http_complex_value_t* key;        // idempotency_key: the key from variables instead
    ngx_flag_t required;
    ngx_msec_t ttl;
    ngx_msec_t lock_ttl;
    ngx_msec_t wait;
    ngx_http_complex_value_t* scope;
    ngx_str_t key_prefix;
    size_t max_response_size;
    ngx_flag_t store_errors;
    ngx_flag_t fail_open;
    ngx_array_t* seal_keys;               // idempotency_encrypt_key: of SecretKey, sealing key first
};

// $idempotency_status values, in SPEC order.
enum class Status {
    none, fresh, replayed, waited, conflict, mismatch, invalid, missing,
    unavailable, released, unreplayable,
};

std::string_view status_name(Status s) noexcept;

// Everything the module knows about one main request. Lives in r->pool; its
// pool cleanup (see access.cpp) cancels what is still pending in Redis and
// settles a claim whose response never completed.
struct RequestCtx {
    ngx_http_request_t* request;
    LocConf* conf;
    Status status;

    // pre-content phase
    bool decided;          // status holds the claim's answer
    ngx_event_t timer;     // Redis timeout for the pending claim
    ngx_event_t wait_timer;  // idempotency_wait: next look at an in-flight original
    ngx_msec_t wait_deadline;
    ngx_msec_t wait_delay;
    bool waited;
    PendingOp* pending;    // the claim in flight, nullptr when none
    Store* store;

    // identity of the claim
    Digest fingerprint;
    ngx_str_t redis_key;
    ngx_str_t claim;       // the claim record: fingerprint and random token
    bool owns_claim;       // we hold the claim and have not settled it
    ngx_event_t renew_timer;  // extends the claim while the response is in progress

    // replay: a copy of the stored record
    ngx_str_t stored;
    bool responded;        // the module answered this request itself
    bool unverifiable;     // the stored record did not open (encryption at rest)

    // capture (capture.cpp): the response record is built in place — its
    // head is written at the end, the body bytes go after it as they pass
    bool capturing;        // recording the response as it streams out
    bool detached;         // the client is gone; the response is drained for storing
    bool oversize;         // over idempotency_max_response_size: stored as unreplayable
    ngx_uint_t response_status;
    ngx_array_t headers;   // of Header
    char* record;
    size_t head_size;
    size_t body_size;
    size_t capacity;
    ngx_http_handler_pt content_handler;  // the location's, wrapped by ours
    ngx_http_event_handler_pt write_handler;  // the upstream's, behind the client-timeout guard
};

RequestCtx* find_ctx(ngx_http_request_t* r) noexcept;

// access.cpp
ngx_int_t precontent_handler(ngx_http_request_t* r);
// capture.cpp
ngx_int_t capture_init(ngx_conf_t* cf);
void capture_begin(RequestCtx* ctx) noexcept;
void capture_follow(RequestCtx* ctx) noexcept;
void capture_settle(RequestCtx* ctx) noexcept;
// replay.cpp
ngx_int_t replay(ngx_http_request_t* r, RequestCtx* ctx, std::string_view stored);
// problem.cpp
ngx_int_t send_problem(ngx_http_request_t* r, ngx_uint_t status, ngx_uint_t retry_after);

}  // namespace idem
