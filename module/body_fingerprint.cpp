// body_fingerprint.cpp — see body_fingerprint.hpp.

#include "body_fingerprint.hpp"

#include <new>

namespace idem {
namespace {

// What one turn of the event loop reads and hashes of a body in a file.
constexpr size_t slice_size = 128 * 1024;

struct BodyHash {
    BodyHash(ngx_http_request_t* r, Digest& out, FingerprintDone done) noexcept
        : request(r), fingerprinter(view(r->method_name), view(r->unparsed_uri)), out(out), done(done)
    {
    }

    ngx_http_request_t* request;
    Fingerprinter fingerprinter;
    Digest& out;
    FingerprintDone done;
    ngx_chain_t* next = nullptr;  // the buffer being hashed
    off_t file_pos = -1;          // where in it, when it is in a file
    u_char* slice = nullptr;
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

void finish(BodyHash* hash, bool ok)
{
    if (ok) {
        hash->out = hash->fingerprinter.finish();
        ok = hash->fingerprinter.ok();
    }
    hash->done(hash->request, ok);
}

// Hashes memory buffers until a file buffer has had one slice; true when the
// whole body is hashed.
bool hash_some(BodyHash* hash, bool& ok)
{
    ok = true;
    for (; hash->next != nullptr; hash->next = hash->next->next, hash->file_pos = -1) {
        ngx_buf_t* b = hash->next->buf;
        if (ngx_buf_in_memory(b)) {
            hash->fingerprinter.add_body(b->pos, static_cast<size_t>(b->last - b->pos));
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
        if (hash->slice == nullptr
            && (hash->slice = static_cast<u_char*>(ngx_palloc(hash->request->pool, slice_size))) == nullptr) {
            ok = false;
            return true;
        }
        size_t want = static_cast<size_t>(ngx_min(static_cast<off_t>(slice_size), b->file_last - hash->file_pos));
        ssize_t n = ngx_read_file(b->file, hash->slice, want, hash->file_pos);
        if (n <= 0) {
            ok = false;
            return true;
        }
        hash->fingerprinter.add_body(hash->slice, static_cast<size_t>(n));
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
        finish(hash, ok && hash->fingerprinter.ok());
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

}  // namespace

void fingerprint_request(ngx_http_request_t* r, Digest& out, FingerprintDone done) noexcept
{
    ngx_chain_t* body = r->request_body != nullptr ? r->request_body->bufs : nullptr;
    bool in_file = false;
    for (ngx_chain_t* cl = body; cl != nullptr && !in_file; cl = cl->next) {
        in_file = !ngx_buf_in_memory(cl->buf) && cl->buf->in_file;
    }
    if (!in_file) {
        // All in memory, hashed before this returns: nothing outlives the call.
        BodyHash hash(r, out, done);
        hash.next = body;
        run(&hash);
        return;
    }
    void* room = ngx_palloc(r->pool, sizeof(BodyHash));
    ngx_pool_cleanup_t* cln = ngx_pool_cleanup_add(r->pool, 0);
    if (room == nullptr || cln == nullptr) {
        done(r, false);
        return;
    }
    auto* hash = new (room) BodyHash(r, out, done);
    cln->handler = forget;
    cln->data = hash;
    hash->next = body;
    set_event(hash->event, on_event, hash, r->connection->log);
    run(hash);
}

}  // namespace idem
