// access.cpp — the pre-content phase handler, run once nginx's access checks
// admitted the request; it drives the request through the first states of
// its life (request_ctx.hpp's RequestState):
//   checking_key: the key header -> reading_body: the whole body, then its
//   fingerprint (body_fingerprint.cpp) -> claiming, waiting (claim.cpp,
//   wait.cpp) -> granted: forwarded (capture.cpp records the response), or
//   decided: answered (replay, 409, 410, 422, 503).
// Says what a protected request's end does (request_ctx.cpp runs it from the
// pool cleanup): stop what the claim still waits for, settle a claim whose
// response never completed, count the outcome.

#include "access.hpp"

#include "body_fingerprint.hpp"
#include "capture.hpp"
#include "claim.hpp"
#include "client_gone.hpp"
#include "feed.hpp"
#include "key.hpp"
#include "replayable.hpp"
#include "request_ctx.hpp"
#include "log_limit.hpp"
#include "metrics.hpp"
#include "join.hpp"
#include "problem.hpp"
#include "replay.hpp"
#include "send.hpp"

namespace idem {
namespace {

LogLimiter fail_open_log;

void cleanup(RequestCtx* ctx)
{
    claim_stop_waiting(ctx);
    feed_leave(ctx);
    capture_settle(ctx);
    count_outcome(ctx->outcome);
}

const RequestHooks hooks{cleanup, &join_tell};

// ---------------------------------------------------------------- answers

// What the pre-content phase returns once the claim is decided. Runs again
// when an internal redirect brings the request back to the phase: by then
// the module has answered, or follows its claimed request to the location
// that now serves it.
ngx_int_t respond(ngx_http_request_t* r, RequestCtx* ctx)
{
    const OutcomeInfo& outcome = outcome_info(ctx->outcome);
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0, "idempotency: \"%V\": %*s%s", &ctx->claim.key,
                   outcome.name.size(), outcome.name.data(), acted(ctx) ? " (already answered)" : "");
    if (acted(ctx)) {
        if (capturing(ctx)) {
            protect_content_handler(ctx);
        }
        return NGX_DECLINED;
    }
    if (ctx->state == RequestState::granted) {
        capture_begin(ctx);
        return NGX_DECLINED;
    }
    if (ctx->outcome == Outcome::joined) {
        return join_send(r, ctx);
    }
    enter(ctx, RequestState::answered);

    switch (ctx->outcome) {
    case Outcome::replayed:
    case Outcome::waited:
        return replay(r, ctx);
    case Outcome::unavailable:
        if (ctx->conf->fail_open) {
            if (fail_open_log.admit()) {
                ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                              "idempotency: store unavailable, forwarding requests unprotected (%ui since the last line)",
                              fail_open_log.take());
            }
            return NGX_DECLINED;
        }
        break;
    default:
        break;
    }
    if (outcome.http_status == 0) {
        return NGX_DECLINED;
    }
    if (ctx->outcome == Outcome::unreplayable && ctx->unreplayable_why != MarkerWhy::unsaid) {
        OutcomeInfo said = outcome;  // the marker's reason in the problem document
        said.problem = unreplayable_problem(ctx->unreplayable_why);
        answer_problem(r, said);
        return NGX_DONE;
    }
    if (ctx->outcome == Outcome::unreadable) {
        OutcomeInfo said = outcome;  // what is wrong with the body
        said.problem.detail = body_fault_detail(ctx->body_fault);
        answer_problem(r, said);
        return NGX_DONE;
    }
    answer_problem(r, outcome);
    return NGX_DONE;
}

// The request is fingerprinted: claim the key; or its body is not what the
// fingerprint reads: 400.
void fingerprinted(ngx_http_request_t* r, bool ok, BodyFault refused)
{
    RequestCtx* ctx = find_ctx(r);
    if (ok && refused != BodyFault::none) {
        std::string_view why = body_fault_name(refused);
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "idempotency: \"%V\": the request is unreadable for its fingerprint: %*s", &ctx->claim.key,
                      why.size(), why.data());
        ctx->body_fault = refused;
        set_outcome(ctx, Outcome::unreadable);
        r->write_event_handler = ngx_http_core_run_phases;  // the phases again, to answer
        ngx_http_core_run_phases(r);
        return;
    }
    if (!ok || !make_claim_record(ctx)) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0, "idempotency: cannot fingerprint the request");
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    claim_key(ctx);
}

