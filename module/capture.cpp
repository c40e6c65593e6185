// capture.cpp — records the response of a request holding a claim as it goes
// to the client, through filters at two points of nginx's chain, and hands it
// to the claim after the last byte. Owns capture.hpp's Capture (but for the
// record buffer and the body's pace) and the response's status; strips the
// upstream's control header. Must not change what the client sees otherwise.
// See docs/design.md#how-it-works (Capture) and
// docs/design.md#among-nginxs-other-modules.

#include "capture.hpp"

#include <cstring>
#include <utility>

#include "claim.hpp"
#include "capture_body.hpp"
#include "capture_buffer.hpp"
#include "capture_headers.hpp"
#include "client_gone.hpp"
#include "disposition.hpp"
#include "feed.hpp"
#include "replayable.hpp"
#include "request_ctx.hpp"
#include "send.hpp"
#include "upstream_attempts.hpp"

namespace idem {
namespace {

// below the lower point
ngx_http_output_header_filter_pt next_header_filter;
ngx_http_output_body_filter_pt next_body_filter;
// below the upper point
ngx_http_output_header_filter_pt upper_next_header_filter;
ngx_http_output_body_filter_pt upper_next_body_filter;

}  // namespace

void end_feed(RequestCtx* ctx, LiveEnd how)
{
    if (ctx->capture.feed != nullptr) {
        feed_end(std::exchange(ctx->capture.feed, nullptr), how);
    }
}

namespace {

void stop_capture(ngx_http_request_t*, RequestCtx* ctx)
{
    free_record(ctx);
    end_feed(ctx, LiveEnd::aborted);
}

}  // namespace

bool finish(ngx_http_request_t* r, RequestCtx* ctx)
{
    if (holds_claim(ctx) && ctx->capture.pieces != nullptr && !pieces_landed(ctx)) {
        return false;
    }
    end_feed(ctx, LiveEnd::complete);
    if (!holds_claim(ctx)) {
        return true;
    }
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: captured the response to \"%V\": status %ui, %ui headers, %uz body bytes",
                   &ctx->claim.key, ctx->response_status, ctx->capture.headers.nelts, ctx->capture.body_size);
    ngx_array_t trailers;
    if (ctx->capture.oversize) {
        claim_unreplayable(ctx, ctx->capture.lost_why != nullptr ? ctx->capture.lost_why
                                                                 : "larger than idempotency_max_response_size");
    } else if (!collect_trailers(r, trailers)) {
        claim_unreplayable(ctx, "out of memory");
    } else if (check_header_limits(static_cast<const Header*>(trailers.elts), trailers.nelts) != HeaderLimit::ok) {
        claim_unreplayable(ctx, "its trailers do not fit a record");
    } else if (MarkerWhy flaw = trailers_flaw(trailers); flaw != MarkerWhy::unsaid) {
        claim_unreplayable(ctx, marker_reason(flaw), flaw);
    } else {
        complete_record(r, ctx,
                        ResponseExtras{response_flags(r), static_cast<const Header*>(trailers.elts), trailers.nelts});
    }
    stop_capture(r, ctx);
    return true;
}

namespace {

// If not, the key is released or marked unreplayable (disposition.hpp).
bool keep_response(ngx_http_request_t* r, RequestCtx* ctx, const UpstreamControl* control)
{
    ResponseFacts facts;
    facts.status = static_cast<unsigned>(ctx->response_status);
    facts.from_upstream = upstream_answers(r);
    facts.store_errors = ctx->conf->store_errors;
    facts.release = *ctx->conf->release_statuses;
    facts.upstream = upstream_facts(r, facts.from_upstream ? r->upstream->state : nullptr, facts.release);
    if (control != nullptr && facts.from_upstream) {
        facts.asked = control->storage;
    }
    Verdict verdict = judge_response(facts);
    if (verdict.disposition == Disposition::store && control != nullptr && facts.from_upstream) {
        // also the marker's, should the record turn out too large to keep
        ctx->capture.ttl_ms = control->ttl_s * 1000;
    }
    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: response %ui for \"%V\", from upstream: %d, upstream reached: %d, disposition %d",
                   ctx->response_status, &ctx->claim.key, facts.from_upstream, facts.upstream.reached,
                   static_cast<int>(verdict.disposition));
    switch (verdict.disposition) {
    case Disposition::store:
        return true;
    case Disposition::release:
        claim_release(ctx, verdict.why);
        return false;
    case Disposition::unreplayable:
        claim_unreplayable(ctx, verdict.why);
        return false;
    }
    return false;
}

