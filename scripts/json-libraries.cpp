// json-libraries.cpp — the two JSON libraries Debian packages, compared on
// the one task the module gives them: the canonical form of a body
// (RFC 8785, module/json_canonical.hpp). simdjson through the module's own
// canonical_json; nlohmann/json through its SAX interface (a member named
// twice refused, as there) and the same writer's pieces (numbers, strings,
// UTF-16 member order). Canonicalizes FILE N times and prints the form's
// length; scripts/fingerprint-cost.sh counts the instructions and times it.
// With raw, json or members, the whole fingerprint of such a body instead,
// as the module makes it: SHA-256 of the body's bytes (the default), of
// its canonical form (body=json), of two chosen members (json=/amount
// json=/currency), each with its framing.
//   json-libraries nlohmann|simdjson|raw|json|members FILE N
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fingerprint.hpp"
#include "fingerprint_parts.hpp"
#include "json_canonical.hpp"

namespace {

using json = nlohmann::json;

// Builds the document; a member named twice stops the parse.
struct Builder {
    json root;
    std::vector<json*> stack;
    json* slot = nullptr;

    json* target()
    {
        if (stack.empty()) {
            return &root;
        }
        if (stack.back()->is_array()) {
            stack.back()->get_ref<json::array_t&>().emplace_back();
            return &stack.back()->get_ref<json::array_t&>().back();
        }
        return slot;
    }
    template <typename T>
    bool put(T&& v)
    {
        *target() = std::forward<T>(v);
        return true;
    }
    bool open(json&& container)
    {
        json* at = target();
        *at = std::move(container);
        stack.push_back(at);
        return stack.size() <= 32;
    }
    bool null() { return put(nullptr); }
    bool boolean(bool v) { return put(v); }
    bool number_integer(json::number_integer_t v) { return put(v); }
    bool number_unsigned(json::number_unsigned_t v) { return put(v); }
    bool number_float(json::number_float_t v, const json::string_t&) { return put(v); }
    bool string(json::string_t& v) { return put(std::move(v)); }
    bool binary(json::binary_t&) { return false; }
    bool start_object(std::size_t) { return open(json::object()); }
    bool start_array(std::size_t) { return open(json::array()); }
    bool end_object() { stack.pop_back(); return true; }
    bool end_array() { stack.pop_back(); return true; }
    bool key(json::string_t& name)
    {
        auto [member, fresh] = stack.back()->get_ref<json::object_t&>().emplace(std::move(name), nullptr);
        slot = &member->second;
        return fresh;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

void write(const json& v, std::string& out)
{
    switch (v.type()) {
    case json::value_t::array: {
        out += '[';
        const char* comma = "";
        for (const json& e : v.get_ref<const json::array_t&>()) {
            out += comma;
            write(e, out);
            comma = ",";
        }
        out += ']';
        return;
    }
    case json::value_t::object: {
        std::vector<const json::object_t::value_type*> members;
        for (const auto& m : v.get_ref<const json::object_t&>()) {
            members.push_back(&m);
        }
        std::sort(members.begin(), members.end(),
                  [](const auto* a, const auto* b) { return idem::utf16_less(a->first, b->first); });
        out += '{';
        const char* comma = "";
        for (const auto* m : members) {
            out += comma;
            idem::write_json_string(m->first, out);
            out += ':';
            write(m->second, out);
            comma = ",";
        }
        out += '}';
        return;
    }
    case json::value_t::string:
        idem::write_json_string(v.get_ref<const json::string_t&>(), out);
        return;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
        idem::write_json_number(v.get<double>(), out);
        return;
    case json::value_t::boolean:
        out += v.get<bool>() ? "true" : "false";
        return;
    default:
        out += "null";
        return;
    }
}

// The fingerprint of one request with this body, as body_fingerprint.cpp
// makes it for each reading; false when the body is unreadable.
bool fingerprint(const std::string& mode, std::string_view body, std::string& form)
{
    static constexpr std::string_view members[] = {"/amount", "/currency"};
    idem::Sha256 sha;
    if (mode == "raw") {
        idem::frame_default(sha, "POST", "/v1/payments");
        sha.update(body.data(), body.size());
        return sha.finish()[0] != 0 || sha.ok();
    }
    const bool json = mode == "json";
    idem::JsonSelection selection{json ? idem::JsonPick::whole : idem::JsonPick::only, json ? nullptr : members,
                                  json ? std::size_t{0} : std::size_t{2}, 32};
    idem::begin_parts(sha, json ? "method uri body=json" : "method path json=/amount json=/currency");
    idem::add_part(sha, idem::Part::method, "POST");
    idem::add_part(sha, json ? idem::Part::uri : idem::Part::path, "/v1/payments");
    if (idem::canonical_json(body, true, selection, form) != idem::BodyFault::none) {
        return false;
    }
    idem::add_part(sha, json ? idem::Part::body_json : idem::Part::json_only, form);
    return sha.finish()[0] != 0 || sha.ok();
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s nlohmann|simdjson|raw|json|members FILE N\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[2], std::ios::binary);
    std::stringstream read;
    read << in.rdbuf();
    std::string body = read.str();
    const std::size_t length = body.size();
    body.append(idem::json_padding, ' ');  // as the module reads a body: with room past its end
    const long n = std::atol(argv[3]);
    const bool simd = std::strcmp(argv[1], "simdjson") == 0;
    const bool whole = simd || std::strcmp(argv[1], "nlohmann") == 0;

    std::string out;
    for (long i = 0; i < n; i++) {
        out.clear();
        if (!whole) {
            if (!fingerprint(argv[1], std::string_view(body).substr(0, length), out)) {
                return 1;
            }
        } else if (simd) {
            idem::JsonSelection whole;
            if (idem::canonical_json(std::string_view(body).substr(0, length), true, whole, out) != idem::BodyFault::none) {
                return 1;
            }
        } else {
            Builder builder;
            if (!json::sax_parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(length), &builder)) {
                return 1;
            }
            out.reserve(length);
            write(builder.root, out);
        }
    }
    std::printf("%zu\n", out.size());
    return 0;
}
