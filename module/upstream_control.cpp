// upstream_control.cpp — see upstream_control.hpp.

#include "upstream_control.hpp"

namespace idem {
namespace {

std::string_view trim(std::string_view s) noexcept
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

bool equals_ci(std::string_view a, std::string_view lower) noexcept
{
    if (a.size() != lower.size()) {
        return false;
    }
    for (size_t i = 0; i < a.size(); i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') {
            c = static_cast<char>(c - 'A' + 'a');
        }
        if (c != lower[i]) {
            return false;
        }
    }
    return true;
}

// A positive decimal integer of seconds, optionally quoted; 0 when it is
// not one. Above max_ttl_s: max_ttl_s + 1 (capped by the caller).
std::uint64_t parse_seconds(std::string_view s) noexcept
{
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') {
        s = s.substr(1, s.size() - 2);
    }
    if (s.empty()) {
        return 0;
    }
    std::uint64_t n = 0;
    for (char c : s) {
        if (c < '0' || c > '9') {
            return 0;
        }
        n = n * 10 + static_cast<unsigned>(c - '0');
        if (n > max_ttl_s) {
            n = max_ttl_s + 1;  // stays there: no overflow however long
        }
    }
    return n;
}

}  // namespace

const char* describe(ControlProblem problem) noexcept
{
    switch (problem) {
    case ControlProblem::none:
        return "nothing";
    case ControlProblem::unknown_directive:
        return "unknown directive";
    case ControlProblem::unexpected_value:
        return "\"store\" and \"no-store\" take no value";
    case ControlProblem::bad_ttl:
        return "\"ttl\" needs a positive number of seconds";
    case ControlProblem::conflicting_ttl:
        return "two different ttls, both ignored";
    case ControlProblem::ttl_capped:
        return "ttl capped at 365 days (31536000 seconds)";
    case ControlProblem::contradiction:
        return "\"store\" with \"no-store\": the header is ignored";
    }
    return "?";
}

void UpstreamControlParser::note(ControlProblem problem, std::string_view at) noexcept
{
    if (problems_++ == 0) {
        problem_ = problem;
        problem_at_ = at;
    }
}

void UpstreamControlParser::element(std::string_view item) noexcept
{
    item = trim(item);
    if (item.empty()) {
        return;
    }
    size_t eq = item.find('=');
    std::string_view name = trim(item.substr(0, eq));
    bool has_value = eq != std::string_view::npos;
    std::string_view value = has_value ? trim(item.substr(eq + 1)) : std::string_view{};

    if (equals_ci(name, "no-store") || equals_ci(name, "store")) {
        if (has_value) {
            note(ControlProblem::unexpected_value, item);
        } else if (name.size() == 5) {
            store_ = true;
        } else {
            no_store_ = true;
        }
        return;
    }
    if (!equals_ci(name, "ttl")) {
        note(ControlProblem::unknown_directive, item);
        return;
    }
    std::uint64_t seconds = parse_seconds(value);
    if (seconds == 0) {
        note(ControlProblem::bad_ttl, item);
        return;
    }
    if (seconds > max_ttl_s) {
        note(ControlProblem::ttl_capped, item);
        seconds = max_ttl_s;
    }
    if (ttl_s_ != 0 && ttl_s_ != seconds) {
        if (!ttl_conflict_) {
            note(ControlProblem::conflicting_ttl, item);
        }
        ttl_conflict_ = true;
    }
    ttl_s_ = seconds;
}

void UpstreamControlParser::add(std::string_view value) noexcept
{
    while (true) {
        size_t comma = value.find(',');
        element(value.substr(0, comma));
        if (comma == std::string_view::npos) {
            return;
        }
        value.remove_prefix(comma + 1);
    }
}

UpstreamControl UpstreamControlParser::result() const noexcept
{
    UpstreamControl c;
    c.problem = problem_;
    c.problem_at = problem_at_;
    c.problems = problems_;
    if (store_ && no_store_) {
        // the upstream contradicts itself: nothing it said of the storage
        // is trusted
        c.problem = ControlProblem::contradiction;
        c.problem_at = {};
        c.problems++;
        return c;
    }
    c.storage = store_ ? StorageAsk::store : no_store_ ? StorageAsk::no_store : StorageAsk::config;
    c.ttl_s = ttl_conflict_ ? 0 : ttl_s_;
    return c;
}

UpstreamControl parse_upstream_control(std::string_view value) noexcept
{
    UpstreamControlParser parser;
    parser.add(value);
    return parser.result();
}

}  // namespace idem