std::uint8_t body_flags(const ngx_http_request_t* r) noexcept
{
    return static_cast<std::uint8_t>(r->filter_need_in_memory | r->main_filter_need_in_memory << 1
                                     | r->preserve_body << 2);
}

ngx_int_t header_filter(ngx_http_request_t* r)
{
    // the upper filter found the context (find_ctx) for this header already
    auto* ctx = r == r->main ? static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_idempotency_module)) : nullptr;
    if (ctx == nullptr || !capturing(ctx) || ctx->response_status == 0 || ctx->capture.headers.elts != nullptr) {
        return next_header_filter(r);
    }

    ctx->response_status = r->headers_out.status;  // as the client gets it
    // No filter in between took the body in hand (SSI, sub_filter, addition,
    // gunzip, charset, xslt, image_filter and compressors all ask for it in
    // memory or keep the request body for their subrequests): the body is
    // recorded at the upper point, as it comes, where a client that stops
    // reading cannot hold any of it back in the copy filter.
    ctx->capture.point = body_flags(r) == ctx->capture.upper_body_flags ? CapturePoint::upper : CapturePoint::lower;
    if (!collect_headers(r, ctx)) {
        stop_capture(r, ctx);
        claim_unreplayable(ctx, "out of memory");
        return next_header_filter(r);
    }
    auto* headers = static_cast<const Header*>(ctx->capture.headers.elts);
    HeaderLimit limit = check_header_limits(headers, ctx->capture.headers.nelts);
    MarkerWhy flaw = head_flaw(ctx);
    if (limit != HeaderLimit::ok || flaw != MarkerWhy::unsaid) {
        stop_capture(r, ctx);
        claim_unreplayable(ctx, flaw != MarkerWhy::unsaid         ? marker_reason(flaw)
                                : limit == HeaderLimit::too_many ? "more than 100 response headers"
                                                                 : "more than 64 KB of response headers",
                           flaw);
        return next_header_filter(r);
    }
    if (!open_record(r, ctx)) {
        stop_capture(r, ctx);
        claim_unreplayable(ctx, "its headers do not fit a record");
        return next_header_filter(r);
    }
    // The range filter cuts the body above this point but decides below it,
    // so a ranged response could not be recorded whole: a kept response is
    // sent whole, as are its replays (Range is defined for GET alone).
    r->allow_ranges = 0;
    if (ctx->capture.feed != nullptr) {
        auto flags = static_cast<std::uint8_t>(response_flags(r) | (trailers_follow(r) ? expect_trailers : 0));
        feed_publish(ctx->capture.feed, ctx, static_cast<std::uint16_t>(ctx->response_status), headers,
                     ctx->capture.headers.nelts, ResponseExtras{flags});
    }

    ngx_int_t rc = next_header_filter(r);
    if (rc == NGX_ERROR && r->connection->error) {
        detach(r, ctx);
        rc = NGX_OK;
    }
    if (r->header_only) {
        finish(r, ctx);
    }
    return rc;
}

RequestCtx* recording_ctx(ngx_http_request_t* r)
{
    if (r != r->main) {
        return nullptr;
    }
    auto* ctx = static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_idempotency_module));
    // the status first: set only for a response being captured, never for
    // a request without a key (whose context is shared) nor a replay
    if (ctx == nullptr || ctx->response_status == 0 || !passes_capture(ctx)) {
        return nullptr;
    }
    return ctx;
}

ngx_int_t body_filter(ngx_http_request_t* r, ngx_chain_t* in)
{
    RequestCtx* ctx = recording_ctx(r);
    if (ctx == nullptr || ctx->capture.point != CapturePoint::lower) {
        return next_body_filter(r, in);
    }
    return record_body(r, ctx, in, next_body_filter);
}

// An exchange that ends in error once the response began cuts it off: the
// claim is settled and the joiners told now, not after the lingering close.
void upstream_finalized(ngx_http_request_t* r, ngx_int_t rc)
{
    RequestCtx* ctx = find_ctx(r);
    if (ctx == nullptr || ctx->capture.upstream_finalize == nullptr) {
        return;  // not ours: cannot happen
    }
    ctx->capture.upstream_finalize(r, rc);
    if (rc != 0 && rc != NGX_DECLINED && r->upstream != nullptr && r->upstream->header_sent && capturing(ctx)) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "idempotency: the upstream ended the response to \"%V\" unfinished (%i)", &ctx->claim.key, rc);
        capture_settle(ctx);
    }
}

