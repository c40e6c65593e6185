// fingerprint_conf.cpp — see fingerprint_conf.hpp.

#include "fingerprint_conf.hpp"

#include "conf.hpp"
#include "conf_util.hpp"

namespace idem {
namespace {

constexpr size_t default_max_size = 64 * 1024;
constexpr size_t max_max_size = 1024 * 1024;  // a turn of the event loop parses it whole
constexpr ngx_uint_t default_max_depth = 32;
constexpr ngx_uint_t max_max_depth = 256;

struct PartName {
    std::string_view name;
    Part part;
};

constexpr PartName part_names[] = {
    {"method", Part::method},         {"uri", Part::uri},   {"path", Part::path},
    {"args", Part::args},             {"args=set", Part::args_set},
    {"body", Part::body},             {"body=json", Part::body_json}, {"body=form", Part::body_form},
};

bool is_body(Part part)
{
    return part == Part::body || part == Part::body_json || part == Part::json_only || part == Part::body_form;
}

char* refuse(ngx_conf_t* cf, const char* what, const ngx_str_t& arg)
{
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"idempotency_fingerprint\": %s \"%V\"", what, &arg);
    return static_cast<char*>(NGX_CONF_ERROR);
}

// What the directive read, before it is checked as a whole.
struct Reading {
    FingerprintConf* fc;
    ngx_array_t* pointers;  // of std::string_view, json= or except=
    bool only = false, except = false;
};

// One option (NAME=VALUE that is no part); nullptr when arg is none.
const char* read_option(const ngx_str_t& arg, FingerprintConf& fc, bool& is_option)
{
    ngx_str_t value;
    is_option = true;
    if (parameter(arg, "unreadable=", value)) {
        if (view(value) != "400" && view(value) != "raw") {
            return "\"unreadable=\" must be 400 or raw, not";
        }
        fc.unreadable_raw = view(value) == "raw";
    } else if (parameter(arg, "max_size=", value)) {
        ssize_t size = ngx_parse_size(&value);
        if (size <= 0 || static_cast<size_t>(size) > max_max_size) {
            return "\"max_size=\" must be a size from 1 to 1m, not";
        }
        fc.max_size = static_cast<size_t>(size);
    } else if (parameter(arg, "max_depth=", value)) {
        ngx_int_t depth = ngx_atoi(value.data, value.len);
        if (depth < 1 || static_cast<ngx_uint_t>(depth) > max_max_depth) {
            return "\"max_depth=\" must be a number from 1 to 256, not";
        }
        fc.json.max_depth = static_cast<unsigned>(depth);
    } else {
        is_option = false;
    }
    return nullptr;
}

// One part; an error's words, or nullptr.
const char* read_part(ngx_conf_t* cf, ngx_str_t& arg, Reading& reading, ngx_array_t* parts)
{
    FingerprintConf& fc = *reading.fc;
    std::string_view a = view(arg);
    bool only = a.substr(0, 5) == "json=", except = a.substr(0, 7) == "except=";
    if (only || except) {
        std::string_view pointer = a.substr(only ? 5 : 7);
        if (!json_pointer_valid(pointer)) {
            return "a JSON Pointer (RFC 6901) is \"\" or starts with \"/\" and escapes only \"~0\" and \"~1\":";
        }
        if (except && pointer.empty()) {
            return "\"except=\" leaves out a member, not the whole body:";
        }
        auto* p = static_cast<std::string_view*>(ngx_array_push(reading.pointers));
        if (p == nullptr) {
            return "cannot allocate for";
        }
        *p = pointer;
        (only ? reading.only : reading.except) = true;
        return nullptr;
    }
    Part part{0};
    for (const PartName& p : part_names) {
        if (p.name == view(arg)) {
            part = p.part;
        }
    }
    if (part == Part{0} && ngx_strlchr(arg.data, arg.data + arg.len, '$') == nullptr) {
        return "unknown part";
    }
    if (is_body(part)) {
        if (fc.body != Part{0}) {
            return "names the body twice:";
        }
        fc.body = part;
        return nullptr;
    }
    auto* fp = static_cast<FingerprintPart*>(ngx_array_push(parts));
    if (fp == nullptr) {
        return "cannot allocate for";
    }
    *fp = {part == Part{0} ? Part::variable : part, nullptr};
    for (ngx_uint_t i = 0; i + 1 < parts->nelts; i++) {
        if (fp->part != Part::variable && static_cast<FingerprintPart*>(parts->elts)[i].part == fp->part) {
            return "names a part twice:";
        }
    }
    if (fp->part == Part::variable) {
        fp->value = static_cast<ngx_http_complex_value_t*>(ngx_pcalloc(cf->pool, sizeof(ngx_http_complex_value_t)));
        ngx_http_compile_complex_value_t ccv{};
        ccv.cf = cf;
        ccv.value = &arg;
        ccv.complex_value = fp->value;
        if (fp->value == nullptr || ngx_http_compile_complex_value(&ccv) != NGX_OK) {
            return "cannot read the variables of";
        }
    }
    return nullptr;
}

// The parts as one whole: the body read one way, json= and except= with it.
const char* check_whole(Reading& reading)
{
    FingerprintConf& fc = *reading.fc;
    if (reading.only && reading.except) {
        return "\"json=\" chooses members, \"except=\" leaves some out: not both, in";
    }
    if (reading.only) {
        if (fc.body != Part{0}) {
            return "\"json=\" makes the chosen members the body's part: no other body part beside it, in";
        }
        fc.body = Part::json_only;
        fc.json.pick = JsonPick::only;
    }
    if (reading.except) {
        if (fc.body != Part::body_json) {
            return "\"except=\" leaves members out of \"body=json\", which is not in";
        }
        fc.json.pick = JsonPick::except;
    }
    fc.json.pointers = static_cast<std::string_view*>(reading.pointers->elts);
    fc.json.count = reading.pointers->nelts;
    if (fc.nparts == 0 && fc.body == Part{0}) {
        return "names no part:";
    }
    return nullptr;
}

bool is_default(const FingerprintConf& fc)
{
    return fc.nparts == 2 && fc.parts[0].part == Part::method && fc.parts[1].part == Part::uri && fc.body == Part::body;
}

}  // namespace