// The whole body is here (memory, temporary file, de-chunked).
void body_ready(ngx_http_request_t* r)
{
    RequestCtx* ctx = find_ctx(r);
    fingerprint_request(r, ctx->conf->fingerprint, ctx->fingerprint, fingerprinted);
}

// ------------------------------------------------------------ the key

// nginx keeps a lower-case copy of every request header's name.
bool has_name(const ngx_table_elt_t& h, const ngx_str_t& lowcase_name)
{
    if (h.key.len != lowcase_name.len) {
        return false;
    }
    return h.lowcase_key != nullptr ? ngx_memcmp(h.lowcase_key, lowcase_name.data, lowcase_name.len) == 0
                                    : ngx_strncasecmp(h.key.data, lowcase_name.data, lowcase_name.len) == 0;
}

}  // namespace

KeyLookup find_key_header(ngx_http_request_t* r, const ngx_str_t& lowcase_name, ngx_str_t& value)
{
    KeyLookup found = KeyLookup::none;
    for_each_header(r->headers_in.headers, [&](ngx_table_elt_t& h) {
        if (!has_name(h, lowcase_name)) {
            return true;
        }
        found = found == KeyLookup::none ? KeyLookup::one : KeyLookup::many;
        value = h.value;
        return found == KeyLookup::one;
    });
    return found;
}

// The module acts in the pre-content phase, after the whole access phase
// (allow/deny, auth_basic, auth_request, under `satisfy all` or `any`)
// admitted the request and set its variables, and before try_files and the
// content handler. A request that an internal redirect brings back here
// (try_files, error_page, named locations, X-Accel-Redirect) keeps what was
// decided; a claimed one has the new location's content handler protected.
ngx_int_t precontent_handler(ngx_http_request_t* r)
{
    if (r != r->main) {
        return NGX_DECLINED;
    }
    RequestCtx* ctx = find_ctx(r);
    if (ctx != nullptr) {
        // before the claim's answer (body, claim, wait), the phase waits
        return ctx->state >= RequestState::granted ? respond(r, ctx) : NGX_DONE;
    }

    auto* conf = static_cast<LocConf*>(ngx_http_get_module_loc_conf(r, ngx_http_idempotency_module));
    if (!conf->enable || !(r->method & conf->methods)) {
        return NGX_DECLINED;
    }
    ngx_str_t value = ngx_null_string;
    KeyLookup found;
    if (conf->key != nullptr) {
        // idempotency_key: the key is whatever the variables give; empty is none
        if (ngx_http_complex_value(r, conf->key, &value) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        found = value.len ? KeyLookup::one : KeyLookup::none;
    } else {
        found = find_key_header(r, conf->header_lowcase, value);
    }
    if (found == KeyLookup::none && !conf->required) {
        return pass_keyless(r);
    }

    ctx = create_ctx(r, conf, &hooks);
    if (ctx == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    switch (found) {
    case KeyLookup::none:
        set_outcome(ctx, Outcome::missing);
        return respond(r, ctx);
    case KeyLookup::many:
        set_outcome(ctx, Outcome::invalid);
        return respond(r, ctx);
    case KeyLookup::one:
        break;
    }

    auto* key = static_cast<char*>(ngx_pnalloc(r->pool, value.len ? value.len : 1));
    if (key == nullptr) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ParsedKey parsed = parse_key(view(value), key);
    if (parsed.status != KeyStatus::ok) {
        set_outcome(ctx, Outcome::invalid);
        return respond(r, ctx);
    }
    if (!claim_name(ctx, {key, parsed.length})) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "idempotency: key accepted, store key \"%V\"; reading the body", &ctx->claim.key);
    enter(ctx, RequestState::reading_body);
    ngx_int_t rc = ngx_http_read_client_request_body(r, body_ready);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }
    ngx_http_finalize_request(r, NGX_DONE);
    return NGX_DONE;
}

}  // namespace idem