// Before add_header, so that it sees $idempotency_status.
ngx_int_t upper_header_filter(ngx_http_request_t* r)
{
    RequestCtx* ctx = r == r->main ? find_ctx(r) : nullptr;
    bool first = ctx != nullptr && capturing(ctx) && ctx->response_status == 0;
    UpstreamControl control;
    const UpstreamControl* asked = take_upstream_control(r, first, control);
    if (first) {
        ctx->response_status = r->headers_out.status;
        if (keep_response(r, ctx, asked)) {
            ctx->capture.upper_headers = count_headers(r->headers_out.headers);
            ctx->capture.upper_body_flags = body_flags(r);
            ngx_http_upstream_t* u = r->upstream;
            if (u != nullptr && u->finalize_request != upstream_finalized && u->finalize_request != nullptr) {
                ctx->capture.upstream_finalize = u->finalize_request;
                u->finalize_request = upstream_finalized;
            }
        } else {
            stop_capture(r, ctx);
        }
    }
    return upper_next_header_filter(r);
}

bool is_replay(ngx_http_request_t* r)
{
    auto* ctx = static_cast<RequestCtx*>(ngx_http_get_module_ctx(r, ngx_http_idempotency_module));
    return ctx != nullptr
           && (ctx->outcome == Outcome::joined
               || (ctx->stored != nullptr && (ctx->outcome == Outcome::replayed || ctx->outcome == Outcome::waited)));
}

ngx_int_t upper_body_filter(ngx_http_request_t* r, ngx_chain_t* in)
{
    if (r == r->main && is_replay(r)) {
        return next_body_filter(r, in);
    }
    RequestCtx* ctx = recording_ctx(r);
    if (ctx == nullptr) {
        return upper_next_body_filter(r, in);
    }
    if (ctx->capture.point == CapturePoint::undecided) {
        // a filter in between holds the header back (image_filter, xslt):
        // it will change the body
        ctx->capture.point = CapturePoint::lower;
    }
    if (ctx->capture.point != CapturePoint::upper) {
        return upper_next_body_filter(r, in);
    }
    return record_body(r, ctx, in, upper_next_body_filter);
}

}  // namespace

ngx_http_output_body_filter_pt next_body_filter_at(CapturePoint point) noexcept
{
    return point == CapturePoint::upper ? upper_next_body_filter : next_body_filter;
}

void capture_begin(RequestCtx* ctx) noexcept
{
    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "idempotency: forwarding the request for \"%V\" with its claim held", &ctx->claim.key);
    // without memory for the cleanup the response is not captured: the
    // claim ends unreplayable (capture_settle)
    enter(ctx, drain_when_terminated(ctx) ? RequestState::forwarded : RequestState::uncaptured);
    claim_hold(ctx);
    ctx->capture.feed = feed_open(ctx);
    protect_content_handler(ctx);
}

// A claim still held means the response never completed: kept (410) if an
// upstream may have received the request or the response had begun, else
// released for the retry.
void capture_settle(RequestCtx* ctx) noexcept
{
    release_hold(ctx);
    end_feed(ctx, LiveEnd::aborted);  // the response never completed
    free_record(ctx);
    claim_stop_renewing(ctx);
    if (!holds_claim(ctx)) {
        return;
    }
    Verdict verdict = judge_unfinished(upstream_facts(ctx->request, nullptr), ctx->response_status != 0);
    if (verdict.disposition == Disposition::release) {
        claim_release(ctx, verdict.why);
    } else {
        claim_unreplayable(ctx, verdict.why);
    }
}

namespace {

ngx_int_t install(ngx_http_output_header_filter_pt& next_header, ngx_http_output_header_filter_pt header,
                  ngx_http_output_body_filter_pt& next_body, ngx_http_output_body_filter_pt body)
{
    next_header = ngx_http_top_header_filter;
    ngx_http_top_header_filter = header;
    next_body = ngx_http_top_body_filter;
    ngx_http_top_body_filter = body;
    return NGX_OK;
}

}  // namespace

ngx_int_t capture_upper_init(ngx_conf_t*)
{
    return install(upper_next_header_filter, upper_header_filter, upper_next_body_filter, upper_body_filter);
}

ngx_int_t capture_init(ngx_conf_t*)
{
    return install(next_header_filter, header_filter, next_body_filter, body_filter);
}

}  // namespace idem