char* set_fingerprint(ngx_conf_t* cf, ngx_command_t*, void* conf)
{
    auto* lcf = static_cast<LocConf*>(conf);
    if (lcf->fingerprint != NGX_CONF_UNSET_PTR) {
        return const_cast<char*>("is duplicate");
    }
    auto* fc = static_cast<FingerprintConf*>(ngx_pcalloc(cf->pool, sizeof(FingerprintConf)));
    ngx_array_t* parts = ngx_array_create(cf->pool, 4, sizeof(FingerprintPart));
    Reading reading{fc, ngx_array_create(cf->pool, 2, sizeof(std::string_view))};
    if (fc == nullptr || parts == nullptr || reading.pointers == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    fc->max_size = default_max_size;
    fc->json.max_depth = default_max_depth;

    // the description: the parts as written, not the options (which bound
    // the reading, not what a readable body's part is)
    auto* args = static_cast<ngx_str_t*>(cf->args->elts);
    size_t room = 0;
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        room += args[i].len + 1;
    }
    fc->description.data = static_cast<u_char*>(ngx_pnalloc(cf->pool, room));
    if (fc->description.data == nullptr) {
        return static_cast<char*>(NGX_CONF_ERROR);
    }
    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        bool is_option;
        const char* error = read_option(args[i], *fc, is_option);
        if (error == nullptr && !is_option) {
            error = read_part(cf, args[i], reading, parts);
            u_char* at = ngx_cpymem(fc->description.data + fc->description.len, args[i].data, args[i].len);
            *at = ' ';
            fc->description.len += args[i].len + 1;
        }
        if (error != nullptr) {
            return refuse(cf, error, args[i]);
        }
    }
    fc->parts = static_cast<FingerprintPart*>(parts->elts);
    fc->nparts = parts->nelts;
    if (const char* error = check_whole(reading)) {
        return refuse(cf, error, args[0]);
    }
    if (is_default(*fc)) {
        lcf->fingerprint = nullptr;  // the default digest, byte for byte
        return NGX_CONF_OK;
    }
    lcf->fingerprint = fc;
    return NGX_CONF_OK;
}

}  // namespace idem
