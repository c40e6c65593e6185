// conf.hpp — the module's configuration structures and nothing else: what
// the directives set (module.cpp, redis/redis_conf.cpp, redis/tls_conf.cpp,
// zone/zone_conf.cpp), read by the nginx-facing files. Defaults live in
// module.cpp's merge.
#pragma once

#include "ngx.hpp"

extern "C" ngx_module_t ngx_http_idempotency_module;

namespace idem {

class ReleaseStatuses;  // disposition.hpp
struct FingerprintConf;  // fingerprint_conf.hpp

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

namespace redis {
struct TlsContext;
}

// idempotency_redis_ssl_*: how TLS connections to Redis are made and
// checked (redis/tls_conf.*). A location's settings travel with it; the
// RedisServer it names holds the context built from them.
struct RedisTlsConf {
    ngx_flag_t verify;
    ngx_str_t name;                 // empty: the host of each address
    ngx_str_t trusted_certificate;
    ngx_str_t certificate;
    ngx_str_t certificate_key;
    ngx_uint_t protocols;           // NGX_SSL_TLSv1_2 | ...
    ngx_str_t ciphers;
};

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
    bool ssl;                  // the `ssl` parameter: every connection of the deployment is TLS
    const redis::TlsContext* tls;  // with ssl: built from the TLS settings of the locations naming it
    ngx_uint_t index;     // position in MainConf::servers
};

struct MainConf {
    ngx_array_t servers;  // of RedisServer*
    size_t oom_buffer;    // idempotency_redis_oom_buffer: record bytes a worker holds while Redis refuses them for memory
    const void* unnamed_server;  // the first server block without server_name that protects requests
    bool warned_unnamed;         // nginx -t said a second one shares its key space
    bool fence_looked_up;        // fence_named() has looked: the http block is parsed
    bool fence_named;            // ... and $idempotency_fence is named in it
};

struct LocConf {
    ngx_flag_t enable;
    RedisServer* server;
    ngx_shm_zone_t* zone;                 // idempotency_store zone=NAME; nullptr: Redis
    ngx_msec_t redis_timeout;
    RedisTlsConf redis_tls;
    ngx_uint_t methods;                   // NGX_HTTP_* bit mask
    ngx_str_t header;                     // request header carrying the key
    ngx_str_t header_lowcase;             // its name in lower case, as nginx keeps request header names
    ngx_http_complex_value_t* key;        // idempotency_key: the key from variables instead
    const FingerprintConf* fingerprint;   // idempotency_fingerprint; nullptr: the default (method, raw URI, body)
    ngx_flag_t required;
    ngx_msec_t ttl;
    ngx_msec_t lock_ttl;
    ngx_msec_t wait;
    ngx_http_complex_value_t* scope;
    ngx_str_t key_space;                  // the virtual server, length-prefixed: "N:" + its identity (module.cpp)
    ngx_str_t key_prefix;
    size_t max_response_size;
    size_t piece_size;                    // idempotency_piece_size: a larger response is kept in pieces (pieces.hpp)
    ngx_flag_t store_errors;
    ngx_flag_t compress;  // idempotency_compress: responses kept compressed (compression.hpp)
    ngx_array_t* dictionaries;            // idempotency_compress_dictionary: of ZstdDictionary*, compressing one first
    const ReleaseStatuses* release_statuses;  // idempotency_release_statuses
    ngx_flag_t fail_open;
    ngx_str_t upstream_control;           // idempotency_upstream_control: the upstream's response header; empty: off
    ngx_str_t replayed_header;            // idempotency_replayed_header: what marks a replay; empty: off
    ngx_array_t* seal_keys;               // idempotency_encrypt_key: of SecretKey, sealing key first
    bool fence;                           // claims draw a fence: $idempotency_fence is named (fence.hpp)
    bool admin;                           // idempotency_admin: the operator's endpoint (admin.cpp)
};

}  // namespace idem
