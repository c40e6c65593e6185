// fuzz_operator.cpp — libFuzzer target: what the operator's plane reads
// from outside. idem::inspection_json on an arbitrary value found under a
// key (a store anyone can write to): the answer is one JSON object of
// printable ASCII with balanced quotes and braces, whatever the value, and
// a value that is a claim reads its holder only from inside the token.
// idem::UpstreamControlParser on an arbitrary upstream header, split into
// several values by the first byte: the ttl never exceeds the cap, a
// contradiction leaves the configuration in charge, a problem's element
// lies inside a value added.
//
//   make fuzz FUZZ_TARGETS=fuzz_operator        (see the Makefile)
//   build/fuzz/fuzz_operator -max_len=4096 build/fuzz/corpus/fuzz_operator
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "claim_token.hpp"
#include "fuzz_common.hpp"
#include "inspect.hpp"
#include "upstream_control.hpp"

namespace {

void check_json(std::string_view json)
{
    FUZZ_CHECK(json.size() >= 2 && json.front() == '{' && json.back() == '}');
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < json.size(); i++) {
        unsigned char c = static_cast<unsigned char>(json[i]);
        FUZZ_CHECK(c >= 0x20 && c < 0x7f);  // everything else escaped
        if (in_string) {
            if (c == '\\') {
                FUZZ_CHECK(i + 1 < json.size());
                i++;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{') {
            depth++;
        } else if (c == '}') {
            FUZZ_CHECK(depth > 0);
            depth--;
        }
    }
    FUZZ_CHECK(!in_string && depth == 0);
}

void inspect(std::string_view value)
{
    idem::InspectFacts facts;
    facts.key_hash = "00";
    facts.store = "zone fuzz";
    facts.now_ms = 1795695112000ULL;
    facts.ttl_ms = value.empty() ? -1 : static_cast<std::int64_t>(value.size()) * 1000;
    facts.ttl_conf_ms = 86400000;
    facts.wait_ms = value.size() % 2 ? 5000 : 0;
    facts.sealing = value.size() % 3 == 0;
    std::string out(idem::inspection_room(facts.store.size()), '\0');
    std::size_t len = idem::inspection_json(value, facts, out.data(), out.size());
    FUZZ_CHECK(len != 0);
    check_json({out.data(), len});
    if (auto holder = idem::read_holder(value)) {
        FUZZ_CHECK(holder->host.data() >= value.data()
                   && holder->host.data() + holder->host.size() <= value.data() + value.size());
    }
}

void control(const std::uint8_t* data, std::size_t size)
{
    std::string_view all(reinterpret_cast<const char*>(data), size);
    std::vector<std::string_view> values;
    std::size_t parts = size ? data[0] % 4 + 1 : 1;
    std::string_view rest = all.substr(size ? 1 : 0);
    for (std::size_t i = 0; i < parts; i++) {
        std::size_t take = i + 1 == parts ? rest.size() : rest.size() / (parts - i);
        values.push_back(rest.substr(0, take));
        rest.remove_prefix(take);
    }
    idem::UpstreamControlParser parser;
    for (std::string_view v : values) {
        parser.add(v);
    }
    idem::UpstreamControl c = parser.result();
    FUZZ_CHECK(c.ttl_s <= idem::max_ttl_s);
    FUZZ_CHECK((c.problems == 0) == (c.problem == idem::ControlProblem::none));
    if (c.problem == idem::ControlProblem::contradiction) {
        FUZZ_CHECK(c.storage == idem::StorageAsk::config && c.ttl_s == 0);
    }
    if (!c.problem_at.empty()) {
        bool inside = false;
        for (std::string_view v : values) {
            inside = inside || (c.problem_at.data() >= v.data() && c.problem_at.data() + c.problem_at.size() <= v.data() + v.size());
        }
        FUZZ_CHECK(inside);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    inspect({reinterpret_cast<const char*>(data), size});
    control(data, size);
    return 0;
}
