// redis/script_render.cpp — the words of a script call's attempt, chosen as
// it leaves for its server. With conditional writes (info.hpp) the server
// writes only while the key holds our claim: no lease, put-back or clock.
// Elsewhere, or before the server said what it runs, a store's first
// attempt within its lease goes as the leased transaction, the rest as the
// fenced script. See docs/design.md#store-protocols.

#include "script_calls.hpp"

#include <hiredis/hiredis.h>

#include "replies.hpp"

namespace idem::redis {

// EVALSHA sha 1 KEY ARGV... (EVAL body ... once NOSCRIPT was seen); their count.
int ScriptCalls::script_words(const ScriptCall* call, const char** argv, size_t* lens) noexcept
{
    bool with_body = call->with_body;
    argv[0] = with_body ? "EVAL" : "EVALSHA";
    lens[0] = with_body ? 4 : 7;
    argv[1] = with_body ? call->script->body.data() : call->script->sha1;
    lens[1] = with_body ? call->script->body.size() : 40;
    argv[2] = "1";
    lens[2] = 1;
    for (int i = 0; i < call->args.count; i++) {
        argv[3 + i] = call->args.arg[i];
        lens[3 + i] = call->args.len[i];
    }
    return 3 + call->args.count;
}

void ScriptCalls::render_script(ScriptCall* call, LateWords& out) noexcept
{
    const char* argv[3 + max_script_args];
    size_t lens[3 + max_script_args];
    int argc = script_words(call, argv, lens);
    out.add(argc, argv, lens);
    call->form = Form::script;
}

void ScriptCalls::render(void* data, const ServerFeatures& features, LateWords& out)
{
    auto* call = static_cast<ScriptCall*>(data);
    if (render_conditional(call, features, out)) {
        call->form = Form::conditional;
    } else if (call->role == Role::store) {
        render_store(call, out);
    } else {
        render_script(call, out);
    }
    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, call->owner->log_, 0, "idempotency: to %s for \"%*s\" leaves %s",
                   call->script->purpose, call->args.len[0], call->args.arg[0],
                   call->form == Form::conditional ? "as the server's conditional write"
                   : call->form == Form::leased    ? "within its claim's lease"
                                                   : "fenced by the script");
}

// False when the server lacks it, or for a put-back (which exists only for
// the lease). A SET is refused under OOM where the script's PEXPIRE is not,
// so an OOM'd renewal goes again at once as the script: a full Redis never
// lets a claim lapse (docs/design.md#a-full-redis). A keep is the script
// from the start: it must land ahead of its store.
bool ScriptCalls::render_conditional(ScriptCall* call, const ServerFeatures& features, LateWords& out) noexcept
{
    const OwnedArgs<max_script_args>& a = call->args;
    if (call->scripted) {
        return false;
    }
    switch (call->role) {
    case Role::store:
        if (features.set_ifeq) {  // KEYS[1], claim, record, ttl
            const char* set[] = {"SET", a.arg[0], a.arg[2], "IFEQ", a.arg[1], "PX", a.arg[3], "GET"};
            const size_t set_len[] = {3, a.len[0], a.len[2], 4, a.len[1], 2, a.len[3], 3};
            out.add(8, set, set_len);
            return true;
        }
        return false;
    case Role::renewal:
    case Role::keepalive:
        if (features.set_ifeq) {  // KEYS[1], claim, lock_ttl
            const char* set[] = {"SET", a.arg[0], a.arg[1], "IFEQ", a.arg[1], "PX", a.arg[2]};
            const size_t set_len[] = {3, a.len[0], a.len[1], 4, a.len[1], 2, a.len[2]};
            out.add(7, set, set_len);
            return true;
        }
        return false;
    case Role::release:  // KEYS[1], claim
        if (features.del == ConditionalDelete::delifeq) {
            const char* del[] = {"DELIFEQ", a.arg[0], a.arg[1]};
            const size_t del_len[] = {7, a.len[0], a.len[1]};
            out.add(3, del, del_len);
            return true;
        }
        if (features.del == ConditionalDelete::delex_ifeq) {
            const char* del[] = {"DELEX", a.arg[0], "IFEQ", a.arg[1]};
            const size_t del_len[] = {5, a.len[0], 4, a.len[1]};
            out.add(4, del, del_len);
            return true;
        }
        return false;
    case Role::restore:
        return false;
    }
    return false;
}

// Within its lease, first attempt only, the leased transaction (which also
// tells what it overwrote and until when); otherwise the fenced script.
void ScriptCalls::render_store(ScriptCall* call, LateWords& out) noexcept
{
    const OwnedArgs<max_script_args>& a = call->args;
    if (call->retry.failures != 0 || call->lease == nullptr || !call->lease->holds(ngx_current_msec)) {
        render_script(call, out);
        return;
    }
    call->form = Form::leased;
    static const char* const multi[] = {"MULTI"};
    static const char* const exec[] = {"EXEC"};
    static const size_t multi_len[] = {5}, exec_len[] = {4};
    const char* expiretime[] = {"PEXPIRETIME", a.arg[0]};
    const size_t expiretime_len[] = {11, a.len[0]};
    const char* set[] = {"SET", a.arg[0], a.arg[2], "PX", a.arg[3], "XX", "GET"};
    const size_t set_len[] = {3, a.len[0], a.len[2], 2, a.len[3], 2, 3};
    out.add(1, multi, multi_len);
    out.add(2, expiretime, expiretime_len);
    out.add(7, set, set_len);
    out.add(1, exec, exec_len);
}

}  // namespace idem::redis
