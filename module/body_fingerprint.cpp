// body_fingerprint.cpp — see body_fingerprint.hpp.

#include "body_fingerprint.hpp"

#include "fingerprint_conf.hpp"
#include "fingerprint_parts.hpp"
#include "form_fields.hpp"

#include <new>
#include <string>

namespace idem {
namespace {

// What one turn of the event loop reads and hashes of a body in a file.
constexpr size_t slice_size = 128 * 1024;

struct BodyHash {
    BodyHash(ngx_http_request_t* r, const FingerprintConf* parts, Digest& out, FingerprintDone done) noexcept
        : request(r), parts(parts), out(out), done(done)
    {
    }

    ngx_http_request_t* request;
    const FingerprintConf* parts;
    Sha256 sha;
    Digest& out;
    FingerprintDone done;
    ngx_chain_t* next = nullptr;  // the buffer being read
    off_t file_pos = -1;          // where in it, when it is in a file
    u_char* slice = nullptr;
    u_char* kept = nullptr;       // the body gathered to be read as JSON or form fields; nullptr: hashed as read
    size_t kept_len = 0;
    ngx_event_t event{};
};

void forget(void* data)
{
    auto* hash = static_cast<BodyHash*>(data);
    if (hash->event.posted) {
        ngx_delete_posted_event(&hash->event);
    }
    hash->~BodyHash();
}

void take(BodyHash* hash, const u_char* data, size_t size)
{
    if (hash->kept == nullptr) {
        hash->sha.update(data, size);
    } else if (size > 0) {
        hash->kept_len = static_cast<size_t>(ngx_cpymem(hash->kept + hash->kept_len, data, size) - hash->kept);
    }
}

// The gathered body read as its part says; false when it cannot be and the
// location answers 400 (`refused` says why).
bool hash_kept(BodyHash* hash, BodyFault& refused)
{
    const FingerprintConf& parts = *hash->parts;
    std::string_view body(reinterpret_cast<const char*>(hash->kept), hash->kept_len);
    std::string form;  // on the heap for the call, freed on every path
    refused = parts.body == Part::body_form ? canonical_form(body, form)
                                            : canonical_json(body, true, parts.json, form);
    if (refused == BodyFault::none) {
        add_part(hash->sha, parts.body, form);
    } else if (parts.unreadable_raw) {
        add_part(hash->sha, Part::body_unread, body);
        refused = BodyFault::none;
    }
    ngx_pfree(hash->request->pool, hash->kept);
    hash->kept = nullptr;
    return refused == BodyFault::none;
}

void finish(BodyHash* hash, bool ok)
{
    BodyFault refused = BodyFault::none;
    if (ok && hash->kept != nullptr && !hash_kept(hash, refused)) {
        hash->done(hash->request, true, refused);
        return;
    }
    if (ok) {
        hash->out = hash->sha.finish();
        ok = hash->sha.ok();
    }
    hash->done(hash->request, ok, BodyFault::none);
}

// Reads memory buffers until a file buffer has had one slice; true when the
// whole body is read.
bool hash_some(BodyHash* hash, bool& ok)
{
    ok = true;
    for (; hash->next != nullptr; hash->next = hash->next->next, hash->file_pos = -1) {
        ngx_buf_t* b = hash->next->buf;
        if (ngx_buf_in_memory(b)) {
            take(hash, b->pos, static_cast<size_t>(b->last - b->pos));
            continue;
        }
        if (!b->in_file) {
            continue;
        }
        if (hash->file_pos < 0) {
            hash->file_pos = b->file_pos;
        }
        if (hash->file_pos >= b->file_last) {
            continue;
        }
        if (hash->kept == nullptr && hash->slice == nullptr
            && (hash->slice = static_cast<u_char*>(ngx_palloc(hash->request->pool, slice_size))) == nullptr) {
            ok = false;
            return true;
        }
        // a gathered body is read straight into its place
        u_char* into = hash->kept != nullptr ? hash->kept + hash->kept_len : hash->slice;
        size_t want = static_cast<size_t>(ngx_min(static_cast<off_t>(slice_size), b->file_last - hash->file_pos));
        ssize_t n = ngx_read_file(b->file, into, want, hash->file_pos);
        if (n <= 0) {
            ok = false;
            return true;
        }
        if (hash->kept == nullptr) {
            hash->sha.update(into, static_cast<size_t>(n));
        } else {
            hash->kept_len += static_cast<size_t>(n);
        }
        hash->file_pos += n;
        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, hash->request->connection->log, 0,
                       "idempotency: fingerprinted %O of %O bytes of \"%V\" in a temporary file",
                       hash->file_pos - b->file_pos, b->file_last - b->file_pos, &b->file->name);
        if (hash->file_pos < b->file_last) {
            return false;  // more of this file on the next turn
        }
    }
    return true;
}

void run(BodyHash* hash)
{
    bool ok = true;
    if (hash_some(hash, ok)) {
        if (hash->slice != nullptr) {
            ngx_pfree(hash->request->pool, hash->slice);
            hash->slice = nullptr;
        }
        finish(hash, ok && hash->sha.ok());
        return;
    }
    // the next turn, after the events that are ready now (ngx_posted_events
    // would run again in this very turn)
    ngx_post_event(&hash->event, &ngx_posted_next_events);
}

void on_event(ngx_event_t* ev)
{
    auto* hash = static_cast<BodyHash*>(ev->data);
    ngx_connection_t* c = hash->request->connection;
    run(hash);  // may end the request
    ngx_http_run_posted_requests(c);
}

// ------------------------------------------------------------ the parts

off_t body_length(ngx_chain_t* body)
{
    off_t length = 0;
    for (ngx_chain_t* cl = body; cl != nullptr; cl = cl->next) {
        length += ngx_buf_in_memory(cl->buf) ? cl->buf->last - cl->buf->pos
                  : cl->buf->in_file      ? cl->buf->file_last - cl->buf->file_pos
                                          : 0;
    }
    return length;
}

// The parts before the body, in the directive's order; false, with
// `refused` when the query cannot be read as fields, or on an error.
bool hash_request_parts(ngx_http_request_t* r, const FingerprintConf& parts, Sha256& sha, BodyFault& refused)
{
    begin_parts(sha, view(parts.description));
    std::string_view uri = view(r->unparsed_uri);
    for (ngx_uint_t i = 0; i < parts.nparts; i++) {
        const FingerprintPart& part = parts.parts[i];
        ngx_str_t value = ngx_null_string;
        std::string fields;
        switch (part.part) {
        case Part::method: add_part(sha, part.part, view(r->method_name)); break;
        case Part::uri: add_part(sha, part.part, uri); break;
        case Part::path: add_part(sha, part.part, uri.substr(0, uri.find('?'))); break;
        case Part::args: add_part(sha, part.part, view(r->args)); break;
        case Part::args_set:
            refused = canonical_form(view(r->args), fields);
            if (refused != BodyFault::none && !parts.unreadable_raw) {
                return false;
            }
            refused == BodyFault::none ? add_part(sha, Part::args_set, fields) : add_part(sha, Part::args_unread, view(r->args));
            refused = BodyFault::none;
            break;
        default:  // Part::variable
            if (ngx_http_complex_value(r, part.value, &value) != NGX_OK) {
                return false;
            }
            add_part(sha, part.part, view(value));
        }
    }
    return true;
}

// The body's part begun: hashed as it is read (raw), or gathered to be
// read whole; false, with `refused`, when it is too large to gather.
bool begin_body(BodyHash* hash, off_t length, BodyFault& refused)
{
    const FingerprintConf& parts = *hash->parts;
    auto size = static_cast<uint64_t>(length);
    if (parts.body == Part::body) {
        begin_part(hash->sha, Part::body, size);
    } else if (length == 0) {
        add_part(hash->sha, parts.body, {});  // no body: nothing to read, an empty part
    } else if (size > parts.max_size) {
        if (!parts.unreadable_raw) {
            refused = BodyFault::too_large;
            return false;
        }
        begin_part(hash->sha, Part::body_unread, size);
    } else {
        // with room past the end for the JSON parser's reads (json_padding)
        hash->kept = static_cast<u_char*>(ngx_palloc(hash->request->pool, size + json_padding));
        if (hash->kept == nullptr) {
            return false;
        }
        ngx_memzero(hash->kept + size, json_padding);
    }
    return true;
}

// The parts before the body, then the body as it is read.
void start(BodyHash* hash, ngx_chain_t* body)
{
    ngx_http_request_t* r = hash->request;
    if (hash->parts == nullptr) {
        frame_default(hash->sha, view(r->method_name), view(r->unparsed_uri));
    } else {
        BodyFault refused = BodyFault::none;
        if (!hash_request_parts(r, *hash->parts, hash->sha, refused)
            || (hash->parts->body != Part{0} && !begin_body(hash, body_length(body), refused))) {
            hash->done(r, refused != BodyFault::none, refused);
            return;
        }
    }
    hash->next = body;
    run(hash);
}

}  // namespace

void fingerprint_request(ngx_http_request_t* r, const FingerprintConf* parts, Digest& out, FingerprintDone done) noexcept
{
    ngx_chain_t* body = r->request_body != nullptr ? r->request_body->bufs : nullptr;
    if (parts != nullptr && parts->body == Part{0}) {
        body = nullptr;  // the body is no part: never read
    }
    bool in_file = false;
    for (ngx_chain_t* cl = body; cl != nullptr && !in_file; cl = cl->next) {
        in_file = !ngx_buf_in_memory(cl->buf) && cl->buf->in_file;
    }
    if (!in_file) {
        // All in memory, read before this returns: nothing outlives the call.
        BodyHash hash(r, parts, out, done);
        start(&hash, body);
        return;
    }
    void* room = ngx_palloc(r->pool, sizeof(BodyHash));
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, 0);
    if (room == nullptr || cln == nullptr) {
        done(r, false, BodyFault::none);
        return;
    }
    auto* hash = new (room) BodyHash(r, parts, out, done);
    cln->handler = forget;
    cln->data = hash;
    set_event(hash->event, on_event, hash, r->connection->log);
    start(hash, body);
}

}  // namespace idem
